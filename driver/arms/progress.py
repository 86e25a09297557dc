"""Training progress read from the output layout: the newest train step on disk of the arm's
max_steps, a rate from the steps' file times, and an ETA. Never from the trainer's log, but for
what precedes the first step and writes no file: the built-in student's build (student_build)."""
from __future__ import annotations

import re
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
# launch, before its first train step; no file of the output layout shows that, so its log does.
_SFT = re.compile(r"^sft step (\d+)/(\d+) loss (\S+) \((\d+)s, eta (\d+)s\)$")


def student_build(log: Path) -> str | None:
    """The built-in student's build as its last `sft step` line in the launch's log says it
    (step, loss, eta), or None when the log shows none. Read from the log's tail only."""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for text in reversed(tail):
        m = _SFT.match(text.strip())
        if m:
            step, steps, loss, _, eta = m.groups()
            return (f"building the student: sft step {step}/{steps} loss {loss} · "
                    f"eta {duration(float(eta))}")
    return None
