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

@dataclass(frozen=True)
class Limits:
    """How long an arm may show no sign of work, by where it is (the run model's
    --startup-timeout, --stall-timeout and --eval-timeout): a healthy prime-rl arm is silent for
    long stretches at known places (vLLM and the trainer starting; a final eval that writes its
    file once, at the end), and only there."""
    startup_s: float   # launch -> its first new train step
    stall_s: float     # between two new train steps
    eval_s: float      # after the last step (or from launch, for an eval-only launch) -> done

    def cap_s(self, steps: int) -> float:
        """The longest a healthy launch of `steps` new steps can take under these limits: the
        poll's hard cap, which a working arm never meets."""
        return self.startup_s + steps * self.stall_s + self.eval_s

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
         limits: Limits, steps: int = 0, progress: Callable[[], int] | None = None,
         interval: float = 1.0, on_tick: Callable[[int], None] | None = None) -> PollResult:
    """Wait until the trainer has exited (status file written), it shows no sign of work for
    longer than its limits allow where it is ("stalled"), or the cap is reached ("timeout").

    Done means exit status 0 and a complete eval file. The eval file filling up first is not
    enough on its own: the trainer may still be writing checkpoints after its final eval.
    `progress()` counts the launch's new train steps on disk (of `steps`); a new step or a new
    eval row is a sign of work. A stalled or timed-out trainer is still running: the caller
    stops it (`stop`) before anything else is launched.
    """
    start = time.monotonic()
    last_progress: tuple[int, int] | None = None
    last_change = start
    cap = limits.cap_s(steps)
    while True:
        if tp is not None:
            reap(tp)
        rows = count_lines(eval_file)
        # liveness before the status file: a trainer that exits in between is still seen
        rc = exit_status(log)
        # the wrapper gone without a status while its trainer runs on: still running
        alive = tp is not None and (is_alive(tp) or (rc is None and bool(group_members(tp))))
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
        done = progress() if progress is not None else 0
        if (done, rows) != last_progress:
            last_progress, last_change = (done, rows), t
        silent = t - last_change
        if steps and done == 0 and rows == 0 and silent >= limits.startup_s:
            return PollResult("stalled", None, rows, f"no train step within {limits.startup_s:.0f}s "
                              "of launch (--startup-timeout)")
        if 0 < done < steps and silent >= limits.stall_s:
            return PollResult("stalled", None, rows, f"no new train step or eval row for "
                              f"{limits.stall_s:.0f}s (--stall-timeout)")
        if done >= steps and silent >= (limits.eval_s if steps else limits.startup_s + limits.eval_s):
            return PollResult("stalled", None, rows, f"the final eval wrote {rows}/{expected_rows} rows "
                              f"and no new one for {silent:.0f}s after the last step (--eval-timeout)")
        if t - start >= cap:
            return PollResult("timeout", None, rows, f"no completion after {cap:.0f}s, the longest "
                              "a working arm takes under its limits")
        if on_tick:
            on_tick(rows)
        time.sleep(interval)


def group_members(tp: ProcessIdentity) -> list[psutil.Process]:
    """The live processes of the group (session) we launched `tp` as the leader of, started no
    earlier than it: the trainer under its wrapper, and anything the trainer started (vLLM,
    torchrun). The wrapper may be gone while its trainer still runs."""
    members = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == tp.pid and p.info["status"] != psutil.STATUS_ZOMBIE \
                    and process_start(p)[0] >= tp.create_time - 1.0:
                members.append(p)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return members


def stop(tp: ProcessIdentity, grace_s: float = 10.0) -> None:
    """Stop a process group we launched in its own session (a trainer: wrapper, trainer and
    its children; a generator), TERM then KILL, and return only once every member is gone: a
    trainer that ignores TERM, or outlives its wrapper, is never left holding the GPUs while
    the next arm starts. `tp` needs only `pid` and `create_time`."""
    import signal

    if not is_alive(tp) and not group_members(tp):
        return
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 30.0)):
        try:
            os.killpg(tp.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            reap(tp)
            if not is_alive(tp) and not group_members(tp):
                return
            time.sleep(0.1)
    raise OSError(f"process group {tp.pid} survived SIGKILL for 30 s; stop it by hand "
                  f"(kill -9 -- -{tp.pid}) before resuming")


def log_tail(log: Path, n: int = 20) -> str:
    try:
        return "\n".join(Path(log).read_text(errors="replace").splitlines()[-n:])
    except FileNotFoundError:
        return "(no log)"


class ProcessRunner:
    """Launches as local processes in their own session (prime-rl's `uv run rl`, the embedded
    trainer, a stand-in): the functions above, as a Runner."""

    def find(self, recorded: TrainerProcess | None, out: Path) -> TrainerProcess | None:
        if recorded is not None and recorded.output_dir == str(out):
            if is_alive(recorded):
                return recorded
            if group_members(recorded):
                # its wrapper is gone, so no exit status will come: stop what is left of it
                # rather than launch beside it
                stop(recorded)
        return find_orphan(out)

    def launch(self, command: Command, args: list[str], out: Path, log: Path) -> TrainerProcess:
        return launch(command, args, out, log)

    def exit_status(self, log: Path) -> int | None:
        return exit_status(log)

    def poll(self, tp: TrainerProcess | None, log: Path, eval_file: Path, expected_rows: int, *,
             limits: Limits, steps: int, progress: Callable[[], int], interval: float,
             on_tick: Callable[[int], None] | None) -> PollResult:
        return poll(tp, log, eval_file, expected_rows, limits=limits, steps=steps,
                    progress=progress, interval=interval, on_tick=on_tick)

    def stop(self, tp: TrainerProcess) -> None:
        stop(tp)
