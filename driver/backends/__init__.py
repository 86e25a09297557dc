"""Trainers behind one contract (driver.backends.base.Backend): render config -> launch detached
-> poll on file and process signals -> read results from the output layout.

BACKENDS is the one registry: a run's `backend` names an entry (the run model's BackendName lists
the same names, and a test holds the two equal).
"""
from __future__ import annotations

import os
from typing import Callable

from driver.backends import local, prime_rl
from driver.backends.base import Backend, Command, Probe
from driver.errors import UsageError

__all__ = ["BACKENDS", "Backend", "Command", "Probe", "choose", "resolve"]

BACKENDS: dict[str, Callable[[str | None], Backend]] = {
    "prime_rl": prime_rl.build,
    "local": local.build,
}


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
