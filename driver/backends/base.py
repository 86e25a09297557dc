"""The backend seam: what a trainer is, as the rest of the driver sees it.

A backend says *what* to run for an arm (the command standing for prime-rl's `rl`, the
final-weights evaluator where the dialect needs one, the gradient probe) and *which interpreter*
loads environments. Launching and polling a local process are the same for every backend that
runs one (driver/backends/process.py).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from driver.backends.process import Limits, PollResult
    from driver.run.model import RunState, TrainerProcess


@dataclass(frozen=True)
class Command:
    """A program to launch: its argv prefix (the arm's `@ a.toml --flags` follow) and its cwd."""
    argv: tuple[str, ...]
    cwd: str | None = None


@dataclass(frozen=True)
class Probe:
    """How the pre-training gradient probe samples the anchor student on a dataset's rows.
    kind "launch": a one-step launch of the backend's own trainer from iter_0's checkpoint on
    the generated env (no eval), whose train rollouts are the probe's (any trainer that speaks
    the `rl` contract can probe); "worker": `command` is `python -m MODULE` of the embedded
    probe (embedded_trainer.probe's contract: --model --env-id --prompts --k --max-tokens
    --temperature --seed --min-live --output), forked from the warm interpreter
    (driver/envs/worker.py); "command": `command` (DRIVER_PROBE_COMMAND) with that contract, as
    a process of its own."""
    kind: Literal["launch", "worker", "command"]
    command: tuple[str, ...] = ()
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


class Runner(Protocol):
    """Runs one launch of an arm (its training run, or its final-weights eval) and reports on
    it: launched once, found again after the driver died, polled on file and status signals
    (never a log read for a phrase), stopped when it must be. driver/backends/process.py is the
    local-process runner."""

    def find(self, recorded: TrainerProcess | None, out: Path) -> TrainerProcess | None:
        """The live launch writing to `out`: the one run.json recorded, or one launched but
        never recorded (the driver died in between); None when none is running."""
        ...

    def launch(self, command: Command, args: list[str], out: Path, log: Path) -> TrainerProcess:
        """Start `command` with `args`, detached from the driver; its record for run.json."""
        ...

    def exit_status(self, log: Path) -> int | None:
        """How the last launch logging to `log` ended (0: success), or None if unknown."""
        ...

    def poll(self, tp: TrainerProcess | None, log: Path, eval_file: Path, expected_rows: int, *,
             limits: Limits, steps: int, progress: Callable[[], int], interval: float,
             on_tick: Callable[[int], None] | None,
             growing: Callable[[], Iterable[Path]] | None = None) -> PollResult:
        """Wait until the launch ends ("done" / "failed") or overruns its limits ("stalled" /
        "timeout", still running). `progress()` counts its new train steps; a new one, a new
        eval row, or growth of a file `growing()` names (the dialect's progress_files, where the
        runner sees the launch's files) is a sign of work."""
        ...

    def stop(self, tp: TrainerProcess) -> None:
        """Stop the launch and return once nothing of it runs."""
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
        CMD [--inference-config FILE] @ evals.toml --output-dir DIR, the config naming the base
        model and, in its [online] block, the broadcast to load into it; FILE, where the arm's
        launch wrote one, the inference config to serve it with), or None."""
        ...

    def runner(self) -> Runner:
        """How this backend's launches are started, found again, polled and stopped."""
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

    def eval_draw_seeds(self, per_source_eval_sampling: bool) -> str | None:
        """How the stochastic eval draws (--eval-draws) are seeded on this backend, for each
        arm's eval_config, or None where its evals cannot sample draws beside the greedy
        rollout (`per_source_eval_sampling`: the dialect lets one eval env sample apart)."""
        ...


# Optional capabilities: a backend has them or not (isinstance), so the seam above stays what
# every backend honours.

@runtime_checkable
class Preflight(Protocol):
    """A backend with checks of its own on the run's settings, made before the run directory
    exists (driver run): a hosted backend's model must be one the platform trains."""

    def preflight(self, state: RunState) -> str | None:
        """Refuse (UsageError) what the backend cannot run; else a line for the run header
        (e.g. the cost estimate), or None."""
        ...


@runtime_checkable
class LocalServers(Protocol):
    """A backend whose launches start servers on this machine (prime-rl's inference server):
    a launch starts only once the ports it needs are free (a server of the previous launch
    still shutting down, or anyone else's)."""

    def ports(self, cfg: dict) -> list[int]:
        """The ports a launch of this composed config (an `rl` config, or an evals config)
        listens on."""
        ...


@runtime_checkable
class ProbeGate(Protocol):
    """A backend whose gradient probe is a paid launch: before each probe it states what the
    probe would cost and whether it runs."""

    def probe_gate(self, run_dir: Path, state: RunState, rollouts: int) -> tuple[bool, str]:
        """(whether a probe of `rollouts` rollouts runs, the line that says why and what it costs)."""
        ...


@runtime_checkable
class EnvPublisher(Protocol):
    """A backend whose trainer loads environments from a registry rather than from this
    machine: every generated env is published before the arm that trains on it."""

    def publish_env(self, pkg_dir: Path) -> dict:
        """Publish the package at `pkg_dir` (idempotent across a resume); what was published
        (its registry id and version), recorded with the arm's installed env."""
        ...


@runtime_checkable
class EpisodeKinds(Protocol):
    """A backend that plays only some kinds of episodes (hub_env.json's interaction.kind:
    single_turn, multi_turn, tools): an env of another kind is refused before the run directory
    exists, never run as a kind it is not."""

    def refuse_episodes(self, hub: dict) -> str | None:
        """Why this backend cannot play the hub env's episodes, naming what works; or None."""
        ...
