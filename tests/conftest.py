"""Shared helpers: every full run goes through the trainer double, in a subprocess, exactly as a
user would run `driver`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOUBLE = ROOT / "tests" / "trainer_double.py"
ENVS = str(ROOT / "tests" / "envs")   # the envs written for the tests (index_gym, digit_tally, ...)
FAST = ["--steps-per-run", "3", "--batch-size", "256", "--eval-examples", "200"]
# the trainer double's cache of loaded env rows, one per test process (trainer_double.load_rows)
ROW_CACHE: Path | None = None


# the socket of this test process's warm env-row loader for the trainer double (row_server.py),
# and the import-time settings it started under: it declines a launch whose settings differ
ROW_SERVER: str | None = None
ROW_SERVER_SETTINGS: list = []


def _pin_torch_cache_dir() -> None:
    """torch writes TORCHINDUCTOR_CACHE_DIR into os.environ the first time a process compiles
    (torch/_inductor/runtime/cache_dir_utils.py:19). A test that does so in the test process would
    change, for every later driver call, an import-time setting the driver's warm torch worker was
    started under (driver/envs/worker.py's TORCH_ENV), and the next call would start another.
    Set first, to the value torch would write (the same file's
    default_cache_dir, :24-33, computed here rather than imported: importing torch would cost
    every test process seconds), it never changes."""
    import getpass
    import re
    import tempfile

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(
        tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user)))


_pin_torch_cache_dir()


# The suite's runs install their generated envs into this interpreter's site-packages, each run
# under its own package tags: some 70 packages a suite. Left there, every later suite (and every
# env-side job that reads the installed distributions' metadata) would read thousands of them.
# The session (xdist's controller, or the one process without it) removes those its own runs
# installed when it ends; what was there before it started stays.
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
_INSTALLED_BEFORE = pytest.StashKey[set]()


def _is_controller(config) -> bool:
    return not hasattr(config, "workerinput")


def pytest_sessionstart(session):
    from driver.envs import install

    if _is_controller(session.config):
        session.config.stash[_INSTALLED_BEFORE] = install.driver_installs(SITE_PACKAGES)


def pytest_sessionfinish(session, exitstatus):
    from driver.envs import install

    before = session.config.stash.get(_INSTALLED_BEFORE, None)
    if _is_controller(session.config) and before is not None:
        # this session's runs only (installed from under its base temp): a run outside the
        # suite (a demo, a bench) keeps its generated envs while a suite ends beside it
        install.remove_driver_installs(SITE_PACKAGES, keep=before,
                                       under=session.config._tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session", autouse=True)
def _double_row_cache(tmp_path_factory):
    global ROW_CACHE, ROW_SERVER, ROW_SERVER_SETTINGS
    import shutil
    import tempfile

    ROW_CACHE = tmp_path_factory.mktemp("double-row-cache")
    sock_dir = tempfile.mkdtemp(prefix="rows-")   # short: a unix socket's path has 107 bytes
    ROW_SERVER = os.path.join(sock_dir, "s")
    # under the import-time settings driver_env gives every launch (two GPUs visible): a launch
    # whose settings differ from the server's loads itself. Not waited for: a launch before the
    # server listens loads itself too.
    server_env = driver_env(Path(sock_dir))
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "row_server.py"), ROW_SERVER],
                              env=server_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from row_server import import_time

    ROW_SERVER_SETTINGS = import_time(server_env)
    yield
    server.kill()
    server.wait()
    shutil.rmtree(sock_dir, ignore_errors=True)


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
        # how long a trainer rank takes to exit on SIGTERM is not settled by prime-rl's source
        # (double_launcher.py): an instant exit here; test_full_run_and_resume's reference run
        # takes the double's 0.3 s, and test_production_shape's stalled control a rank that never
        # exits on SIGTERM
        "DOUBLE_RANK_TEARDOWN_SECONDS": "0",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NETRC": str(tmp_path / "no-netrc"),
        "PYTHONUNBUFFERED": "1",
    })
    if ROW_CACHE is not None:
        env["DOUBLE_ROW_CACHE"] = str(ROW_CACHE)
    if ROW_SERVER is not None:
        env["DOUBLE_ROW_SERVER"] = ROW_SERVER
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


@pytest.fixture(scope="module")
def test_envs_on_path():
    """tests/envs on PYTHONPATH for a whole module (`pytestmark = pytest.mark.usefixtures(
    "test_envs_on_path")`), for the driver's env-side jobs and the module's own checks."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", with_test_envs(os.environ))
        yield


def cpu_user_env(tmp_path: Path) -> dict:
    """A CPU user's shell: no prime-rl (nor its stand-in), the test envs importable, and an
    empty student cache (no earlier build of any recipe)."""
    env = driver_env(tmp_path, EMBEDDED_TRAINER_CACHE=tmp_path / "cache")
    env.pop("DRIVER_RL_COMMAND")
    env.pop("PRIME_RL_DIR", None)
    env["PYTHONPATH"] = with_test_envs(env)
    return env


def driver(args: list[str], env: dict, timeout: float = 600, cwd: Path | None = None,
           own_process: bool = False, processes: bool = False) -> subprocess.CompletedProcess:
    """`driver ARGS` in the shell `env`, as a user would type it. It runs in this test process
    (driver.cli.main with `env` as the whole environment, the output captured) unless it must
    be a process of its own: `own_process`, or a DRIVER_FAULT_KILL_AT that SIGKILLs the driver.
    In-process, the generator and every env-side job are still processes of their own, launched
    exactly as from the command line, and the trainer double runs in a thread of this process
    (tests/inprocess_trainer.py; `processes`: as a process tree, as from the command line); the
    driver's interpreter start and its warm env worker's imports (seconds per call) are paid
    once per test process rather than once per call. `timeout` bounds a process of its own
    only."""
    if own_process or env.get("DRIVER_FAULT_KILL_AT"):
        return subprocess.run([sys.executable, "-m", "driver.cli", *args], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout)
    if processes or os.environ.get("SUITE_TRAINER_PROCESSES"):
        return driver_in_process(args, env, cwd)
    from driver.backends.prime_rl import PrimeRL
    from inprocess_trainer import ThreadRunner

    runner = PrimeRL.runner
    PrimeRL.runner = lambda self: ThreadRunner()   # type: ignore[method-assign]
    try:
        return driver_in_process(args, env, cwd)
    finally:
        PrimeRL.runner = runner   # type: ignore[method-assign]


@pytest.fixture
def own_workers():
    """No warm worker (driver/envs/worker.py) for the test to find: the ones it starts are
    closed after it, and the test process's own are back for the tests that follow, not started
    again (seconds each)."""
    from driver.envs import worker

    saved = dict(worker._WORKERS)
    worker._WORKERS.clear()
    try:
        yield
    finally:
        worker.close_all()
        worker._WORKERS.update(saved)


@pytest.fixture
def fast_clock(monkeypatch):
    """The in-process driver's clock (driver/clock.py) running FAST_CLOCK_RATE times faster than
    real time: its limits, grace periods and poll intervals pass in a fifth of their length, so a
    test of a 15-second stall timeout waits 3 s. Everything outside the driver (the trainer
    double, its process tree, the hosted double) keeps real time, as a slow trainer would, so
    every limit of the test must stay well above what a healthy launch takes in real time on a
    loaded machine once divided by the rate (a 3-second stall limit would not). Only a driver
    running in the test's process (`driver` without own_process) sees it."""
    import time

    from driver import clock

    start = time.monotonic()
    monkeypatch.setattr(clock, "monotonic",
                        lambda: start + (time.monotonic() - start) * FAST_CLOCK_RATE)
    monkeypatch.setattr(clock, "sleep", lambda s: time.sleep(s / FAST_CLOCK_RATE))
    return FAST_CLOCK_RATE


FAST_CLOCK_RATE = 5


def driver_in_process(args: list[str], env: dict, cwd: Path | None = None) -> subprocess.CompletedProcess:
    import contextlib
    import io

    from driver import cli, faults

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(env)
    faults._hits.clear()   # a fresh driver process starts counting its fault points at zero
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = cli.main([str(a) for a in args])
            except SystemExit as e:   # argparse's usage errors and --help
                rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
            except Exception:   # uncaught: reported as the interpreter reports it, status 1
                import traceback

                traceback.print_exc()
                rc = 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess([sys.executable, "-m", "driver.cli", *map(str, args)], rc,
                                       out.getvalue(), err.getvalue())


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
