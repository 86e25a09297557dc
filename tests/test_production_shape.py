"""The trainer double shaped like an arm on real GPUs: a slow start (vLLM and the trainer
loading), a final eval that writes its file once at the end, an eval longer than the poll's cap,
and a trainer that ignores SIGTERM. A slow, healthy arm is never stopped as stalled; an arm that
is stopped is gone before the next arm starts; no two arms ever run at once."""
from __future__ import annotations

import json
import time

import psutil
import pytest

from conftest import FAST, current_env, driver, driver_env, launches, run_dir_from

# limits scaled down from the prime_rl defaults (1 h start-up, 30 min between steps, 2 h eval,
# a stopped launcher's own cleanup: 4 or 6 children x 65 s)
LIMITS = ["--startup-timeout", "30s", "--stall-timeout", "3s", "--eval-timeout", "20s",
          "--stop-grace", "3s"]


def _tree_pids(tmp_path) -> dict[int, list[int]]:
    """Each launch's process tree as the double recorded it: launcher pid -> its children's
    pids, torchrun's ranks (in sessions of their own) among them."""
    p = tmp_path / "launches.jsonl.trees"
    return {x["tree_of"]: x["pids"] for x in map(json.loads, p.read_text().splitlines())} if p.exists() else {}


def _dead(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def _overlaps(tmp_path) -> list[dict]:
    return [launch for launch in launches(tmp_path) if launch["alive_before"]]


# whole runs of a production-shaped arm (1.5 min each): both dialects in CI's extended command
@pytest.mark.extended
@pytest.mark.parametrize("dialect", ["classic", "current"])
def test_a_slow_start_and_an_eval_written_once_at_the_end_are_not_stalls(tmp_path, runs, dialect):
    """Silent for longer than --stall-timeout at start-up and during the final eval, as a GPU
    arm is, yet working: every arm completes, none is stopped or relaunched."""
    extra = {"DOUBLE_STARTUP_SECONDS": "4", "DOUBLE_EVAL_SECONDS": "4"}
    env = driver_env(tmp_path, **extra) if dialect == "classic" else current_env(tmp_path, **extra)
    r = driver(["run", "--max-iters", "2", *FAST, *LIMITS, "--runs-dir", str(runs)], env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    state = json.loads((run_dir_from(r.stdout) / "run.json").read_text())
    assert state["status"] == "max_iters_reached" and not state["phase4_errors"]
    assert len({launch["output_dir"] for launch in launches(tmp_path)}) == len(launches(tmp_path))
    assert _overlaps(tmp_path) == []


@pytest.mark.extended   # waits out the grace in real time; a hung trainer's stop stays in the main suite (test_trainer_faults)
def test_a_stalled_control_that_ignores_sigterm_is_gone_before_the_next_control_starts(tmp_path, runs):
    """run A hangs after a step and ignores SIGTERM: it is stopped (SIGKILL after the grace),
    recorded as failed, and only then does run B start; the run goes on to the summary."""
    # and its torchrun wedges in its own teardown while its rank ignores SIGTERM too (a rank in
    # a session of its own: only a stop that walks the recorded tree reaches it)
    env = driver_env(tmp_path, DOUBLE_SHAPE_ARM="run_a_best_from_iter0", DOUBLE_HANG_AT_STEP="5",
                     DOUBLE_IGNORE_TERM="1", DOUBLE_RANK_IGNORES_TERM="1",
                     DOUBLE_TORCHRUN_GRACE_SECONDS="600")
    r = driver(["run", "--max-iters", "2", *FAST, *LIMITS, "--runs-dir", str(runs)], env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    state = json.loads((rd / "run.json").read_text())
    [error] = state["phase4_errors"]
    assert error.startswith("run_a: ") and "no new train step or eval row for 3s" in error
    by_arm = {launch["output_dir"].split("/")[-2]: launch for launch in launches(tmp_path)}
    hung = by_arm["run_a_best_from_iter0"]["pid"]
    # the launcher and everything it started are gone, its trainer rank (another session) too
    tree = _tree_pids(tmp_path)[hung]
    assert len(tree) >= 3 and all(_dead(pid) for pid in [hung, *tree])
    assert "run_b_combined_from_base" in by_arm and _overlaps(tmp_path) == []
    assert [c["run"] for c in json.loads((rd / "metrics.json").read_text())["controls"]] == ["run_b", "run_c"]


@pytest.mark.extended   # a whole run of 1.5 min; the cap's arithmetic is unit-tested (test_poll_cap*)
def test_an_arm_past_its_poll_cap_is_stopped_and_recorded_never_left_running(tmp_path, runs):
    """run A keeps writing eval rows (so it never looks stalled) for far longer than any working
    arm takes under its limits: the cap stops it, records it, and run B starts after it is gone."""
    env = driver_env(tmp_path, DOUBLE_SHAPE_ARM="run_a_best_from_iter0", DOUBLE_EVAL_ROW_SECONDS="0.5")
    t0 = time.monotonic()
    r = driver(["run", "--max-iters", "2", *FAST, *LIMITS, "--runs-dir", str(runs)], env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    state = json.loads((run_dir_from(r.stdout) / "run.json").read_text())
    [error] = state["phase4_errors"]
    # cap = start-up + 3 steps x stall + eval = 30 + 9 + 20 s; run A alone would take 100 s more
    assert error.startswith("run_a: ") and "no completion after 59s" in error
    assert _overlaps(tmp_path) == [] and time.monotonic() - t0 < 300


def test_poll_gives_up_at_the_cap_on_an_arm_that_never_looks_stalled_and_stop_ends_it(tmp_path):
    """The poll cap in miniature (the whole run is the extended test above): a launch that adds
    an eval row every tick is never silent, so only the cap, startup + steps x stall + eval, ends
    the wait; the launch is still running then, and stop leaves nothing of it."""
    from driver.backends import process
    from driver.backends.base import Command

    log, eval_file = tmp_path / "arm.log", tmp_path / "eval_rollouts.jsonl"
    tp = process.launch(Command(argv=("sleep", "60")), [], tmp_path, log)
    limits = process.Limits(startup_s=0.4, stall_s=0.3, eval_s=0.4)

    def one_more_row(_rows: int) -> None:
        with eval_file.open("a") as f:
            f.write("{}\n")

    t0 = time.monotonic()
    try:
        got = process.poll(tp, log, eval_file, 10**6, limits=limits, steps=2, progress=lambda: 1,
                           interval=0.05, on_tick=one_more_row)
        waited = time.monotonic() - t0
        assert got.outcome == "timeout" and "1s, the longest a working arm takes" in got.detail
        assert limits.cap_s(2) == pytest.approx(1.4) and 1.4 <= waited < 5
        assert process.is_alive(tp)
    finally:
        process.stop(tp, grace_s=2, log=log)
    assert not process.is_alive(tp) and process.group_members(tp) == []
