"""hparams.json: the teacher's per-iteration hyperparameters, within stated bounds.

The procedure leaves the learning rate, the completion limit, the sequence length and the
sampling temperature to the teacher's judgment per iteration (scratchpad section 4); it pins the
steps, the group size and the batch, so that iterations stay comparable. A teacher may write
`hparams.json` beside its generator; the driver checks it with the dataset gate, renders it into
that iteration's training only (train and probe; never its eval: every arm is measured with one
eval configuration, so a lift cannot come from a longer eval limit) and records it in
metrics.json and the scratchpad. A control replaying the iteration replays its hparams.json.
"""
from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from driver.gates.dataset import GateReport
from driver.run.arm_files import ArmFiles

FILE = ArmFiles.HPARAMS
PINNED = ("max_steps", "steps_per_run", "batch_size", "rollouts_per_example", "group_size")


class HParams(BaseModel):
    """Every field optional; an absent one keeps the run's value."""
    model_config = ConfigDict(extra="forbid")

    lr: float | None = Field(default=None, gt=0, le=1e-2, description="learning rate, in (0, 0.01]")
    max_completion_tokens: int | None = Field(default=None, ge=16, le=32768,
                                              description="train and eval completion limit, in [16, 32768]")
    seq_len: int | None = Field(default=None, ge=256, le=131072,
                                description="trainer sequence length, in [256, 131072]")
    temperature: float | None = Field(default=None, gt=0, le=2,
                                      description="train rollout sampling temperature, in (0, 2]")


def bounds_markdown() -> str:
    """The fields and their bounds, for TEACHER.md."""
    return "\n".join(f"- `{name}`: {f.description}" for name, f in HParams.model_fields.items())


def load(iter_dir: Path) -> HParams | None:
    """The iteration's hparams.json, or None when the teacher wrote none. Raises ValueError with
    every problem named."""
    path = Path(iter_dir) / FILE
    if not path.exists():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ValueError(f"{FILE} is not JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{FILE} must be an object of hyperparameters")
    pinned = sorted(k for k in raw if k in PINNED)
    if pinned:
        raise ValueError(f"{FILE} sets {', '.join(pinned)}: pinned by the procedure for every "
                         "iteration (steps, group size, batch); remove them")
    try:
        return HParams.model_validate(raw)
    except ValidationError as e:
        raise ValueError(f"{FILE}: " + "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'file'}: {err['msg']}" for err in e.errors())) from None


def check(iter_dir: Path) -> GateReport:
    rep = GateReport()
    if (Path(iter_dir) / FILE).exists():
        try:
            load(iter_dir)
            rep.add(f"{FILE} within bounds", True)
        except ValueError as e:
            rep.add(f"{FILE} within bounds", False, str(e))
    return rep


def knob_overrides(h: HParams | None) -> dict:
    """The run-model knobs this iteration changes (HParams' fields are Knobs fields by name)."""
    return {} if h is None else h.model_dump(exclude_none=True)
