"""The backend seam: what a trainer is, as the rest of the driver sees it.

A backend says *what* to run for an arm (the command standing for prime-rl's `rl`, the
final-weights evaluator where the dialect needs one, the gradient probe) and *which interpreter*
loads environments. Launching and polling a local process are the same for every backend that
runs one (driver/backends/process.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Command:
    """A program to launch: its argv prefix (the arm's `@ a.toml --flags` follow) and its cwd."""
    argv: tuple[str, ...]
    cwd: str | None = None


@dataclass(frozen=True)
class Probe:
    """The pre-training gradient probe (embedded_trainer.probe's contract: --model --env-id
    --prompts --k --max-tokens --temperature --seed --min-live --output). `in_worker`: it is the
    embedded probe module, run forked from the warm interpreter (driver/envs/worker.py) rather
    than as a process of its own."""
    command: tuple[str, ...]
    in_worker: bool = False
    cwd: str | None = None


class ProcessIdentity(Protocol):
    """A process we launched, told apart from a recycled pid by its start (run.json's
    TrainerProcess; the generator's pid file)."""
    @property
    def pid(self) -> int: ...
    @property
    def create_time(self) -> float: ...
    @property
    def started_since_boot(self) -> float | None:
        """Its start as seconds since boot (None in records written before it was kept)."""
        ...


class Backend(Protocol):
    """What every backend provides. The registry (driver.backends.BACKENDS) builds them."""
    @property
    def name(self) -> str: ...
    @property
    def python(self) -> str:
        """The interpreter that loads environments at training time."""
        ...
    @property
    def dialect(self) -> str:
        """The configs and layout it speaks (driver.dialects)."""
        ...
    @property
    def prime_rl_version(self) -> str | None:
        """The version the dialect was chosen from, where one was read, and where from."""
        ...
    @property
    def version_source(self) -> str | None: ...
    @property
    def stand_in(self) -> str | None:
        """The command standing in for the real trainer (DRIVER_RL_COMMAND), named wherever the
        run's numbers are shown, so they are never mistaken for prime-rl's."""
        ...

    def trainer(self) -> Command:
        """What stands for prime-rl's `rl`: called as CMD @ a.toml ... --flags."""
        ...

    def final_evaluator(self) -> Command | None:
        """What measures an arm's final weights where the dialect's `rl` never does (called as
        CMD --tokenizer MODEL @ evals.toml --output-dir DIR), or None."""
        ...

    def probe(self) -> Probe | None:
        """The gradient probe, or None where the backend cannot sample the anchor student."""
        ...

    def seed_args(self, seed: int) -> list[str]:
        """The trainer's own flags for the run's --seed, added to each launch after the config
        checks (not a prime-rl key); [] where the trainer has none."""
        ...

    def describe(self) -> str:
        """One line for the run header: the command and where it runs."""
        ...
