"""Trainer faults and a full disk: each gives a clear recorded failure, a clean stop, and a
resume that retrains the arm, with nothing already written lost."""
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
