"""Shared helpers: every full run goes through the trainer double, in a subprocess, exactly as a
user would run `driver`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = ROOT / "tests" / "trainer_double.py"
ENVS = str(ROOT / "tests" / "envs")   # the envs written for the tests (index_gym, digit_tally, ...)
FAST = ["--steps-per-run", "3", "--batch-size", "256", "--eval-examples", "200"]
# the trainer double's cache of loaded env rows, one per test process (trainer_double.load_rows)
ROW_CACHE: Path | None = None


@pytest.fixture(scope="session", autouse=True)
def _double_row_cache(tmp_path_factory):
    global ROW_CACHE
    ROW_CACHE = tmp_path_factory.mktemp("double-row-cache")
    yield


# `uv` inside a prime-rl checkout, as the final-weights eval calls it (tests/prime_rl_bin/uv)
PRIME_RL_BIN = ROOT / "tests" / "prime_rl_bin"


def driver_env(tmp_path: Path, **extra) -> dict:
    """A GPU node's shell, with the trainer double standing in for prime-rl's `rl`: two GPUs
    visible, no W&B credentials."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DRIVER_", "DOUBLE_", "WANDB_", "CUDA_VISIBLE_DEVICES"))}
    env.update({
        "DRIVER_RL_COMMAND": f"{sys.executable} {DOUBLE}",
        "DRIVER_POLL_INTERVAL": "0.1",
        "DOUBLE_LAUNCH_LOG": str(tmp_path / "launches.jsonl"),
        "DOUBLE_SERVER_DIR": str(tmp_path / "servers"),
        "DOUBLE_READY_TIMEOUT_SECONDS": "30",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NETRC": str(tmp_path / "no-netrc"),
        "PYTHONUNBUFFERED": "1",
    })
    if ROW_CACHE is not None:
        env["DOUBLE_ROW_CACHE"] = str(ROW_CACHE)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def current_env(tmp_path: Path, **extra) -> dict:
    """driver_env for prime-rl's current generation (v0.8.1.dev67): the trainer double's `rl`,
    and the real final-weights eval (rl_contract/final_eval.py) calling a `uv` double for
    prime-rl's `inference` and `evals`."""
    env = driver_env(tmp_path, DRIVER_PRIME_RL_VERSION="0.8.1.dev67", **extra)
    env.setdefault("DRIVER_EVALS_COMMAND",
                   f"{sys.executable} -m rl_contract.final_eval --prime-rl-dir {tmp_path}")
    env["PATH"] = f"{PRIME_RL_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def with_test_envs(env) -> str:
    """`env`'s PYTHONPATH with the tests' own envs (ENVS) first."""
    return os.pathsep.join(p for p in [ENVS, env.get("PYTHONPATH", "")] if p)


def cpu_user_env(tmp_path: Path) -> dict:
    """A CPU user's shell: no prime-rl (nor its stand-in), the test envs importable, and an
    empty student cache (no earlier build of any recipe)."""
    env = driver_env(tmp_path, EMBEDDED_TRAINER_CACHE=tmp_path / "cache")
    env.pop("DRIVER_RL_COMMAND")
    env.pop("PRIME_RL_DIR", None)
    env["PYTHONPATH"] = with_test_envs(env)
    return env


def driver(args: list[str], env: dict, timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "driver.cli", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


def run_dir_from(out: str) -> Path:
    for line in out.splitlines():
        if line.startswith("run directory: "):
            return Path(line.split(": ", 1)[1].strip())
    raise AssertionError(f"no run directory in output:\n{out}")


def launches(tmp_path: Path) -> list[dict]:
    p = tmp_path / "launches.jsonl"
    return [json.loads(l) for l in p.read_text().splitlines()] if p.exists() else []


@pytest.fixture
def runs(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    return d
