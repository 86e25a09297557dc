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

from driver.dialects import VERSION_VAR
from driver.errors import UsageError

RL_COMMAND_VAR = "DRIVER_RL_COMMAND"
EVALS_COMMAND_VAR = "DRIVER_EVALS_COMMAND"   # stands in for the final-weights eval, beside it
PROBE_COMMAND_VAR = "DRIVER_PROBE_COMMAND"
PROBE_MODULE = "embedded_trainer.probe"


def _probe_override() -> tuple[str, ...] | None:
    cmd = os.environ.get(PROBE_COMMAND_VAR)
    return tuple(shlex.split(cmd)) if cmd else None


@dataclass(frozen=True)
class Backend:
    name: str
    command: tuple[str, ...]      # stands for prime-rl's `rl`: called as CMD @ a.toml ... --flags
    cwd: str | None               # where the command runs
    python: str                   # the interpreter that loads environments at training time
    # the pre-training gradient probe (embedded_trainer.probe's contract), or None where the
    # backend has no way to sample the anchor student outside a training run
    probe: tuple[str, ...] | None = None
    # the command standing in for the real trainer (DRIVER_RL_COMMAND), named wherever the
    # run's numbers are shown, so they are never mistaken for prime-rl's
    stand_in: str | None = None
    # the trainer's own flag for the run's --seed, added to each launch after the config checks
    # (the embedded trainer's [embedded] seed is not a prime-rl key); None: the trainer has none
    seed_flag: str | None = None
    # which generation's configs and layout the trainer speaks (driver.dialects.WINDOWS), and
    # the prime-rl version it was chosen from (None: not read from a checkout)
    dialect: str = "classic"
    prime_rl_version: str | None = None
    version_source: str | None = None
    # current dialect only: what measures an arm's final weights (`rl` never does), called as
    # CMD --tokenizer MODEL @ evals.toml --output-dir DIR; rl_contract.final_eval for a checkout
    final_eval: tuple[str, ...] | None = None


def prime_rl(prime_rl_dir: str | None) -> Backend:
    """`uv run rl` inside a prime-rl checkout (PRIME_RL_DIR or --prime-rl-dir). DRIVER_RL_COMMAND
    replaces the `rl` command (a wrapper script, or the test suite's trainer double); it then
    runs in the current directory with the driver's interpreter loading environments. Either
    way the dialect follows the checkout's version (or DRIVER_PRIME_RL_VERSION); a stand-in
    with neither speaks the classic dialect."""
    override = os.environ.get(RL_COMMAND_VAR)
    root = prime_rl_dir or os.environ.get("PRIME_RL_DIR")
    root_path = Path(root).expanduser().resolve() if root else None
    if root_path is not None and not (root_path / "pyproject.toml").exists():
        raise UsageError(f"{root_path} is not a prime-rl checkout (no pyproject.toml)")
    if override:
        if root_path is None and not os.environ.get(VERSION_VAR):
            version, source, dialect = None, "stand-in without a checkout", "classic"
        else:
            dialect, version, source = detect_dialect(root_path)
        evals = os.environ.get(EVALS_COMMAND_VAR)
        if dialect == "current" and not evals:
            raise UsageError(
                f"prime-rl {version} is the current generation, whose `rl` never evaluates its final "
                f"weights; with {RL_COMMAND_VAR} standing in for `rl`, set {EVALS_COMMAND_VAR} to what "
                "stands in for the final-weights eval (called as CMD --tokenizer MODEL @ evals.toml "
                "--output-dir DIR).")
        return Backend("prime_rl", tuple(shlex.split(override)), None, sys.executable,
                       probe=_probe_override(), stand_in=override, dialect=dialect,
                       prime_rl_version=version, version_source=source,
                       final_eval=tuple(shlex.split(evals)) if dialect == "current" else None)
    if root_path is None:
        raise UsageError(
            "the prime_rl backend needs a prime-rl checkout: pass --prime-rl-dir DIR or set "
            "PRIME_RL_DIR (see ../reference or prime-rl's README for installing it with uv).")
    dialect, version, source = detect_dialect(root_path)
    uv = shutil.which("uv")
    if not uv:
        raise UsageError("uv is not on PATH; prime-rl runs as `uv run rl`. Install uv first.")
    venv_python = root_path / ".venv" / "bin" / "python"
    if not venv_python.exists():
        raise UsageError(f"{venv_python} is missing: run `uv sync` in {root_path} first")
    # prime-rl samples through its vLLM server, which only runs inside `rl`: no probe unless
    # DRIVER_PROBE_COMMAND names one (e.g. embedded_trainer.probe in an env with torch)
    final_eval = ((sys.executable, "-m", "rl_contract.final_eval", "--prime-rl-dir", str(root_path))
                  if dialect == "current" else None)
    return Backend("prime_rl", (uv, "run", "rl"), str(root_path), str(venv_python),
                   probe=_probe_override(), dialect=dialect, prime_rl_version=version,
                   version_source=source, final_eval=final_eval)


def prime_rl_version(root: Path | None) -> tuple[str | None, str]:
    """(version, where it came from): DRIVER_PRIME_RL_VERSION, else the checkout's nearest git
    tag, else its pyproject version."""
    import subprocess
    import tomllib

    if os.environ.get(VERSION_VAR):
        return os.environ[VERSION_VAR].strip().lstrip("v"), f"${VERSION_VAR}"
    if root is None:
        return None, "nothing"
    try:  # only the checkout's own repository: never a parent repo's tags
        if not (root / ".git").exists():
            raise OSError("not a git checkout")
        r = subprocess.run(["git", "-C", str(root), "describe", "--tags", "--abbrev=0"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip().lstrip("v"), "git tag"
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text()).get("project", {})
        if isinstance(project.get("version"), str):
            return project["version"], "pyproject.toml"
    except (OSError, tomllib.TOMLDecodeError):
        pass
    return None, "nothing"


def detect_dialect(root: Path | None) -> tuple[str, str, str]:
    """(dialect, version, source) for a checkout, or a UsageError naming what to do."""
    from driver import dialects

    version, source = prime_rl_version(root)
    if version is None:
        windows = "; ".join(f"{n}: v{a} .. v{b}" for n, (a, b) in dialects.WINDOWS.items())
        raise UsageError(
            f"cannot tell which prime-rl {root} is (no git tag, no version in pyproject.toml). "
            f"The driver speaks these config schemas: {windows}. If you know the checkout's "
            f"version, set {VERSION_VAR}=<version> and run again.")
    return dialects.for_version(version, source), version, source


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
    return Backend("local", (sys.executable, "-m", "embedded_trainer.rl"), None, sys.executable,
                   probe=_probe_override() or (sys.executable, "-m", PROBE_MODULE),
                   seed_flag="--embedded.seed")


BACKENDS = {"prime_rl": prime_rl, "local": local}


def resolve(name: str, prime_rl_dir: str | None = None) -> Backend:
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return prime_rl(prime_rl_dir) if name == "prime_rl" else BACKENDS[name]()
