"""Trainers behind one contract: render config -> launch detached -> poll on file and process
signals -> read results from the output layout.

A backend only says *what* to run and *which interpreter* loads environments; launching and
polling are the same for every backend (driver/training.py).
"""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from driver.errors import UsageError

RL_COMMAND_VAR = "DRIVER_RL_COMMAND"


@dataclass(frozen=True)
class Backend:
    name: str
    command: tuple[str, ...]      # stands for prime-rl's `rl`: called as CMD @ a.toml ... --flags
    cwd: str | None               # where the command runs
    python: str                   # the interpreter that loads environments at training time
    supports_multi_env: bool = True


def prime_rl(prime_rl_dir: str | None) -> Backend:
    """`uv run rl` inside a prime-rl checkout (PRIME_RL_DIR or --prime-rl-dir). DRIVER_RL_COMMAND
    replaces the `rl` command (a wrapper script, or the test suite's trainer double); it then
    runs in the current directory with the driver's interpreter loading environments."""
    override = os.environ.get(RL_COMMAND_VAR)
    if override:
        return Backend("prime_rl", tuple(shlex.split(override)), None, sys.executable)
    root = prime_rl_dir or os.environ.get("PRIME_RL_DIR")
    if not root:
        raise UsageError(
            "the prime_rl backend needs a prime-rl checkout: pass --prime-rl-dir DIR or set "
            "PRIME_RL_DIR (see ../reference or prime-rl's README for installing it with uv).")
    root_path = Path(root).expanduser().resolve()
    if not (root_path / "pyproject.toml").exists():
        raise UsageError(f"{root_path} is not a prime-rl checkout (no pyproject.toml)")
    uv = shutil.which("uv")
    if not uv:
        raise UsageError("uv is not on PATH; prime-rl runs as `uv run rl`. Install uv first.")
    venv_python = root_path / ".venv" / "bin" / "python"
    if not venv_python.exists():
        raise UsageError(f"{venv_python} is missing: run `uv sync` in {root_path} first")
    return Backend("prime_rl", (uv, "run", "rl"), str(root_path), str(venv_python))


def local() -> Backend:
    """The embedded trainer (embedded_trainer.rl): the same `@ a.toml --flags` contract and
    output layout as prime-rl's classic `rl`, run by this interpreter, which also loads the
    environments. It needs torch, which the driver itself never imports."""
    import importlib.util

    missing = [m for m in ("torch", "transformers", "embedded_trainer")
               if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"--backend local needs {', '.join(missing)} in {sys.executable}. Install the "
            "embedded extra with a CPU torch pinned: pip install 'synthetic-self-improve-rl"
            "[embedded]' (torch==2.13.0).")
    return Backend("local", (sys.executable, "-m", "embedded_trainer.rl"), None, sys.executable)


BACKENDS = {"prime_rl": prime_rl, "local": local}


def resolve(name: str, prime_rl_dir: str | None = None) -> Backend:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return prime_rl(prime_rl_dir) if name == "prime_rl" else BACKENDS[name]()
