"""What every phase receives: the run directory, its state, and the resolved collaborators."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from driver import dialects
from driver.backends import Backend, resolve
from driver.dialects.classic import Knobs
from driver.errors import UsageError
from driver.run.files import read_json
from driver.run.model import RunState
from driver.run.rundir import RunDir
from driver.backends.process import DEFAULT_POLL_CAP_S


@dataclass
class Ctx:
    rd: RunDir
    state: RunState
    backend: Backend
    dialect: object
    poll_interval: float = 1.0
    poll_cap_s: float = DEFAULT_POLL_CAP_S
    quiet: bool = False
    _hub: dict | None = field(default=None, repr=False)

    @classmethod
    def open(cls, rd: RunDir, state: RunState, quiet: bool = False) -> "Ctx":
        backend = resolve(state.backend, state.prime_rl_dir)
        if backend.dialect != state.dialect:   # configs and layouts of two generations never mix
            raise UsageError(
                f"this run speaks prime-rl's {state.dialect} dialect (prime-rl "
                f"{state.prime_rl_version or '?'}), but the trainer now resolves to {backend.dialect} "
                f"(prime-rl {backend.prime_rl_version or '?'} from {backend.version_source}). Resume "
                f"with the checkout the run started on, or start a new run.")
        return cls(rd=rd, state=state, backend=backend,
                   dialect=dialects.get(state.dialect),
                   poll_interval=float(os.environ.get("DRIVER_POLL_INTERVAL", "1")),
                   quiet=quiet)

    @property
    def knobs(self) -> Knobs:
        s = self.state
        return Knobs(model=s.model, batch_size=s.batch_size,
                     rollouts_per_example=s.rollouts_per_example,
                     steps_per_run=s.steps_per_run, eval_examples=s.eval_examples,
                     train_max_tokens=s.max_completion_tokens, train_temperature=s.temperature, lr=s.lr,
                     difficulty_filter=s.difficulty_filter, eval_max_tokens=s.max_completion_tokens,
                     wandb_project=f"synthetic-self-improve-rl-{s.dataset}")

    @property
    def hub(self) -> dict:
        if self._hub is None:
            self._hub = read_json(self.rd.hub_env_json)
        return self._hub

    def save(self) -> None:
        self.rd.save(self.state)

    def say(self, msg: str) -> None:
        if not self.quiet:
            print(msg, file=sys.stderr, flush=True)

    def iter_dir(self, n: int) -> Path:
        return self.rd.path / f"iter_{n}"
