"""What both generations' layouts share: `step_N` directories, and which of them hold a launch's
train rows. Each layout says where its rollouts dir and train files are, and how prime-rl numbers
the rollouts directory of the batch a trainer step trains on (`rows_step`): the two generations
differ by one, and a launch's rows sit in exactly `launch_train_steps(start, final)`."""
from __future__ import annotations

import re
from pathlib import Path

_STEP = re.compile(r"^step_(\d+)$")


def is_step_dir(path: Path) -> bool:
    """A `step_N` directory (by its name)."""
    return bool(_STEP.match(Path(path).name))


class StepDirs:
    def steps(self, directory: Path) -> list[int]:
        if not Path(directory).is_dir():
            return []
        return sorted(int(m.group(1)) for p in Path(directory).iterdir()
                      if (m := _STEP.match(p.name)))

    # how many steps below the trainer step that trains on it prime-rl files a batch (each
    # layout states its generation's value, with the source lines)
    ROWS_OFFSET: int = 0

    def rows_step(self, trained_step: int) -> int:
        """The rollouts step_N directory holding the train batch of trainer step
        `trained_step` (the update that makes weights v(trained_step))."""
        return trained_step - self.ROWS_OFFSET

    def trained_step(self, rows_step: int) -> int:
        """The inverse of rows_step: which trainer step a rollouts directory's batch fed."""
        return rows_step + self.ROWS_OFFSET

    def launch_train_steps(self, start: int, final: int) -> range:
        """The rollouts directories a launch from checkpoint `start` to `final` (absolute
        max_steps) writes its train rows to, in order; anything else is not this launch's
        training (a later window the run never trained on, an earlier launch's rows)."""
        return range(self.rows_step(start + 1), self.rows_step(final) + 1)

    def train_steps(self, out: Path, start: int | None = None, final: int | None = None) -> list[int]:
        """The rollouts steps whose train rows are on disk, in order; with `start` and
        `final`, only those of that launch."""
        steps = [s for s in self.steps(self.rollouts_dir(out)) if self.train_file(out, s).exists()]
        if start is not None and final is not None:
            window = self.launch_train_steps(start, final)
            steps = [s for s in steps if s in window]
        return steps

    def latest_train_step(self, out: Path, start: int | None = None,
                          final: int | None = None) -> int | None:
        steps = self.train_steps(out, start, final)
        return steps[-1] if steps else None

    def progress_files(self, out: Path, start: int, final: int) -> list[Path]:
        """The files of a launch from `start` to `final` whose growth is a sign of work while
        no new train step appears (a step's batch still collecting): none unless the layout's
        generation writes there between steps (each layout says, with the source lines)."""
        return []

    def dropped_eval_rollouts(self, out: Path) -> int:
        """How many rollouts of the final eval of the launch into `out` prime-rl dropped from
        its eval file rather than wrote (each raised), as its logs say. None the driver reads
        unless a layout says where its generation logs them (classic: ClassicLayout)."""
        return 0

    def recorded_eval_setting(self, out: Path) -> dict | None:
        """The eval sampling a launch into `out` measured its final eval with, as the launch
        recorded it ({"max_completion_tokens", "temperature"}, a value None where the run left
        it to the server); None where its generation records none the driver reads (current:
        its `rl` never evaluates the final weights, the driver's own `evals` launch does)."""
        return None

    # provided by each layout
    def rollouts_dir(self, out: Path) -> Path:
        raise NotImplementedError

    def train_file(self, out: Path, step: int) -> Path:
        raise NotImplementedError
