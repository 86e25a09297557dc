"""Training progress read from the output layout: the newest train step on disk of the arm's
max_steps, a rate from the steps' file times, and an ETA; before the first step, the built-in
student's build from the progress file it writes (student_build). Never from the trainer's log."""
from __future__ import annotations

import json
import time
from pathlib import Path


def training(dialect, out: Path, start_step: int, final_step: int, launched_ts: float | None) -> dict:
    rdir = dialect.rollouts_dir(out)
    steps = [s for s in dialect.steps(rdir) if s > start_step and dialect.train_file(out, s).exists()]
    step = max(steps) if steps else start_step
    done = step - start_step
    total = max(1, final_step - start_step)
    eta = None
    if done >= 1:
        first = dialect.train_file(out, min(steps)).stat().st_mtime
        last = dialect.train_file(out, step).stat().st_mtime
        origin = launched_ts if launched_ts else first
        # per-step time after the first step (start-up is not repeated); fall back to the average
        per_step = (last - first) / (done - 1) if done >= 2 else (last - origin)
        eta = max(0.0, per_step * (final_step - step))
    return {"step": step, "max_steps": final_step, "start_step": start_step,
            "fraction": round(done / total, 4), "eta_s": None if eta is None else round(eta, 1),
            "elapsed_s": round(time.time() - launched_ts, 1) if launched_ts else None}


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
    return (f"[{name}] step {p['step']}/{p['max_steps']} {bar(p['fraction'])} "
            f"{100 * p['fraction']:.0f}% · eta {duration(p['eta_s'])}")


# The embedded trainer builds its built-in student (embedded_trainer/recipe.py) inside the
# launch, before its first train step; it writes the build's progress to a file in the output
# dir (recipe.BUILD_PROGRESS, named here so the driver never imports the trainer's torch code).
BUILD_PROGRESS = "student_build.json"


def student_build(out: Path) -> str | None:
    """The built-in student's build as the launch's output dir says it (SFT step, loss, eta),
    or None when no build is under way there."""
    try:
        p = json.loads((out / BUILD_PROGRESS).read_text())
        return (f"building the student: sft step {int(p['step'])}/{int(p['steps'])} loss "
                f"{float(p['loss']):.4f} · eta {duration(float(p['eta_s']))}")
    except (OSError, ValueError, KeyError, TypeError):
        return None
