"""Trainer faults and a full disk: each gives a clear recorded failure, a clean stop, and a
resume that retrains the arm, with nothing already written lost. The one fault prime-rl itself
accounts for, an eval rollout that raised and was dropped (its log says how many), is measured
as an errored episode instead."""
from __future__ import annotations

import json

import psutil
import pytest

from conftest import FAST, driver, driver_env, launches, run_dir_from

RUN = ["run", "--max-iters", "1", *FAST]


def _failed_then_resumed(tmp_path, runs, fault_env: dict, needle: str, *, extra=()):
    r = driver([*RUN, *extra, "--runs-dir", str(runs)], driver_env(tmp_path, **fault_env))
    assert r.returncode == 1, r.stderr[-2000:]
    assert needle in r.stderr, r.stderr[-2000:]
    assert "driver resume" in r.stderr
    rd = run_dir_from(r.stdout)
    st = json.loads((rd / "run.json").read_text())
    assert st["status"] == "failed" and st["reason"]
    for p in rd.rglob("*.json"):                                  # every file still whole
        json.loads(p.read_text())
    before = {p: p.read_bytes() for p in (rd / "hub_env.json", rd / "eval_fingerprints.json")
              if p.exists()}
    r2 = driver(["resume", str(rd)], driver_env(tmp_path))
    assert r2.returncode == 0, r2.stderr[-2000:]
    assert json.loads((rd / "run.json").read_text())["status"] == "max_iters_reached"
    assert all(p.read_bytes() == b for p, b in before.items())   # nothing written before is lost
    m = json.loads((rd / "metrics.json").read_text())
    assert [i["iter"] for i in m["iters"]] == [0] and m["iters"][0]["n_eval"] == 200
    return rd, r


def test_a_hung_trainer_is_stopped_after_the_stall_timeout_and_retrained(tmp_path, runs, fast_clock):
    rd, r = _failed_then_resumed(tmp_path, runs, {"DOUBLE_HANG_AT_STEP": "2"},
                                 "no new train step or eval row for 15s", extra=["--stall-timeout", "15s"])
    hung = launches(tmp_path)[0]["pid"]
    assert not psutil.pid_exists(hung) or psutil.Process(hung).status() == psutil.STATUS_ZOMBIE
    assert (rd / "iter_0" / "train.log.failed-1").exists()
    assert len(launches(tmp_path)) == 2


@pytest.mark.parametrize("fault,needle", [
    ({"DOUBLE_SKIP_EVAL": "1"}, "the eval file has 0/400 rows"),
    ({"DOUBLE_EVAL_ROWS": "50"}, "the eval file has 100/400 rows"),
    ({"DOUBLE_TORN_EVAL": "1"}, "line 400 is not JSON (partial write?)"),
    # short by more than the one rollout prime-rl's log says failed
    ({"DOUBLE_FAILED_EVAL_ROLLOUTS": "1", "DOUBLE_EVAL_ROWS": "150"}, "the eval file has 299/400 rows"),
    ({"DOUBLE_SKIP_CHECKPOINT": "1"}, "its final checkpoint is missing"),
])
def test_bad_trainer_output_is_a_recorded_failure_and_resume_retrains(tmp_path, runs, fault, needle):
    rd, _ = _failed_then_resumed(tmp_path, runs, fault, needle)
    assert (rd / "iter_0" / "prime_out.failed-1").exists()       # the bad attempt is kept
    assert len(launches(tmp_path)) == 2


@pytest.mark.parametrize("point", ["write:metrics.json", "write:eval_summary.json"])
def test_a_full_disk_while_writing_stops_cleanly_and_keeps_every_file_valid(tmp_path, runs, point):
    rd, r = _failed_then_resumed(tmp_path, runs, {"DRIVER_FAULT_ENOSPC_AT": point},
                                 "No space left on device")
    assert "free some space" in r.stderr
    assert not list(rd.rglob(".*.tmp"))                          # no temp file left behind
    assert len(launches(tmp_path)) == 1                          # the training was not redone


def test_a_torn_eval_of_an_iteration_sends_the_loop_back_to_train_it(tmp_path, runs):
    r = driver(["run", "--max-iters", "2", *FAST, "--runs-dir", str(runs)],
               driver_env(tmp_path, DOUBLE_TORN_EVAL="iter_1"))
    assert r.returncode == 1 and "partial write" in r.stderr, r.stderr[-2000:]
    rd = run_dir_from(r.stdout)
    st = json.loads((rd / "run.json").read_text())
    assert st["status"] == "failed" and st["phase"] == "evaluate" and st["iteration"] == 1
    r = driver(["resume", str(rd)], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    st = json.loads((rd / "run.json").read_text())
    it1 = [(h["phase"], h["outcome"]) for h in st["history"] if h["iteration"] == 1]
    # the loop, not the evaluate phase, decided to retrain: evaluate -> train -> evaluate
    assert ("evaluate", "train") in it1 and it1[-1] == ("evaluate", "gate")
    outs = [l["output_dir"] for l in launches(tmp_path) if l["output_dir"].endswith("/iter_1/prime_out")]
    assert len(outs) == 2 and (rd / "iter_1" / "prime_out.failed-1").exists()
    assert [i["iter"] for i in json.loads((rd / "metrics.json").read_text())["iters"]] == [0, 1]


def test_an_eval_rollout_prime_rl_dropped_is_counted_as_errored_not_retrained(tmp_path, runs):
    """An env-server timeout in the final eval: classic prime-rl drops the rollout from the eval
    file and its orchestrator log says "1/200 (0.5%) rollouts failed" (rl_contract/classic.py).
    The file, short by exactly what the log accounts for, is a measured arm whose dropped
    rollout is an errored episode, shown apart as errored episodes are; the arm is not
    retrained."""
    r = driver([*RUN, "--runs-dir", str(runs)], driver_env(tmp_path, DOUBLE_FAILED_EVAL_ROLLOUTS="1"))
    assert r.returncode == 0, r.stderr[-2000:]
    rd = run_dir_from(r.stdout)
    out = rd / "iter_0" / "prime_out"
    assert "1/200 (0.5%) rollouts failed" in (out / "logs" / "orchestrator.log").read_text()
    assert "1/200 (0.5%) rollouts failed" in (rd / "iter_0" / "train.log").read_text()
    assert len((out / "run_default" / "rollouts" / "step_3" / "eval_rollouts.jsonl").read_text()
               .splitlines()) == 399
    assert [l["output_dir"] for l in launches(tmp_path)] == [str(out)]   # one launch: not retrained
    assert not list(rd.glob("iter_0/*.failed-*"))
    it0 = json.loads((rd / "metrics.json").read_text())["iters"][0]
    assert (it0["n_eval"], it0["n_errored"], it0["n_selection"]) == (199, 1, 200)
    summary = json.loads((rd / "iter_0" / "eval_summary.json").read_text())
    assert summary["selection"]["n_errored"] == 0
    assert "Errored eval episodes" in (rd / "scratchpad.md").read_text()


def test_the_final_evals_failed_rollouts_are_read_off_prime_rls_log_lines(tmp_path):
    """rl_contract.classic reads the orchestrator's warnings (envs.py:240-243@09e2977) after its
    "Running final evals" (orchestrator.py:814): coloured as `rl` runs it, or as JSON logging
    writes it; the in-loop evals' before it and anything that only looks like one do not count."""
    from rl_contract.classic import (FINAL_EVALS_MESSAGE, ClassicLayout, failed_final_eval_rollouts,
                                     failed_rollouts_message)

    assert failed_rollouts_message(1, 200) == "1/200 (0.5%) rollouts failed"
    assert failed_rollouts_message(3, 7) == "3/7 (42.9%) rollouts failed"
    coloured = ("\x1b[2m12:00:01\x1b[0m \x1b[33m\x1b[1mWARNING\x1b[0m "
                "\x1b[22m2/200 (1.0%) rollouts failed\x1b[0m")
    log = [
        "12:00:00 WARNING 5/200 (2.5%) rollouts failed",          # an in-loop eval's
        "12:00:00    INFO Running evals at ckpt_step=1 for eval",
        f"12:00:01    INFO {FINAL_EVALS_MESSAGE}",
        "12:00:01 WARNING Rollout failed: env server timed out",
        coloured,                                                  # the eval split's
        '{"level": "WARNING", "message": "1/100 (1.0%) rollouts failed", "module": "envs"}',
        "12:00:02 WARNING All rollouts failed for hub-selection, skipping logging metrics",
        "12:00:02 WARNING 1/100 (3.0%) rollouts failed",          # not prime-rl's arithmetic
        "12:00:03 SUCCESS RL training finished!",
    ]
    assert failed_final_eval_rollouts(log) == 3
    assert failed_final_eval_rollouts(log[:2]) == 0              # no final eval reached
    assert failed_final_eval_rollouts([]) == 0
    layout = ClassicLayout()                                     # OUT/logs/orchestrator.log
    assert layout.dropped_eval_rollouts(tmp_path) == 0
    layout.orchestrator_log(tmp_path).parent.mkdir()
    layout.orchestrator_log(tmp_path).write_text("\n".join(log) + "\n")
    assert layout.dropped_eval_rollouts(tmp_path) == 3
