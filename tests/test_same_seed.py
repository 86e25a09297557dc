"""The same seed gives the same numbers: nothing a run directory differs in (its path, the tag
on its generated env packages) enters a seeded draw. Two runs with one seed write the same
datasets and, but for the tag and the paths, the same configs; the trainer-side key of the
draws, the env's name in the config, carries no tag."""
from __future__ import annotations

import re

import pytest

from conftest import FAST, driver, driver_env, run_dir_from


def _normalized(text: str, rd, tag: str) -> str:
    return text.replace(str(rd), "RUN").replace(f"_{tag}", "_TAG")


@pytest.mark.extended   # two full runs: CI's extended command
def test_two_runs_with_one_seed_write_the_same_datasets_and_configs(tmp_path):
    import json

    dirs = []
    for k in (1, 2):
        r = driver(["run", "--max-iters", "2", *FAST, "--seed", "5", "--runs-dir", str(tmp_path / f"runs{k}")],
                   driver_env(tmp_path, DOUBLE_LAUNCH_LOG=str(tmp_path / f"launches{k}.jsonl")))
        assert r.returncode == 0, r.stderr[-2000:]
        dirs.append(run_dir_from(r.stdout))
    a, b = dirs
    tags = [json.loads((d / "run.json").read_text())["env_tag"] for d in dirs]
    assert tags[0] != tags[1]                                   # the run directories differ
    for rel in ("iter_1/dataset.jsonl", "run_c_untargeted_from_iter0/dataset.jsonl"):
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    for rel in ("iter_1/rl.toml", "run_a_best_from_iter0/rl.toml", "run_b_combined_from_base/rl.toml"):
        assert _normalized((a / rel).read_text(), a, tags[0]) == _normalized((b / rel).read_text(), b, tags[1]), rel
    # the generated env's name in the config (what a trainer keys its draws on) has no tag
    names = re.findall(r'name = "([^"]+)"', (a / "iter_1" / "rl.toml").read_text())
    assert "stock_arithmetic_iter_1" in names and not any(tags[0] in n for n in names)
    ma, mb = (json.loads((d / "metrics.json").read_text()) for d in dirs)
    # and the numbers: every arm's accuracy on both splits (the selection split's env carries the
    # tag in its package name, which no draw may read)
    for key in ("iters", "controls"):
        accs = [[(m["eval_acc"], m["selection_acc"]) for m in metrics[key]] for metrics in (ma, mb)]
        assert accs[0] == accs[1] and len(accs[0]) >= 2, key


@pytest.mark.long   # two whole demo runs side by side on the real embedded trainer (20+ min on 2 cores): outside CI
def test_two_quick_starts_with_one_seed_print_the_same_table_however_busy_the_machine(tmp_path):
    """The quick start's own command (the embedded default) ends on its iteration count, not on
    the clock: two runs with one seed, started together so that each runs beside the other's
    load on 2 cores, print the same summary table."""
    import subprocess
    import sys

    from conftest import cpu_user_env

    env = cpu_user_env(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-m", "driver.cli", "run", "--seed", "3", "--runs-dir",
                               str(tmp_path / f"runs{k}")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in (1, 2)]
    outs = [p.communicate(timeout=5400) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]

    def table(out: str) -> str:
        lines = out.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("run "))
        return "\n".join(lines[start:])
    a, b = (table(out) for out, _ in outs)
    assert a == b and "iter_3" in a    # the quick start's 4 iterations, iter_0 included
