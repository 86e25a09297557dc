"""The trainer double launched in a thread of the test process: the Runner an in-process driver
gets for the double (conftest.driver), so that a whole run's launches cost the double's own
reads and writes, not five interpreters and their teardown each.

What a launch keeps of driver/backends/process.py's: the argv and the environment (an
in-process driver call's os.environ is the shell the test gave it); the log, which holds what
the double prints (this thread's output only, tests/inprocess_trainer.Streams); the exit status
in `<log>.rc`, written as the wrapper writes it, when the launch ends; and the poll itself
(process.watch: the eval file's rows, the new train steps, the limits). A stop ends the launch
where it next waits (trainer_double.pause) and, like a SIGTERMed wrapper, leaves no status.

What it has not: processes. No launcher tree (inference, torchrun, ranks, tail), no signals, no
ports, no orphan left after the driver died. So these launches go to the process runner,
unchanged: every command but the trainer double (the final-weights evaluator, a user's command);
a launch whose knobs shape the tree or its teardown (PROCESS_KNOBS); a launch whose env loads
the row server declines (it loads verifiers itself, as a process); a launch beside one still
running here; and every launch of a test that asks for processes (`driver(..., processes=True)`),
as the tests of the tree and its teardown do. A driver run as a process of its own (own_process,
the kill points) never sees this runner at all.
"""
from __future__ import annotations

import io
import itertools
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from driver.backends.base import Command
from driver.backends.process import Limits, PollResult, ProcessRunner, exit_status, rc_path, watch
from driver.run.model import TrainerProcess
from driver.run.rundir import now

DOUBLE = Path(__file__).resolve().parent / "trainer_double.py"

# knobs that shape what only processes have: signals, the tree's teardown, the server's ports
# (and a rank's teardown time, where it is not driver_env's "0")
PROCESS_KNOBS = ("DOUBLE_IGNORE_TERM", "DOUBLE_RANK_IGNORES_TERM", "DOUBLE_TORCHRUN_GRACE_SECONDS",
                 "DOUBLE_BIND_PORTS")


def _shapes_processes() -> bool:
    return any(os.environ.get(k) for k in PROCESS_KNOBS) or \
        float(os.environ.get("DOUBLE_RANK_TEARDOWN_SECONDS") or 0) > 0


@dataclass(frozen=True)
class Launch:
    tp: TrainerProcess
    thread: threading.Thread


_LAUNCHES: dict[int, Launch] = {}
_PIDS = itertools.count()


def running(pid: int) -> bool:
    """Whether the in-process launch `pid` is still running in this process."""
    launch = _LAUNCHES.get(pid)
    return launch is not None and launch.thread.is_alive()


class Streams(io.TextIOBase):
    """sys.stdout or sys.stderr while launches run here: a launch thread's writes go to its log,
    every other thread's to the stream this one replaced (the in-process driver's capture)."""

    def __init__(self, under):
        self.under = under
        self.logs: dict[int, io.TextIOBase] = {}

    def write(self, s: str) -> int:
        return self.logs.get(threading.get_ident(), self.under).write(s)

    def flush(self) -> None:
        self.logs.get(threading.get_ident(), self.under).flush()

    @staticmethod
    def installed(name: str) -> Streams:
        current = getattr(sys, name)
        if not isinstance(current, Streams):
            current = Streams(current)
            setattr(sys, name, current)
        return current


def _is_double(command: Command) -> bool:
    """`python trainer_double.py`, as driver_env names it, with no arguments of its own."""
    return bool(command.argv) and Path(command.argv[-1]).resolve() == DOUBLE


def _served_here() -> bool:
    """Whether the row server takes this launch's loads (conftest.py starts it): one it declines
    loads through verifiers itself, which sets signal handlers, and only a main thread may."""
    import conftest
    from row_server import import_time   # the server's own test of a request

    return bool(os.environ.get("DOUBLE_ROW_SERVER")) and \
        import_time(dict(os.environ)) == conftest.ROW_SERVER_SETTINGS


class ThreadRunner:
    """driver/backends/base.Runner: the trainer double in a thread, the rest as processes."""

    def __init__(self, grace_s: float = 10.0):
        self.grace_s = grace_s

    def _processes(self) -> ProcessRunner:
        return ProcessRunner(self.grace_s)

    def launch(self, command: Command, args: list[str], out: Path, log: Path) -> TrainerProcess:
        if not _is_double(command) or _shapes_processes() \
                or any(running(pid) for pid in _LAUNCHES) or not _served_here():
            return self._processes().launch(command, args, out, log)
        import trainer_double

        log = Path(log)
        rc_path(log).unlink(missing_ok=True)
        pid = trainer_double.IN_PROCESS_PIDS + next(_PIDS)
        tp = TrainerProcess(pid=pid, create_time=time.time(), started_since_boot=None,
                            output_dir=str(out), config_paths=[a for a in args if a.endswith(".toml")],
                            launched_ts=now(), log=str(log))
        stdout, stderr = Streams.installed("stdout"), Streams.installed("stderr")
        trainer_double.STOP.clear()
        started = threading.Event()
        marker = None   # while it runs, for a launch in another process to see (alive_before)
        if os.environ.get("DOUBLE_LAUNCH_LOG"):
            marker = trainer_double.thread_marker(Path(os.environ["DOUBLE_LAUNCH_LOG"]), pid)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()

        def run() -> None:
            me = threading.get_ident()
            with open(log, "w") as fh:
                stdout.logs[me] = stderr.logs[me] = fh
                started.set()
                rc: int | None
                try:
                    rc = trainer_double.main(list(args), in_process_pid=pid)
                except trainer_double.Stopped:
                    rc = None
                except SystemExit as e:   # the composition's refusals exit as a process would
                    if isinstance(e.code, str):
                        print(e.code, file=fh)
                    rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                except BaseException:
                    traceback.print_exc(file=fh)
                    rc = 1
                finally:
                    stdout.logs.pop(me, None)
                    stderr.logs.pop(me, None)
            if rc is not None:   # the wrapper's last act; a stopped launch leaves none
                rc_path(log).write_text(f"{rc}\n")
            if marker is not None:
                marker.unlink(missing_ok=True)

        thread = threading.Thread(target=run, name=f"trainer-double-{pid}", daemon=True)
        _LAUNCHES[pid] = Launch(tp, thread)
        thread.start()
        started.wait()
        return tp

    def find(self, recorded: TrainerProcess | None, out: Path) -> TrainerProcess | None:
        if recorded is not None and recorded.pid in _LAUNCHES:
            return recorded if running(recorded.pid) and recorded.output_dir == str(out) else None
        for launch in _LAUNCHES.values():
            if launch.tp.output_dir == str(out) and launch.thread.is_alive():
                return launch.tp
        return self._processes().find(recorded, out)

    def exit_status(self, log: Path) -> int | None:
        return exit_status(log)

    def poll(self, tp: TrainerProcess | None, log: Path, eval_file: Path, expected_rows: int, *,
             limits: Limits, steps: int, progress, interval: float, on_tick,
             growing=None) -> PollResult:
        if tp is None or tp.pid not in _LAUNCHES:
            return self._processes().poll(tp, log, eval_file, expected_rows, limits=limits,
                                          steps=steps, progress=progress, interval=interval,
                                          on_tick=on_tick, growing=growing)
        return watch(lambda: running(tp.pid), log, eval_file, expected_rows, limits=limits,
                     steps=steps, progress=progress, growing=growing, interval=interval,
                     on_tick=on_tick)

    def stop(self, tp: TrainerProcess) -> None:
        launch = _LAUNCHES.get(tp.pid)
        if launch is None:
            return self._processes().stop(tp)
        import trainer_double

        trainer_double.STOP.set()
        launch.thread.join(timeout=30)
        if launch.thread.is_alive():
            raise OSError(f"the in-process launch {tp.pid} did not end within 30 s of its stop")
