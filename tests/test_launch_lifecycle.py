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
