"""One launch's life on the local process runner (driver/backends/process.py), held to what
prime-rl does at run time (rl_contract/launch.py): an exit is never misread, whatever instant the
trainer ends at; a stop ends the launch's whole process tree, ranks in sessions of their own
included, after giving the launcher's own cleanup its time; and nothing is launched while a port
the launch needs is taken."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from driver.backends import Command
from driver.backends import process

LIMITS = process.Limits(startup_s=30, stall_s=30, eval_s=30)


def test_a_trainer_that_exits_between_the_polls_reads_is_done_not_vanished(tmp_path):
    """The trainer writes its exit status and exits at the worst instant: after the poll has
    looked at one signal and before it looks at the other. Liveness is read first, then the
    status file (then again), so the finished arm is read as done."""
    go = tmp_path / "go"
    trainer = Command(("/bin/sh", "-c", f'while [ ! -e "{go}" ]; do sleep 0.02; done'))
    log = tmp_path / "train.log"
    tp = process.launch(trainer, [], tmp_path, log)

    def exit_now():
        go.touch()
        deadline = time.monotonic() + 10
        while process.exit_status(log) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        while process.is_alive(tp) and time.monotonic() < deadline:   # the wrapper is gone too
            process.reap(tp)
            time.sleep(0.01)
        assert process.exit_status(log) == 0 and not process.is_alive(tp)

    res = process.poll(tp, log, tmp_path / "no-eval", 0, limits=LIMITS, interval=0.05,
                       between_reads=exit_now)
    assert (res.outcome, res.returncode) == ("done", 0), res


def test_eval_rows_written_just_before_the_exit_are_counted(tmp_path):
    """The trainer writes its last eval rows and exits after the poll has counted the rows and
    before it looks at liveness: the rows are counted again once the launch has ended, so a
    complete eval is done, not "exited 0 but the eval file has 0/3 rows"."""
    log, eval_file = tmp_path / "train.log", tmp_path / "eval.jsonl"

    def ends_now() -> bool:
        eval_file.write_text("{}\n" * 3)
        process.rc_path(log).write_text("0\n")
        return False

    res = process.watch(ends_now, log, eval_file, 3, limits=LIMITS, interval=0.05)
    assert (res.outcome, res.returncode, res.eval_rows) == ("done", 0, 3), res


# ---- what counts as work: a step's train file growing ---------------------------------------------

# a launch that keeps appending one episode line to a file (prime-rl's current orchestrator
# through empty batches: every arriving episode to the step still collecting, whose directory
# never changes), for `seconds`, then exits `rc` (its own abort), or goes silent and hangs
APPENDER = r"""
import os, sys, time
path, seconds, rc = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
os.makedirs(os.path.dirname(path), exist_ok=True)
open(path, "a").write('{"ok": false}\n')
end = time.monotonic() + seconds
while time.monotonic() < end:
    time.sleep(0.1)
    with open(path, "a") as f:
        f.write('{"ok": false}\n')
if rc < 0:
    time.sleep(600)   # silent from here on
sys.exit(rc)
"""


def _appending_launch(tmp_path, seconds: float, rc: int, stall_s: float):
    """A current-generation launch from checkpoint 0 to 2 whose step_1 batch is still
    collecting: its `all` file grows for `seconds`, no second step appears. Polled as the driver
    polls an arm (train.py: the layout's steps as progress, its progress_files as growth)."""
    from rl_contract.current import CurrentLayout

    layout, out, log = CurrentLayout(), tmp_path / "out", tmp_path / "train.log"
    all_file = layout.train_file(out, 1)
    tp = process.launch(Command((sys.executable, "-c", APPENDER)), [str(all_file), str(seconds), str(rc)],
                        out, log)
    try:
        res = process.poll(tp, log, tmp_path / "no-eval", 0, steps=2, interval=0.05,
                           limits=process.Limits(startup_s=30, stall_s=stall_s, eval_s=30),
                           progress=lambda: len(layout.train_steps(out, 0, 2)),
                           growing=lambda: layout.progress_files(out, 0, 2))
    finally:
        process.stop(tp, grace_s=1, log=log)
    return res, all_file


def test_a_launch_appending_episodes_to_one_step_past_the_stall_limit_is_not_stalled(tmp_path):
    """prime-rl's current orchestrator through empty batches (zero-advantage groups filtered,
    or groups with no trainable survivor: orchestrator.py:591-592,640-652, train_sink.py:28,
    240-252,309-338@559b447) appends every arriving episode to the one step's `all` file and
    aborts on its own after ten: that growth is work, so --stall-timeout never stops the arm
    inside prime-rl's own window (the driver records prime-rl's abort instead of retraining)."""
    res, all_file = _appending_launch(tmp_path, seconds=4.0, rc=1, stall_s=1.5)
    assert (res.outcome, res.returncode) == ("failed", 1), res   # its own end, not "stalled"
    assert process.count_lines(all_file) >= 10


def test_a_launch_silent_past_the_stall_limit_is_still_stalled(tmp_path):
    """The same launch, once it stops writing anything, is stopped as stalled: growth counts,
    an unchanged file does not."""
    res, all_file = _appending_launch(tmp_path, seconds=0.5, rc=-1, stall_s=1.5)
    assert res.outcome == "stalled" and res.returncode is None, res
    assert "--stall-timeout" in res.detail
    assert process.count_lines(all_file) >= 2


def test_the_layouts_name_the_files_whose_growth_is_work(tmp_path):
    """Current: each of the launch's steps' train `all` file on disk (the step still collecting
    grows there through empty batches). Classic: none; its orchestrator writes nothing while it
    retries an empty batch (orchestrator.py:422-450,466-469@09e2977: the batch is saved only
    once an attempt leaves a trainable rollout; the third empty one writes control/evicted.txt
    and aborts)."""
    from rl_contract.classic import ClassicLayout
    from rl_contract.current import CurrentLayout

    cur, out = CurrentLayout(), tmp_path / "out"
    assert cur.progress_files(out, 3, 6) == []
    for step in (3, 4, 5, 7):    # step_3 an earlier launch's, step_7 a spill past the window
        cur.train_file(out, step).parent.mkdir(parents=True)
        cur.train_file(out, step).write_text("{}\n")
    assert cur.progress_files(out, 3, 6) == [cur.train_file(out, 4), cur.train_file(out, 5)]
    cls = ClassicLayout()
    cls.train_file(out, 3).parent.mkdir(parents=True)
    cls.train_file(out, 3).write_text("{}\n")
    assert cls.progress_files(out, 3, 6) == []


TREE = Path(__file__).resolve().parent / "double_launcher.py"


def _wait_for(pred, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_stop_ends_the_whole_tree_ranks_in_their_own_sessions_included(tmp_path, monkeypatch):
    """torchrun's ranks run in sessions of their own. torchrun wedges in its cleanup and a rank
    ignores SIGTERM (a CUDA/NCCL teardown that never ends): SIGKILL to the launch's group
    leaves the rank alive, holding its GPU, unless the stop walks the recorded tree."""
    monkeypatch.setenv("DOUBLE_RANK_IGNORES_TERM", "1")
    monkeypatch.setenv("DOUBLE_TORCHRUN_GRACE_SECONDS", "600")
    log = tmp_path / "train.log"
    tp = process.launch(Command((sys.executable, str(TREE), "torchrun", "1")), [], tmp_path, log)
    rank = _wait_for(lambda: [p for p in psutil.Process(tp.pid).children(recursive=True)
                              if "rank" in p.cmdline()])[0]
    assert os.getsid(rank.pid) == rank.pid != os.getsid(tp.pid)   # a session of its own
    process.record_tree(tp, log)       # what every poll does
    process.stop(tp, grace_s=1, log=log)
    assert not rank.is_running() or rank.status() == psutil.STATUS_ZOMBIE
    assert process.tree_alive(tp, log) == []


def test_a_launch_that_ends_leaving_a_process_behind_is_cleaned_before_the_poll_returns(tmp_path):
    """The launcher exits 0, but a process it started in another session lives on (prime-rl's
    own cleanup does not wait for a child it SIGKILLed): the runner stops it before it reports
    the launch over, so nothing of it outlives into the next arm."""
    log = tmp_path / "train.log"
    runner = process.ProcessRunner(grace_s=1)
    cmd = Command(("/bin/sh", "-c", f"setsid {sys.executable} {TREE} rank & sleep 1"))
    tp = runner.launch(cmd, [], tmp_path, log)
    res = runner.poll(tp, log, tmp_path / "no-eval", 0, limits=LIMITS, steps=0,
                      progress=lambda: 0, interval=0.1, on_tick=None)
    assert res.outcome == "done"
    assert [pid for pid, _ in process.recorded_tree(log)], "the rank was never recorded"
    assert process.tree_alive(tp, log) == []


def test_the_default_grace_is_prime_rls_own_cleanup_limit(tmp_path, monkeypatch):
    """prime-rl's launcher joins each monitor thread for up to 5 s, then gives each child up to
    60 s before SIGKILL: a stop waits that long for it before SIGKILLing anything itself."""
    from rl_contract import launch

    assert launch.cleanup_bound_s("classic") == 4 * 65 and launch.cleanup_bound_s("current") == 6 * 65
    from driver.context import stop_grace_s
    from driver.run.model import RunState

    for backend, dialect, expected in (("prime_rl", "classic", 260.0), ("prime_rl", "current", 390.0),
                                       ("local", "classic", 10.0)):
        assert stop_grace_s(RunState(start_ts=0, backend=backend, dialect=dialect)) == expected
    assert stop_grace_s(RunState(start_ts=0, backend="prime_rl", stop_grace_s=30)) == 30


def test_a_port_the_launch_needs_is_waited_for_then_refused_naming_its_holder():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    port = s.getsockname()[1]
    try:
        with pytest.raises(OSError, match=f"{port} by pid {os.getpid()}"):
            process.wait_ports_free([port], timeout_s=0.5)
    finally:
        s.close()
    process.wait_ports_free([port], timeout_s=0.5)    # released: free
