"""Launch a trainer detached and poll it on file and process signals.

The trainer runs in its own session (so killing the driver never kills it) under a tiny shell
wrapper that records its exit status in a file: a driver that re-attaches after a crash still
learns how the trainer ended. Polling never reads the log: it watches the expected eval file's
row count and the process, with a hard cap. A poll timeout never relaunches.

A launch is a process tree, not a group: prime-rl's trainer ranks run in sessions of their own
(rl_contract/launch.py). Every poll walks the wrapper's descendants with psutil and records them
beside the log (`<log>.tree.json`), so a stop reaches each of them even once its parent is gone;
a stop gives the launcher's own cleanup its time (SIGTERM to the group, then the grace) before it
SIGKILLs whatever of the tree is left, and returns only when none of it lives.
"""
from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from driver import clock
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
    queue_s: float = float("inf")   # a hosted run waiting in the platform's queue (unbilled)

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
                          launched_ts=now(), log=str(log))


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


def file_sizes(paths: Iterable[Path]) -> tuple[tuple[str, int], ...]:
    """Each file's size (a file not there is left out): a change in it is growth."""
    sizes = []
    for p in paths:
        try:
            sizes.append((str(p), os.stat(p).st_size))
        except OSError:
            continue
    return tuple(sizes)


def count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return 0


STATUS_SETTLE_S = 0.2   # how long a status file may lag its wrapper's exit on a slow disk
PORT_RELEASE_S = 120.0  # how long a stopped server may take to let go of its port


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
         growing: Callable[[], Iterable[Path]] | None = None,
         interval: float = 1.0, on_tick: Callable[[int], None] | None = None,
         between_reads: Callable[[], None] | None = None) -> PollResult:
    """`watch` a launched process tree: alive while its wrapper is, or anything of its group
    (the wrapper gone without a status while its trainer runs on is still running); each look
    collects the wrapper if it ended and records the tree it has started."""
    def alive() -> bool:
        if tp is None:
            return False
        reap(tp)
        record_tree(tp, log)
        return is_alive(tp) or bool(group_members(tp))

    return watch(alive, log, eval_file, expected_rows, limits=limits, steps=steps,
                 progress=progress, growing=growing, interval=interval, on_tick=on_tick,
                 between_reads=between_reads)


def watch(alive: Callable[[], bool], log: Path, eval_file: Path, expected_rows: int, *,
          limits: Limits, steps: int = 0, progress: Callable[[], int] | None = None,
          growing: Callable[[], Iterable[Path]] | None = None,
          interval: float = 1.0, on_tick: Callable[[int], None] | None = None,
          between_reads: Callable[[], None] | None = None) -> PollResult:
    """Wait until the launch has ended (status file written, or `alive()` false), it shows no
    sign of work for longer than its limits allow where it is ("stalled"), or the cap is
    reached ("timeout").

    Done means exit status 0 and a complete eval file. The eval file filling up first is not
    enough on its own: the trainer may still be writing checkpoints after its final eval.
    `progress()` counts the launch's new train steps on disk (of `steps`); a new step, a new
    eval row, or growth of a file `growing()` names (what the launch writes while a step is
    under way: the dialect's progress_files) is a sign of work. A stalled or timed-out trainer
    is still running: the caller stops it (`stop`) before anything else is launched.
    """
    start = clock.monotonic()
    # silence counts from the launch (or re-attach), not the first tick; files already there
    # then count as they are
    last_progress: tuple = (0, 0, file_sizes(growing()) if growing is not None else ())
    last_change = start
    cap = limits.cap_s(steps)
    while True:
        rows = count_lines(eval_file)
        # liveness first, then the status file: the wrapper writes its status as its last act,
        # so a trainer that exits between the two reads is seen by the second
        running = alive()
        if between_reads:
            between_reads()
        rc = exit_status(log)
        if rc is None and not running:
            clock.sleep(STATUS_SETTLE_S)   # a status written the instant before: read it again
            rc = exit_status(log)
        if rc is not None or not running:
            # counted again now that it has ended: rows it wrote after the count above, before
            # it exited, are in the file
            rows = count_lines(eval_file)
            if rc == 0 and rows >= expected_rows:
                return PollResult("done", rc, rows)
            if rc == 0:
                return PollResult("failed", rc, rows,
                                  f"trainer exited 0 but the eval file has {rows}/{expected_rows} rows")
            if rc is None:
                return PollResult("failed", None, rows, "trainer vanished without an exit status")
            return PollResult("failed", rc, rows, f"trainer exited with status {rc}")
        t = clock.monotonic()
        done = progress() if progress is not None else 0
        sizes = file_sizes(growing()) if growing is not None else ()
        if (done, rows, sizes) != last_progress:
            last_progress, last_change = (done, rows, sizes), t
        silent = t - last_change
        if steps and done == 0 and rows == 0 and silent >= limits.startup_s:
            return PollResult("stalled", None, rows, f"no train step within {limits.startup_s:.0f}s "
                              "of launch (--startup-timeout)")
        if 0 < done < steps and silent >= limits.stall_s:
            return PollResult("stalled", None, rows, f"no new train step or eval row for "
                              f"{limits.stall_s:.0f}s, and nothing written to a step under way "
                              "(--stall-timeout)")
        if done >= steps and silent >= (limits.eval_s if steps else limits.startup_s + limits.eval_s):
            return PollResult("stalled", None, rows, f"the final eval wrote {rows}/{expected_rows} rows "
                              f"and no new one for {silent:.0f}s after the last step (--eval-timeout)")
        if t - start >= cap:
            return PollResult("timeout", None, rows, f"no completion after {cap:.0f}s, the longest "
                              "a working arm takes under its limits")
        if on_tick:
            on_tick(rows)
        clock.sleep(interval)


def group_members(tp: ProcessIdentity) -> list[psutil.Process]:
    """The live processes of the group (session) we launched `tp` as the leader of, started no
    earlier than it: the trainer under its wrapper, and what the trainer started in its group
    (vLLM, torchrun). The wrapper may be gone while its trainer still runs."""
    members = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == tp.pid and p.info["status"] != psutil.STATUS_ZOMBIE \
                    and process_start(p)[0] >= tp.create_time - 1.0:
                members.append(p)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return members


# ---- the launch's process tree -----------------------------------------------------------------

def tree_path(log: Path) -> Path:
    return Path(log).with_suffix(".tree.json")


def _identity(p: psutil.Process) -> tuple[int, float]:
    return p.pid, round(process_start(p)[1], 2)


def _live(pid: int, since_boot: float) -> psutil.Process | None:
    """The process `pid` if it is still the one recorded (same start), and not a zombie."""
    try:
        p = psutil.Process(pid)
        if abs(process_start(p)[1] - since_boot) > 0.05 or p.status() == psutil.STATUS_ZOMBIE:
            return None
        return p
    except psutil.Error:
        return None


def recorded_tree(log: Path) -> list[tuple[int, float]]:
    import json

    try:
        return [(int(a), float(b)) for a, b in json.loads(tree_path(log).read_text())]
    except (OSError, ValueError, TypeError):
        return []


def record_tree(tp: ProcessIdentity, log: Path) -> list[tuple[int, float]]:
    """Every process the launch has started, as far as it has been seen: the wrapper's
    descendants now (psutil walks parent links, across sessions: torchrun's ranks included)
    added to those recorded before, kept beside the log so that a driver that died and came
    back still knows them after their parents are gone."""
    from driver.run.files import atomic_write_json

    known = recorded_tree(log)
    try:
        walked = [_identity(c) for c in psutil.Process(tp.pid).children(recursive=True)]
    except psutil.Error:
        walked = []
    walked += [_identity(m) for m in group_members(tp) if m.pid != tp.pid]
    new = [x for x in dict.fromkeys(walked) if x not in known]
    if new:
        known += new
        atomic_write_json(tree_path(log), known)
    return known


def tree_alive(tp: ProcessIdentity, log: Path | None) -> list[psutil.Process]:
    """What of the launch still runs: the wrapper, its group, and every recorded descendant."""
    alive = {p.pid: p for p in group_members(tp)}
    if is_alive(tp):
        alive.setdefault(tp.pid, psutil.Process(tp.pid))
    for pid, since in (record_tree(tp, log) if log is not None else []):
        p = _live(pid, since)
        if p is not None:
            alive.setdefault(pid, p)
    return list(alive.values())


def stop(tp: ProcessIdentity, grace_s: float = 10.0, log: Path | None = None) -> None:
    """Stop a launch we started in its own session (a trainer: wrapper, launcher and all it
    started; a generator), and return only once nothing of it lives. SIGTERM goes to its group,
    the launcher among it, whose own cleanup then ends the rest of its tree (prime-rl's takes
    up to a minute a child: rl_contract/launch.py); after `grace_s`, everything of the tree that
    is left, ranks in other sessions included (`log`'s recorded tree), is SIGKILLed. A trainer
    that ignores SIGTERM, or a rank orphaned by its launcher, is never left holding the GPUs
    while the next arm starts. `tp` needs only `pid` and `create_time`."""
    import signal

    if log is None and getattr(tp, "log", None):
        log = Path(str(getattr(tp, "log")))
    if not tree_alive(tp, log):
        return
    try:
        os.killpg(tp.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = clock.monotonic() + grace_s
    while clock.monotonic() < deadline:
        reap(tp)
        if not tree_alive(tp, log):
            return
        clock.sleep(0.1)
    for _ in range(2):
        left = tree_alive(tp, log)
        try:
            os.killpg(tp.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for p in left:
            try:
                p.kill()
            except psutil.Error:
                pass
        deadline = clock.monotonic() + 30.0
        while clock.monotonic() < deadline:
            reap(tp)
            if not tree_alive(tp, log):
                return
            clock.sleep(0.1)
    pids = ", ".join(f"{p.pid}" for p in tree_alive(tp, log))
    raise OSError(f"processes of launch {tp.pid} survived SIGKILL for 30 s ({pids}); stop them by "
                  "hand (kill -9 PID) before resuming")


# ---- ports -------------------------------------------------------------------------------------

def port_holder(port: int) -> str | None:
    """Who listens on `port` (pid and command, where this user may see it), or None when the
    port can be bound."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            return None
        except OSError:
            pass
    try:
        for c in psutil.net_connections(kind="inet"):
            if c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid:
                try:
                    return f"pid {c.pid} ({' '.join(psutil.Process(c.pid).cmdline())[:120]})"
                except psutil.Error:
                    return f"pid {c.pid}"
    except (psutil.Error, OSError):
        pass
    return "a process this user cannot see"


def wait_ports_free(ports: list[int], timeout_s: float) -> None:
    """Return once every port in `ports` can be bound; a server still shutting down gets
    `timeout_s` to let go. Raise OSError naming the holder otherwise."""
    deadline = clock.monotonic() + timeout_s
    while True:
        held = {port: holder for port in ports if (holder := port_holder(port))}
        if not held:
            return
        if clock.monotonic() >= deadline:
            raise OSError("port(s) the launch needs are taken: " + "; ".join(
                f"{port} by {who}" for port, who in held.items()))
        clock.sleep(0.5)


def log_tail(log: Path, n: int = 20) -> str:
    try:
        return "\n".join(Path(log).read_text(errors="replace").splitlines()[-n:])
    except FileNotFoundError:
        return "(no log)"


class ProcessRunner:
    """Launches as local processes in their own session (prime-rl's `uv run rl`, the embedded
    trainer, a stand-in): the functions above, as a Runner. `grace_s`: how long a stop waits for
    the launcher's own cleanup before SIGKILL."""

    def __init__(self, grace_s: float = 10.0):
        self.grace_s = grace_s

    def find(self, recorded: TrainerProcess | None, out: Path) -> TrainerProcess | None:
        if recorded is not None and recorded.output_dir == str(out):
            if is_alive(recorded):
                return recorded
            if tree_alive(recorded, Path(recorded.log) if recorded.log else None):
                # its wrapper is gone, so no exit status will come: stop what is left of it
                # rather than launch beside it
                stop(recorded, self.grace_s)
        return find_orphan(out)

    def launch(self, command: Command, args: list[str], out: Path, log: Path) -> TrainerProcess:
        tree_path(log).unlink(missing_ok=True)
        return launch(command, args, out, log)

    def exit_status(self, log: Path) -> int | None:
        return exit_status(log)

    def poll(self, tp: TrainerProcess | None, log: Path, eval_file: Path, expected_rows: int, *,
             limits: Limits, steps: int, progress: Callable[[], int], interval: float,
             on_tick: Callable[[int], None] | None,
             growing: Callable[[], Iterable[Path]] | None = None) -> PollResult:
        res = poll(tp, log, eval_file, expected_rows, limits=limits, steps=steps,
                   progress=progress, growing=growing, interval=interval, on_tick=on_tick)
        if tp is not None and res.outcome in ("done", "failed") and tree_alive(tp, log):
            # the launch has ended, but not all it started (a rank its launcher's cleanup
            # missed, a server still going): nothing else starts beside it
            stop(tp, self.grace_s, log)
        return res

    def stop(self, tp: TrainerProcess) -> None:
        stop(tp, self.grace_s)
