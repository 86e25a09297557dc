"""What both generations' layouts share: `step_N` directories, and the steps whose train rows
are on disk (each layout says where its rollouts dir and train files are)."""
from __future__ import annotations

import re
from pathlib import Path

_STEP = re.compile(r"^step_(\d+)$")


class StepDirs:
    def steps(self, directory: Path) -> list[int]:
        if not Path(directory).is_dir():
            return []
        return sorted(int(m.group(1)) for p in Path(directory).iterdir()
                      if (m := _STEP.match(p.name)))

    def train_steps(self, out: Path) -> list[int]:
        """The steps whose train rollouts are on disk, in order."""
        return [s for s in self.steps(self.rollouts_dir(out)) if self.train_file(out, s).exists()]

    def latest_train_step(self, out: Path) -> int | None:
        steps = self.train_steps(out)
        return steps[-1] if steps else None
