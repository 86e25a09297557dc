"""Trainers behind one contract (driver.backends.base.Backend): render config -> launch detached
-> poll on file and process signals -> read results from the output layout.

BACKENDS is the one registry: a run's `backend` names an entry (the run model's BackendName lists
the same names, and a test holds the two equal).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from driver.backends import hosted, local, prime_rl
from driver.backends.base import (Backend, Command, EnvPublisher, EpisodeKinds, LocalServers,
                                   Preflight, Probe, ProbeGate)
from driver.errors import UsageError

if TYPE_CHECKING:
    from driver.run.model import RunState

__all__ = ["BACKENDS", "Backend", "Command", "EnvPublisher", "EpisodeKinds", "LocalServers", "Probe",
           "arm_cost", "billed_launches", "choose", "episode_refusal", "preflight", "probe_gate",
           "resolve", "spent_usd"]

BACKENDS: dict[str, Callable[[str | None], Backend]] = {
    "prime_rl": prime_rl.build,
    "local": local.build,
    "hosted": hosted.build,
}


def preflight(backend: Backend, state: "RunState") -> str | None:
    """The backend's own checks on the run's settings, before the run directory exists (a
    UsageError refuses); a line for the run header, or None."""
    return backend.preflight(state) if isinstance(backend, Preflight) else None


def episode_refusal(backend: Backend, hub: dict) -> str | None:
    """Why the backend cannot play the hub env's kind of episodes (None: it can, or it plays
    every kind)."""
    return backend.refuse_episodes(hub) if isinstance(backend, EpisodeKinds) else None


def probe_gate(backend: Backend, run_dir: Path, state: "RunState", rollouts: int) -> tuple[bool, str] | None:
    """Where the probe is a paid launch: whether it runs, and the line stating its cost."""
    return backend.probe_gate(run_dir, state, rollouts) if isinstance(backend, ProbeGate) else None


def spent_usd(run_dir: Path) -> float:
    """What the run's launches have cost so far (its cost ledger; 0 where nothing is billed)."""
    return hosted.spent_usd(run_dir)


def arm_cost(run_dir: Path, arm: str) -> float | None:
    """What one arm's launches cost (failed attempts included), or None where none is billed."""
    return hosted.arm_cost(run_dir, arm)


def billed_launches(run_dir: Path) -> list[dict]:
    """Every billed launch of the run: its arm directory (`arm`), its kind (`train`, `eval` or
    `probe`) and what it cost (`cost_usd`, failed attempts included); none where nothing is
    billed."""
    return hosted.records.launches(run_dir)


def resolve(name: str, prime_rl_dir: str | None = None) -> Backend:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return BACKENDS[name](prime_rl_dir)


def choose(prime_rl_dir: str | None) -> tuple[str, str | None]:
    """(backend, why the embedded default was chosen) when --backend is not given: prime-rl
    whenever a checkout is named (--prime-rl-dir, PRIME_RL_DIR) or DRIVER_RL_COMMAND stands in
    for it, else the embedded trainer. Naming a checkout is a choice the driver never
    overrides; a missing GPU is then prime-rl's to report."""
    if os.environ.get(prime_rl.RL_COMMAND_VAR) or prime_rl.checkout_dir(prime_rl_dir):
        return "prime_rl", None
    return "local", "no prime-rl checkout is set"
