"""--budget is the whole run's, the controls included: the loop's gate starts another iteration only
while the time left covers it and the three controls at their measured time.

The run is the demo's loop (the built-in teacher on StockArithmetic) on --backend local (the
embedded trainer and its built-in student: the extended command's, about a minute) and on the
trainer double (the main suite's), on a clock whose launches take a known time: the driver's wall
clock (driver/clock.py) stands still except that each launch, when its poll returns, has taken
START_S + STEP_S per train step + ROW_S per eval row. So what the gate measures, and how many
iterations the budget allows, is the same on any machine at any load."""
from __future__ import annotations

import json
import os
import time

import pytest

from conftest import driver, driver_env, run_dir_from

MODEL = "builtin:tiny-char-qwen2?sft_steps=20&hidden_size=32&ffn=64&layers=1&heads=2"
STEPS, BATCH, GROUP = 2, 64, 4
EVAL_EXAMPLES, SPLIT = 8, 16  # every arm's eval of each split (test and selection), and the splits' size
START_S, STEP_S, ROW_S = 600.0, 300.0, 2.0
BUDGET_S = 7200.0


def launch_s(steps: int, eval_rows: int) -> float:
    return START_S + STEP_S * steps + ROW_S * eval_rows


ARM_S = launch_s(STEPS, 2 * EVAL_EXAMPLES)          # iter_0 and each iteration: 1232 s
CONTROL_S = ARM_S                                   # a control, evaluated on the same examples
# the gate's estimate of a control: the slowest arm, scaled by the rollouts each samples (the
# same number: a control trains and evaluates as an iteration does)
CONTROL_ESTIMATE_S = ARM_S


def timed_launches(monkeypatch, runner) -> None:
    """The driver's wall clock, advanced only by each launch's known length, on `runner`'s polls
    (the runner the in-process driver gets for the backend)."""
    from driver import clock

    now = [time.time()]
    poll = runner.poll

    def timed_poll(self, tp, log, eval_file, expected_rows, *, steps, **kw):
        res = poll(self, tp, log, eval_file, expected_rows, steps=steps, **kw)
        now[0] += launch_s(steps, expected_rows)
        return res

    monkeypatch.setattr(clock, "wall", lambda: now[0])
    monkeypatch.setattr(runner, "poll", timed_poll)


def local_backend(tmp_path, monkeypatch) -> tuple[list[str], dict]:
    from driver.backends.process import ProcessRunner

    pytest.importorskip("torch")
    timed_launches(monkeypatch, ProcessRunner)
    env = driver_env(tmp_path, EMBEDDED_TRAINER_CACHE=tmp_path / "cache")
    env.pop("DRIVER_RL_COMMAND")
    # greedy only, so that an arm's eval rows are the double's (the clock counts rows)
    return ["--backend", "local", "--model", MODEL, "--max-completion-tokens", "16",
            "--eval-draws", "0"], env


def trainer_double(tmp_path, monkeypatch) -> tuple[list[str], dict]:
    from driver.backends.process import ProcessRunner
    from inprocess_trainer import ThreadRunner

    # the runner conftest.driver gives the double: a thread's, or (SUITE_TRAINER_PROCESSES) a process's
    timed_launches(monkeypatch, ProcessRunner if os.environ.get("SUITE_TRAINER_PROCESSES") else ThreadRunner)
    return [], driver_env(tmp_path)


@pytest.mark.parametrize("backend", [pytest.param(local_backend, id="local", marks=pytest.mark.extended),
                                     pytest.param(trainer_double, id="double")])
def test_the_loop_stops_starting_iterations_once_the_budget_left_would_not_cover_the_controls(
        tmp_path, runs, monkeypatch, backend):
    # with this budget the gate would have started iterations until 7200 s were gone (iter_5 at
    # 6160 s), and the controls would have run after it, to about 11,000 s
    assert 5 * ARM_S < BUDGET_S < 2 * ARM_S + 3 * CONTROL_ESTIMATE_S + ARM_S
    args, env = backend(tmp_path, monkeypatch)
    r = driver(["run", *args, "--max-iters", "6", "--budget", f"{BUDGET_S:g}s",
                "--steps-per-run", str(STEPS), "--batch-size", str(BATCH),
                "--rollouts-per-example", str(GROUP), "--eval-examples", str(EVAL_EXAMPLES),
                "--env-args", json.dumps({"num_eval_examples": SPLIT}), "--probe-prompts", "0",
                "--seed", "5", "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "budget: 2h for the whole run, the 3 controls included" in r.stderr
    run_dir = run_dir_from(r.stdout)
    state = json.loads((run_dir / "run.json").read_text())
    metrics = json.loads((run_dir / "metrics.json").read_text())
    # iter_0's time was all the first gate knew: it let iteration 1 start; the second gate,
    # knowing iteration 1's, ended the loop while its time was not yet spent
    assert "[gate] iteration 1: " in r.stderr and "(about 20m32s: iter_0's training and evaluation;" in r.stderr
    assert state["status"] == "budget_exhausted" and [m["iter"] for m in metrics["iters"]] == [0, 1]
    assert "[gate] loop ends: budget_exhausted (after iteration 1): 1h18m left of the 2h00m budget " \
           "would not cover one more iteration (about 20m32s: the slowest iteration so far, iter_1)" in r.stderr
    last_gate = [h for h in state["history"] if h["phase"] == "gate"][-1]
    assert last_gate["start_ts"] - state["start_ts"] == 2 * ARM_S < BUDGET_S
    # the controls ran, inside the budget: the run ended before it was spent
    assert sorted(c["run"] for c in metrics["controls"]) == ["run_a", "run_b", "run_c"]
    assert state["total_duration_s"] == 2 * ARM_S + 3 * CONTROL_S <= BUDGET_S
    controls = [h["end_ts"] - h["start_ts"] for h in state["history"] if h["phase"].startswith("run_")]
    assert controls == [CONTROL_S] * 3 and CONTROL_S <= CONTROL_ESTIMATE_S
    # re-opening the loop needs a budget that leaves one more iteration and the controls, as
    # measured: one that does not is refused, with the command that works, and changes nothing
    before = (run_dir / "run.json").read_bytes()
    r = driver(["resume", str(run_dir), "--budget", "150m"], env)
    assert r.returncode == 2 and "would not cover one more iteration and the 3 controls" in r.stderr
    assert f"`driver resume {run_dir} --budget 4h`" in r.stderr
    assert (run_dir / "run.json").read_bytes() == before
