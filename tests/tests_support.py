"""Small builders shared by tests."""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path


def python_c(code: str, *args, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -c CODE ARGS...` as a new interpreter runs it, in a process forked from the
    driver's warm worker for this test's settings (driver/envs/worker.py: verifiers and datasets
    imported, no env module and nothing of an earlier request; tests/test_worker.py holds its
    results to a new interpreter's), as the driver runs its own env-side checks. The code runs
    from a file, whose folder is sys.path[0] where `-c` has the working directory."""
    from driver.envs import worker

    with tempfile.TemporaryDirectory(prefix="python-c-") as tmp:
        script = Path(tmp) / "check.py"
        script.write_text(code)
        return worker.run_py(sys.executable, script, [str(a) for a in args], timeout=timeout)


def weakness_json() -> dict:
    """A valid weakness.json for the StockArithmetic family's buckets."""
    from generators.stock_arithmetic import BUCKETS, FEATURE_DEFINITIONS

    domains = list(dict.fromkeys(d for d, _ in BUCKETS))
    return {
        "prev_eval_acc": 0.2, "reward_by_length_quartile": [0.4, 0.3, 0.3, 0.2],
        "domains": [{"name": d, "severity": "high", "evidence": "failed train stories",
                     "sub_domains": [{"name": s} for d2, s in BUCKETS if d2 == d]} for d in domains],
        "allocations": {f"{d} / {s}": 100 for d, s in BUCKETS},
        "structural_features": [{"name": k, "definition": v} for k, v in FEATURE_DEFINITIONS.items()],
    }


def eval_files(run_dir: Path, dialect: str) -> list[Path]:
    """Every eval file under the run directory, as the dialect's layout names them (a directory
    reached by a symbolic link is another run's, and is not entered)."""
    import os

    from driver.dialects import get

    d = get(dialect)
    return sorted(Path(f) / n for f, _, names in os.walk(run_dir) for n in names
                  if d.is_eval_file(Path(f) / n))


def assert_every_eval_file_is_sealed(run_dir: Path, dialect: str) -> list[Path]:
    """Every eval file under the run directory holds sealed rows only (a row seals to itself:
    ids, labels and numbers, no prompt, reply, answer or error text), and each arm's final one
    still measures what its eval_summary.json says. The eval files found."""
    import json

    from driver.analysis import evaluation
    from driver.dialects import get

    d = get(dialect)
    found = eval_files(run_dir, dialect)
    for path in found:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            assert row == d.sealed_eval_row(row), (path, row)
    for summary_path in run_dir.glob("*/eval_summary.json"):
        summary = json.loads(summary_path.read_text())
        again = evaluation.aggregate(d.eval_file(summary_path.parent / "prime_out", summary["final_step"]),
                                     selection_env=d.selection_env, view=d.eval_view,
                                     draws_envs=d.draws_envs)
        # (errored rows prime-rl left out of the file are the summary's to count, not the file's)
        for part, whole in ((again, summary), (again.get("selection"), summary.get("selection"))):
            for key in ("eval_acc", "n_eval", "correct_by_example", "draws"):
                assert (part or {}).get(key) == (whole or {}).get(key), (summary_path, key)
    return found


def files_holding(run_dir: Path, texts: list[str]) -> list[str]:
    """The files under the run directory that hold any of `texts` (as written, or as JSON
    writes them), as a teacher with a shell looking through all of it finds them."""
    import json
    import os

    sought = {t.encode() for t in texts} | {json.dumps(t)[1:-1].encode() for t in texts}
    found = []
    for folder, _dirs, files in os.walk(run_dir):
        for name in files:
            data = (Path(folder) / name).read_bytes()
            if any(s in data for s in sought):
                found.append(str((Path(folder) / name).relative_to(run_dir)))
    return found


def stock_arithmetic_eval_prompts() -> list[str]:
    """Every problem of StockArithmetic-v1's test and validation splits (the eval and selection
    splits; none is a train problem), in both generations' wording."""
    from stock_arithmetic.data import build_splits

    splits = build_splits(0)
    return [r["question"] for split in ("test", "validation", "selection") for r in splits[split]]


def assert_loop_finished_one_iteration(run_dir: Path, model: str) -> None:
    """A whole `--max-iters 2` run ended as the loop ends it: done at max_iters_reached with
    `model`, iter_0 and iter_1 trained and evaluated, the three controls run, and iter_1's
    gradient probe passed with live groups."""
    import json

    state = json.loads((run_dir / "run.json").read_text())
    assert (state["phase"], state["status"]) == ("done", "max_iters_reached")
    assert state["model"] == model
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert [m["iter"] for m in metrics["iters"] if not m.get("skipped")] == [0, 1]
    assert len(metrics["controls"]) == 3
    probe = json.loads((run_dir / "iter_1" / "probe.json").read_text())
    assert probe["passed"] and probe["live_fraction"] > 0
