"""Training progress read from the output layout: the newest train step on disk of the arm's
max_steps, a rate from the steps' file times, and an ETA; before the first step, the built-in
student's build from the progress file it writes (student_build). Never from the trainer's log."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from driver import clock


def training(dialect, out: Path, start_step: int, final_step: int, launched_ts: float | None) -> dict:
    """The launch's newest batch on disk names the trainer step under way (the layout says
    which rollouts directory holds which step's batch: rl_contract). A built-in student built
    inside the launch (student_build.json) is counted apart: before the first step the payload
    carries the build's own progress (`build`), and the first step's time is measured from the
    build's end, so a ten-minute SFT build is never read as the time of one training step."""
    steps = dialect.train_steps(out, start_step, final_step)
    step = dialect.trained_step(max(steps)) if steps else start_step
    done = len(steps)
    total = max(1, final_step - start_step)
    build = build_record(out, launched_ts)
    eta = None
    if done >= 1:
        first = dialect.train_file(out, min(steps)).stat().st_mtime
        last = dialect.train_file(out, max(steps)).stat().st_mtime
        origin = launched_ts if launched_ts else first
        if build is not None and build["ended_ts"] is not None:
            origin = max(origin, min(build["ended_ts"], first))   # the build is not a step
        # per-step time after the first step (start-up is not repeated); fall back to the average
        per_step = (last - first) / (done - 1) if done >= 2 else (last - origin)
        eta = max(0.0, per_step * (final_step - step))
    return {"step": step, "max_steps": final_step, "start_step": start_step,
            "fraction": round(done / total, 4), "eta_s": None if eta is None else round(eta, 1),
            "elapsed_s": round(time.time() - launched_ts, 1) if launched_ts else None,
            "build": build if done == 0 and build is not None else None}


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def bar(fraction: float, width: int = 20) -> str:
    filled = int(round(fraction * width))
    return "[" + "#" * filled + "." * (width - filled) + "]"


def line(name: str, p: dict) -> str:
    """One arm's progress: its train steps, or, before the first, the student's build."""
    b = p.get("build")
    if b is not None and not b["done"]:
        return (f"[{name}] building the student: sft step {b['step']}/{b['steps']} "
                f"{bar(b['step'] / max(1, b['steps']))} · eta {duration(b['eta_s'])} "
                f"(then {p['max_steps'] - p['start_step']} train steps)")
    return (f"[{name}] step {p['step']}/{p['max_steps']} {bar(p['fraction'])} "
            f"{100 * p['fraction']:.0f}% · eta {duration(p['eta_s'])}"
            + (" (the student is built; the first step's time is not measured yet)"
               if b is not None else ""))


# The embedded trainer builds its built-in student (embedded_trainer/recipe.py) inside the
# launch, before its first train step; it writes the build's progress to a file in the output
# dir (recipe.BUILD_PROGRESS, named here so the driver never imports the trainer's torch code).
BUILD_PROGRESS = "student_build.json"


def build_record(out: Path, launched_ts: float | None = None) -> dict | None:
    """The built-in student's build as the launch's output dir records it: SFT step of steps,
    loss, elapsed and eta seconds, whether its last step is written (`done`) and when
    (`ended_ts`, the file's time then); None when no build of this launch is there (a file
    older than the launch is another launch's)."""
    path = out / BUILD_PROGRESS
    try:
        p = json.loads(path.read_text())
        mtime = path.stat().st_mtime
        rec = {"step": int(p["step"]), "steps": int(p["steps"]), "loss": float(p["loss"]),
               "elapsed_s": float(p.get("elapsed_s") or 0.0), "eta_s": float(p["eta_s"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if launched_ts is not None and mtime < launched_ts - 1.0:
        return None
    rec["done"] = rec["step"] >= rec["steps"]
    rec["ended_ts"] = mtime if rec["done"] else None
    return rec


def student_build(out: Path) -> str | None:
    """The built-in student's build as the launch's output dir says it (SFT step, loss, eta),
    or None when no build is under way there."""
    p = build_record(out)
    if p is None:
        return None
    return (f"building the student: sft step {p['step']}/{p['steps']} loss "
            f"{p['loss']:.4f} · eta {duration(p['eta_s'])}")


class Printer:
    """A launch's progress on stderr: on a terminal, one line updated in place each second; in
    a pipe or a file (a log an agent reads), a plain line each time there is something new to
    say (a new train step, a line of the student's build, each quarter of the eval's rows),
    never one per poll."""

    def __init__(self, label: str, dialect, out: Path, start: int, final: int,
                 launched_ts: float | None, expected: int, quiet: bool = False):
        self.label, self.dialect, self.out = label, dialect, out
        self.start, self.final, self.launched_ts, self.expected = start, final, launched_ts, expected
        self.quiet, self.tty = quiet, sys.stderr.isatty()
        self.trains = start < final            # a final-weights eval has no train steps to show
        self.building = self.trains            # before the first step: the student's build
        self.last_key: tuple | None = None
        self.last_shown = 0.0

    def _emit(self, text: str) -> None:
        print(("\r" + text + "   ") if self.tty else text, end="" if self.tty else "\n",
              file=sys.stderr, flush=True)

    def show(self, rows: int) -> None:
        if self.quiet:
            return
        now = clock.monotonic()
        p = training(self.dialect, self.out, self.start, self.final, self.launched_ts) if self.trains else None
        if self.building:
            if p is not None and p["step"] > self.start:
                self.building = False
            else:
                build = student_build(self.out)
                if build and ("build", build) != self.last_key:
                    self.last_key, self.last_shown = ("build", build), now
                    self._emit(f"[{self.label}] {build}")
                return
        if not self.trains and not rows:
            return   # a final eval shows only its rows
        text = line(self.label, p) if p is not None else f"[{self.label}]"
        text += f" · eval rows {rows}/{self.expected}" if rows else ""
        if self.tty:
            if now - self.last_shown >= 1.0:
                self.last_shown = now
                self._emit(text)
            return
        key = (p["step"] if p else None, (4 * rows) // max(1, self.expected))
        if key != self.last_key:
            self.last_key = key
            self._emit(text)

    def close(self) -> None:
        if self.tty and not self.quiet:
            print(file=sys.stderr)
