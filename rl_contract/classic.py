"""The classic generation's output layout (prime-rl 0.5.x): `OUT/{checkpoints,weights}/step_N`
and `OUT/run_default/{rollouts,checkpoints,broadcasts}/step_N`, with rollout rows in
`{train,eval}_rollouts.jsonl`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from rl_contract.steps import StepDirs

# a rollout "passes" when its reward is at least this (pass/fail live groups, accuracy)
SUCCESS_THRESHOLD = 0.5

class ClassicLayout(StepDirs):
    def rollouts_dir(self, out: Path) -> Path:
        return Path(out) / "run_default" / "rollouts"

    def weights_dir(self, out: Path, step: int) -> Path:
        """The Hugging Face model directory a step's weights are saved in."""
        return Path(out) / "weights" / f"step_{step}"

    def eval_file(self, out: Path, step: int) -> Path:
        return self.rollouts_dir(out) / f"step_{step}" / "eval_rollouts.jsonl"

    def train_file(self, out: Path, step: int) -> Path:
        return self.rollouts_dir(out) / f"step_{step}" / "train_rollouts.jsonl"

    def checkpoint_trees(self, out: Path, step: int) -> list[Path]:
        """The four trees a resuming run needs in its own output dir."""
        out = Path(out)
        return [out / "checkpoints" / f"step_{step}", out / "weights" / f"step_{step}",
                out / "run_default" / "checkpoints" / f"step_{step}",
                out / "run_default" / "broadcasts" / f"step_{step}"]

    def train_rows(self, out: Path, step: int) -> Iterator[dict]:
        """Train rollout rows (fair game for the teacher)."""
        with open(self.train_file(out, step), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)
