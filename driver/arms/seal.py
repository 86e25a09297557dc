"""The eval seal: once an arm is measured, every eval file of it holds numbers only.

Nobody tunes on eval rollouts, and a teacher with a shell never reads an eval prompt or reply.
The driver reads an arm's eval file once, for its numbers (driver/analysis/evaluation.py), and
then cuts every eval file under the arm's directory to what that reading takes (the dialect's
`sealed_eval_row`: the example id, the env's label, the reward and its parts, numeric metrics,
whether the rollout raised). An attempt set aside after a failure is sealed as it is set aside:
no attempt set aside is ever measured. Nothing reads eval content afterwards: a resumed run, the
best iteration, the summary, the report and `driver status` read eval_summary.json and
metrics.json. A sealed file keeps one line per row, so whatever counts an eval file's rows (a
re-attached launch, an arm's trained check) counts the same.

A file is rewritten atomically and only where it changes, so a driver killed part-way through
finishes the seal on resume (a sealed row seals to itself).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from driver.arms.arm import Arm
from driver.context import Ctx
from driver.dialects.base import Dialect
from driver.run.arm_files import set_aside
from driver.run.files import atomic_write_text


def seal_arm(ctx: Ctx, arm: Arm) -> None:
    """Every eval file under the arm's directory cut to numbers: its final eval's, any other
    eval its launches wrote, and those of its attempts set aside."""
    seal_tree(ctx.dialect, arm.dir)


def set_aside_sealed(dialect: Dialect, path: Path) -> Path | None:
    """Set a failed attempt's `path` aside (NAME.failed-<k>, arm_files.set_aside) with the eval
    files in it cut to numbers; where it went, or None when there was nothing."""
    dest = set_aside(path)
    if dest is not None and dest.is_dir():
        seal_tree(dialect, dest)
    return dest


def seal_tree(dialect: Dialect, root: Path) -> None:
    """Cut every eval file under `root` to numbers, and remove every partial copy of one beside
    it (the temp file of a write that was interrupted, a download's staging file): a copy is
    eval content that nothing reads. A directory reached by a symbolic link is another run's
    (an --init-from source): it is not entered, and a linked eval file is replaced here by a
    sealed copy, its target left as it is."""
    name = dialect.eval_file_name
    for folder, _dirs, files in os.walk(root):
        for file in files:
            path = Path(folder) / file
            if dialect.is_eval_file(path):
                seal_file(path, dialect.sealed_eval_row)
            elif name in file and dialect.is_eval_file(path.with_name(name)):
                path.unlink(missing_ok=True)


def seal_file(path: Path, cut) -> bool:
    """Rewrite the eval file `path` with each row cut by `cut`; a line that is no JSON object
    (the torn end of a write that was interrupted) holds no number anyone reads and is dropped.
    Whether it was rewritten: a file already sealed is left as it is."""
    if not path.exists():   # a link whose target is gone: nothing left to read
        return False
    lines, changed = [], path.is_symlink()
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            row = _parsed(raw)
            if row is None:
                changed = changed or bool(raw.strip())
                continue
            line = json.dumps(cut(row)) + "\n"
            changed = changed or line != raw
            lines.append(line)
    if changed:
        atomic_write_text(path, "".join(lines))
    return changed


def _parsed(line: str) -> dict | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None
