"""Launch a trainer detached and poll it on file and process signals.

The trainer runs in its own session (so killing the driver never kills it) under a tiny shell
wrapper that records its exit status in a file: a driver that re-attaches after a crash still
learns how the trainer ended. Polling never reads the log: it watches the expected eval file's
row count and the process, with a hard cap. A poll timeout never relaunches.
"""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from driver.backends.base import Command, ProcessIdentity
from driver.run.model import TrainerProcess
from driver.run.rundir import now

DEFAULT_POLL_CAP_S = 2 * 60 * 60

# "$@" keeps every argument a separate word: nothing is interpolated into shell text.
_WRAPPER = 'rc_file="$1"; log_file="$2"; shift 2; "$@" >"$log_file" 2>&1; echo $? >"$rc_file"'


def rc_path(log: Path) -> Path:
    return Path(log).with_suffix(".rc")


def launch(command: Command, args: list[str], output_dir: Path, log: Path) -> TrainerProcess:
    log = Path(log)
    rc = rc_path(log)
    if rc.exists():
        rc.unlink()
    cmd = ["/bin/sh", "-c", _WRAPPER, "rl-wrapper", str(rc), str(log), *command.argv, *args]
    proc = subprocess.Popen(cmd, cwd=command.cwd, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    create_time, since_boot = process_start(psutil.Process(proc.pid))
    return TrainerProcess(pid=proc.pid, create_time=create_time, started_since_boot=since_boot,
                          output_dir=str(output_dir),
                          config_paths=[a for a in args if a.endswith(".toml")],
                          launched_ts=now())


def process_start(p: psutil.Process) -> tuple[float, float]:
    """(create time, seconds since boot) of a process. psutil derives the wall-clock create time
    from the kernel's boot time, which the kernel reports as wall clock minus uptime in whole
    seconds: a clock adjustment moves it, and every create time with it, by a second. Their
    difference, the start since boot, does not move."""
    create_time = p.create_time()
    return create_time, create_time - psutil.boot_time()


def is_alive(tp: ProcessIdentity) -> bool:
    """Same pid and same start: a recycled pid is not our trainer. `tp` needs `pid` and
    `create_time`; its `started_since_boot`, where recorded, is what is compared, so a clock
    adjustment while a trainer runs cannot make it look dead."""
    try:
        p = psutil.Process(tp.pid)
        create_time, since_boot = process_start(p)
        recorded = tp.started_since_boot
        if recorded is not None:
            if abs(since_boot - recorded) > 0.01:
                return False
        elif abs(create_time - tp.create_time) > 0.01:
            return False
        return bool(p.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def find_orphan(output_dir: Path) -> TrainerProcess | None:
    """A trainer launched for this output dir whose pid was never recorded (the driver died
    between launch and saving run.json). Found by its command line, never by its log."""
    needle = str(output_dir)
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmdline = p.info.get("cmdline") or []
        if cmdline[:3] == ["/bin/sh", "-c", _WRAPPER] and needle in cmdline:
            create_time, since_boot = process_start(p)
            return TrainerProcess(pid=p.info["pid"], create_time=create_time,
                                  started_since_boot=since_boot,
                                  output_dir=needle, config_paths=[], launched_ts=now())
    return None


def reap(tp: ProcessIdentity) -> None:
    """Collect the wrapper if it is our child, so it does not linger as a zombie."""
    try:
        os.waitpid(tp.pid, os.WNOHANG)
    except ChildProcessError:
        pass


def count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return 0


@dataclass
class PollResult:
    outcome: str          # "done" | "failed" | "timeout" | "stalled"
    returncode: int | None
    eval_rows: int
    detail: str = ""


def exit_status(log: Path) -> int | None:
    try:
        return int(rc_path(log).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def poll(tp: TrainerProcess | None, log: Path, eval_file: Path, expected_rows: int, *,
         interval: float = 1.0, cap_s: float = DEFAULT_POLL_CAP_S,
         on_tick: Callable[[int], None] | None = None, progress: Callable[[], object] | None = None,
         stall_s: float | None = None) -> PollResult:
    """Wait until the trainer has exited (status file written) or the cap is reached.

    Done means exit status 0 and a complete eval file. The eval file filling up first is not
    enough on its own: the trainer may still be writing checkpoints after its final eval.
    `progress()` returns anything that changes while the trainer works (the train steps on
    disk, the eval rows); unchanged for `stall_s`, the trainer is reported as stalled.
    """
    start = time.monotonic()
    last_progress, last_change = None, start
    while True:
        if tp is not None:
            reap(tp)
        rows = count_lines(eval_file)
        # liveness before the status file: a trainer that exits in between is still seen
        alive = tp is not None and is_alive(tp)
        rc = exit_status(log)
        if rc is not None or not alive:
            if rc == 0 and rows >= expected_rows:
                return PollResult("done", rc, rows)
            if rc == 0:
                return PollResult("failed", rc, rows,
                                  f"trainer exited 0 but the eval file has {rows}/{expected_rows} rows")
            if rc is None and rows >= expected_rows:
                # Exited without writing its status (killed hard) after a complete eval.
                return PollResult("failed", None, rows, "trainer vanished without an exit status")
            return PollResult("failed", rc, rows, f"trainer exited with status {rc}")
        t = time.monotonic()
        if progress is not None:
            p = (progress(), rows)
            if p != last_progress:
                last_progress, last_change = p, t
            elif stall_s is not None and t - last_change >= stall_s:
                return PollResult("stalled", None, rows,
                                  f"no new train step or eval row for {stall_s:.0f}s")
        if t - start >= cap_s:
            return PollResult("timeout", None, rows, f"no completion after {cap_s:.0f}s")
        if on_tick:
            on_tick(rows)
        time.sleep(interval)


def stop(tp: ProcessIdentity, grace_s: float = 10.0) -> None:
    """Stop a process we launched in its own session (a trainer: wrapper and trainer; a
    generator), TERM then KILL. `tp` needs only `pid` and `create_time`."""
    import signal

    if not is_alive(tp):
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(tp.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            reap(tp)
            if not is_alive(tp):
                return
            time.sleep(0.1)


def log_tail(log: Path, n: int = 20) -> str:
    try:
        return "\n".join(Path(log).read_text(errors="replace").splitlines()[-n:])
    except FileNotFoundError:
        return "(no log)"
