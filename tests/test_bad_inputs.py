"""The bad-input catalogue: each case gets a clear message naming the problem, a non-zero exit,
and leaves nothing half-made (no run directory for a refused start; run.json untouched for a
refused resume). Generator misbehaviour is in test_generator_run.py, hostile model names in
test_prime_rl_backend.py, trainer faults in test_trainer_faults.py."""
from __future__ import annotations

import json
import time

import pytest

from conftest import driver, driver_env

# ---- `driver run` flags: exit 2, nothing created -------------------------------------------

RUN_FLAGS = [
    ("budget-zero", ["--budget", "0h"], "--budget 0.0: Input should be greater than 0"),
    ("budget-negative", ["--budget=-5m"], "use Nh, Nm or Ns"),
    ("budget-words", ["--budget", "ten hours"], "use Nh, Nm or Ns"),
    ("max-iters-zero", ["--max-iters", "0"], "--max-iters 0: Input should be greater than or equal to 1"),
    ("max-iters-negative", ["--max-iters", "-3"], "--max-iters -3: Input should be greater than or equal to 1"),
    ("max-iters-float", ["--max-iters", "2.5"], "is not an integer"),
    ("batch-not-divisible", ["--batch-size", "100"], "not divisible"),
    ("batch-too-few-prompts", ["--batch-size", "64"], "at least 16"),
    ("model-newline", ["--model", "Qwen\nx"], "one printable line"),
    ("hub-id-newline", ["--hub-id", "team/env\n[trainer]"], "one printable line"),
    ("model-control-char", ["--model", "Qwen\x07"], "one printable line"),
    ("model-huge", ["--model", "m" * 301], "one printable line"),
    ("unknown-backend", ["--backend", "slurm"], "invalid choice: 'slurm'"),
    ("unknown-teacher", ["--teacher", "oracle"], "invalid choice: 'oracle'"),
    ("init-from-missing", ["--init-from", "/nonexistent/run"], "is not a directory"),
    ("llm-without-model", ["--teacher", "llm"], "needs --llm-model"),
    ("iter0-lr-with-init-from", ["--init-from", "/tmp", "--iter0-lr", "3e-5"],
     "--init-from reuses an iter_0 already trained"),
    ("iter0-lr-range", ["--iter0-lr", "2"], "--iter0-lr 2.0: Input should be less than 1"),
    ("probe-min-live-range", ["--probe-min-live", "2"], "--probe-min-live 2.0: Input should be less than or equal to 1"),
    ("seed-not-int", ["--seed", "abc"], "'abc' is not an integer"),
    ("stall-timeout-words", ["--stall-timeout", "forever"], "use Nh, Nm or Ns"),
    ("prime-rl-dir-not-checkout", ["--prime-rl-dir", "/tmp"], "is not a prime-rl checkout"),
]


@pytest.mark.parametrize("args,needle", [c[1:] for c in RUN_FLAGS], ids=[c[0] for c in RUN_FLAGS])
def test_bad_run_flags_exit_2_and_create_nothing(tmp_path, runs, args, needle):
    env = driver_env(tmp_path)
    if "--prime-rl-dir" in args:
        env.pop("DRIVER_RL_COMMAND")
    r = driver(["run", "--runs-dir", str(runs), *args], env)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr
    assert list(runs.iterdir()) == []


# ---- a run directory that cannot be resumed as it is: exit 2, nothing changed -----------------

def _run_dir(tmp_path, **over) -> "tuple":
    from driver.run.model import RunState

    d = tmp_path / "runs" / "stock_arithmetic-x"
    d.mkdir(parents=True)
    st = RunState(dataset="stock_arithmetic", hub_id="primeintellect/stock_arithmetic",
                  model="m", start_ts=time.time(), budget_seconds=60, max_iters=2,
                  batch_size=256, backend="prime_rl", teacher="builtin").model_dump(mode="json")
    st.update(over)
    (d / "run.json").write_text(json.dumps(st))
    (d / "metrics.json").write_text(json.dumps({"iters": [], "controls": []}))
    return d


RUN_DIRS = [
    ("not-a-run-dir", lambda d: (d / "run.json").unlink(), "is not a run directory"),
    ("run-json-corrupted", lambda d: (d / "run.json").write_text('{"dataset": "stock_ar'),
     "run.json in"),
    ("run-json-newer-format", lambda d: (d / "run.json").write_text(json.dumps(
        {**json.loads((d / "run.json").read_text()), "format_version": 99})), "newer than this driver"),
    ("run-json-wrong-types", lambda d: (d / "run.json").write_text(json.dumps(
        {**json.loads((d / "run.json").read_text()), "max_iters": "many"})), "max_iters 'many': Input should be a valid integer"),
    ("run-json-unknown-field", lambda d: (d / "run.json").write_text(json.dumps(
        {**json.loads((d / "run.json").read_text()), "surprise": 1})), "surprise 1: Extra inputs are not permitted"),
    ("metrics-json-corrupted", lambda d: (d / "metrics.json").write_text("{not json"),
     "metrics.json in"),
]


@pytest.mark.parametrize("command", ["resume", "status"])
@pytest.mark.parametrize("spoil,needle", [c[1:] for c in RUN_DIRS], ids=[c[0] for c in RUN_DIRS])
def test_a_spoiled_run_directory_is_refused_and_left_as_it_was(tmp_path, command, spoil, needle):
    d = _run_dir(tmp_path)
    spoil(d)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    r = driver([command, str(d)], driver_env(tmp_path))
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert {p.name: p.read_bytes() for p in d.iterdir() if p.name != ".lock"} == before


def test_an_unknown_phase_in_run_json_is_refused_when_the_file_is_read(tmp_path):
    # the run model types the phase, so a bad one fails before any phase runs, naming the value
    d = _run_dir(tmp_path, phase="teleport")
    before = (d / "run.json").read_bytes()
    r = driver(["resume", str(d)], driver_env(tmp_path))
    assert r.returncode == 2 and "run.json names phase 'teleport', not one of this driver's" in r.stderr
    assert (d / "run.json").read_bytes() == before


# ---- datasets and weakness reports given to `driver validate` --------------------------------

GOOD_ROW = {"question": "q", "answer": "1", "info": {"domain": "d", "sub_domain": "s",
            "difficulty": "hard", "structural_features": ["a", "b"], "source": "template:t",
            "reasoning": "r"}}


def _lines(*rows) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


DATASETS = [
    ("non-json-line", _lines(GOOD_ROW, "{oops", GOOD_ROW), "line 2: not JSON"),
    ("not-an-object", _lines(GOOD_ROW, [1, 2]), "line 2"),
    ("missing-answer", _lines({k: v for k, v in GOOD_ROW.items() if k != "answer"}), "line 1"),
    ("answer-wrong-type", _lines({**GOOD_ROW, "answer": 7}), "line 1"),
    ("info-missing-source", _lines({**GOOD_ROW, "info": {**GOOD_ROW["info"], "source": None}}),
     "line 1: field info.source must be a str, got NoneType"),
    ("difficulty-unknown", _lines({**GOOD_ROW, "info": {**GOOD_ROW["info"], "difficulty": "epic"}}),
     "info.difficulty 'epic' is not easy, medium (or med) or hard"),
    ("huge-row", _lines({**GOOD_ROW, "question": "x" * 5_000_000}), "line 1: 5,000,"),
    ("empty-file", "", "rows"),
]


@pytest.mark.parametrize("text,needle", [c[1:] for c in DATASETS], ids=[c[0] for c in DATASETS])
def test_bad_datasets_fail_validation_with_the_line_named(tmp_path, text, needle):
    from tests_support import weakness_json

    (tmp_path / "dataset.jsonl").write_text(text)
    (tmp_path / "weakness.json").write_text(json.dumps(weakness_json()))
    r = driver(["validate", str(tmp_path / "dataset.jsonl"), "--weakness",
                str(tmp_path / "weakness.json")], driver_env(tmp_path), timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert needle in r.stdout and "Traceback" not in r.stderr


@pytest.mark.parametrize("text,needle", [
    ("{not json", "weakness.json is not JSON"),
    (json.dumps({"domains": "many"}), "domains"),
    (json.dumps([1, 2, 3]), "weakness.json"),
], ids=["weakness-not-json", "weakness-wrong-types", "weakness-not-an-object"])
def test_bad_weakness_reports_are_named_field_by_field(tmp_path, text, needle):
    (tmp_path / "dataset.jsonl").write_text(_lines(GOOD_ROW))
    (tmp_path / "weakness.json").write_text(text)
    r = driver(["validate", str(tmp_path / "dataset.jsonl"), "--weakness",
                str(tmp_path / "weakness.json")], driver_env(tmp_path), timeout=300)
    assert r.returncode in (1, 2), r.stdout + r.stderr
    assert needle in r.stdout + r.stderr and "Traceback" not in r.stderr


def test_validate_names_a_missing_file(tmp_path):
    r = driver(["validate", str(tmp_path / "nope.jsonl"), "--weakness", str(tmp_path / "w.json")],
               driver_env(tmp_path))
    assert r.returncode == 2 and "nope.jsonl does not exist" in r.stderr


# ---- env names -----------------------------------------------------------------------------

def test_dashes_and_underscores_name_the_same_env_and_an_unknown_one_is_refused(tmp_path):
    ok = driver(["introspect", "stock-arithmetic", "--json"], driver_env(tmp_path))
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["train_size"] == 1000
    bad = driver(["introspect", "stock-arithmetc"], driver_env(tmp_path))
    assert bad.returncode == 2 and "stock-arithmetc" in bad.stderr and "Traceback" not in bad.stderr
