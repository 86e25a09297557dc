"""Installs land in the training interpreter: `prime env install` run into that interpreter's
venv and believed only when the package imports there; the in-process install too.

The `prime` here is a recording double of prime 0.18.0's `env install` (the contract in
reference: it installs into $UV_PROJECT_ENVIRONMENT, else $VIRTUAL_ENV, else the nearest
project .venv, else its own interpreter; it has no --python; it exits 0 when the install
fails). It records argv, cwd, VIRTUAL_ENV and UV_PROJECT_ENVIRONMENT, and "installs" by copying
the package's module into the site-packages of the interpreter it picked, as the real one would
target it. The training interpreter is a second venv (its python links to the same binary as
the driver's; its site-packages differs), which reaches the driver's libraries through a .pth.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from driver.envs.install import (cleanup, ensure_installed, install_generated, install_package,
                                 is_importable, purelib)
from driver.envs.introspect import introspect
from driver.envs.packages import write_package
from driver.errors import DriverError

PY = sys.executable

FAKE_PRIME = r'''#!__PYTHON__
"""A recording double of `prime env install` (prime 0.18.0)."""
import json, os, shutil, subprocess, sys
from pathlib import Path

argv = sys.argv[1:]
with open(os.environ["FAKE_PRIME_LOG"], "a") as f:
    f.write(json.dumps({"argv": argv, "cwd": os.getcwd(), "VIRTUAL_ENV": os.environ.get("VIRTUAL_ENV"),
                        "UV_PROJECT_ENVIRONMENT": os.environ.get("UV_PROJECT_ENVIRONMENT")}) + "\n")
args = [a for a in argv if a != "--plain"]
if args[:2] != ["env", "install"]:
    print(f"Error: this double knows only `env install`, not {args}")
    sys.exit(2)
args, path, ids = args[2:], Path("./environments"), []
while args:
    a = args.pop(0)
    if a in ("-p", "--path"):
        path = Path(args.pop(0))
    else:
        ids.append(a)


def workspace_python():
    """utils/workspace_python.py: the first candidate that exists."""
    for var in ("UV_PROJECT_ENVIRONMENT", "VIRTUAL_ENV"):
        if os.environ.get(var) and (Path(os.environ[var]) / "bin" / "python").exists():
            return str(Path(os.environ[var]) / "bin" / "python")
    for d in [Path.cwd(), *Path.cwd().parents]:
        if (d / "pyproject.toml").exists():
            if (d / ".venv" / "bin" / "python").exists():
                return str(d / ".venv" / "bin" / "python")
            break
    return sys.executable


python = workspace_python()
for env_id in ids:
    name = env_id.split("/")[-1].split("@")[0].replace("-", "_")
    src = (Path(os.environ["FAKE_PRIME_HUB"]) if "/" in env_id else path) / name / name
    print(f"Installing {env_id} with uv pip install --python {python}")
    if os.environ.get("FAKE_PRIME_MODE") == "fail-quietly" or not src.is_dir():
        print("✗ Installation failed: Installation failed with exit code 1")
        continue
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    shutil.copytree(src, Path(site) / name, dirs_exist_ok=True)
    dist = Path(site) / f"{name}-0.1.0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    files = [p.relative_to(site).as_posix() for p in (Path(site) / name).rglob("*") if p.is_file()]
    (dist / "RECORD").write_text("".join(f"{p},,\n" for p in files + [f"{dist.name}/METADATA", f"{dist.name}/RECORD"]))
    print(f"✓ Installed {env_id}")
sys.exit(0)   # as 0.18.0 does, whether or not the install worked
'''


@pytest.fixture(scope="module")
def train_py(tmp_path_factory) -> str:
    """A second venv's python: a distinct interpreter whose site-packages is not the driver's;
    a .pth there adds the driver's site-packages (verifiers, the built-in envs) after its own."""
    venv = tmp_path_factory.mktemp("train") / "venv"
    subprocess.run([PY, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = Path(purelib(python))
    (site / "_driver_libs.pth").write_text(f"import site; site.addsitedir({str(purelib(PY))!r})\n")
    assert site != purelib(PY)
    return python


@pytest.fixture
def fake_prime(tmp_path, monkeypatch):
    """`prime` on PATH, as a shell with the driver's venv activated has it (VIRTUAL_ENV set to
    the driver's venv); returns its log's reader."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    prime = bin_dir / "prime"
    prime.write_text(FAKE_PRIME.replace("__PYTHON__", PY))
    prime.chmod(0o755)
    log = tmp_path / "prime.jsonl"
    monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), os.environ["PATH"]]))
    monkeypatch.setenv("FAKE_PRIME_LOG", str(log))
    monkeypatch.setenv("FAKE_PRIME_HUB", str(tmp_path / "hub"))
    monkeypatch.setenv("VIRTUAL_ENV", str(Path(PY).parent.parent))

    def calls() -> list[dict]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return calls


@pytest.fixture
def names(train_py):
    made = []

    def make(stem="stock_arithmetic"):
        name = f"{stem}_t{uuid.uuid4().hex[:6]}_iter_1"
        made.append(name)
        return name
    yield make
    for name in made:
        for python in (PY, train_py):
            cleanup(python, name)


@pytest.fixture(scope="module")
def hub():
    return introspect(PY, "stock_arithmetic")


def _package(tmp_path: Path, name: str, hub: dict, n: int) -> Path:
    from stock_arithmetic.data import build_splits

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({k: r[k] for k in ("question", "answer", "info")}) + "\n"
                            for r in build_splits(0)["train"][:n]))
    return write_package(tmp_path, name, hub, data)


def test_prime_installs_a_generated_env_into_the_training_venv_not_the_drivers(tmp_path, train_py, fake_prime,
                                                                               names, hub):
    """With the driver's venv active, `prime env install` runs with UV_PROJECT_ENVIRONMENT and
    VIRTUAL_ENV naming the training venv, beside it: the package lands there (and its rows count
    there), not in the driver's site-packages."""
    name = names()
    pkg = _package(tmp_path, name, hub, 20)
    assert install_generated(train_py, pkg, 20)["rows"] == 20
    venv = Path(train_py).parent.parent
    assert (purelib(train_py) / name / "dataset.jsonl").exists()
    assert not (purelib(PY) / name).exists()
    call = fake_prime()[-1]
    assert call["argv"] == ["--plain", "env", "install", name, "-p", str(pkg.parent.resolve())]
    assert call["VIRTUAL_ENV"] == call["UV_PROJECT_ENVIRONMENT"] == str(venv)
    assert call["cwd"] == str(venv.parent)


def test_a_prime_that_exits_0_without_installing_is_a_failed_install(tmp_path, train_py, fake_prime, names,
                                                                     hub, monkeypatch):
    """prime 0.18 exits 0 when its install fails: the failure is seen (the package does not import
    in the training interpreter) and named with the interpreter, the command and its output."""
    monkeypatch.setenv("FAKE_PRIME_MODE", "fail-quietly")
    name = names()
    pkg = _package(tmp_path, name, hub, 5)
    with pytest.raises(DriverError) as e:
        install_package(train_py, pkg)
    msg = str(e.value)
    assert f"installing {pkg} failed" in msg and f"it exited 0, but {train_py} cannot import {name}" in msg
    assert f"env install {name} -p" in msg and f"VIRTUAL_ENV={Path(train_py).parent.parent}" in msg
    assert "✗ Installation failed: Installation failed with exit code 1" in msg
    assert len(fake_prime()) == 1


def test_a_hub_env_is_installed_by_prime_into_the_training_venv(tmp_path, train_py, fake_prime, names,
                                                                monkeypatch):
    """ensure_installed's `prime env install OWNER/NAME`: into the training venv, checked there;
    a quiet failure is `hub env not found` with prime's output."""
    name = names("somebody_env")
    mod = tmp_path / "hub" / name / name
    mod.mkdir(parents=True)
    (mod / "__init__.py").write_text("def load_environment(**kwargs):\n    raise NotImplementedError\n")
    hub_id = f"somebody/{name.replace('_', '-')}"
    ensure_installed(train_py, name, hub_id)
    assert (purelib(train_py) / name / "__init__.py").exists() and not (purelib(PY) / name).exists()
    call = fake_prime()[-1]
    assert call["argv"] == ["--plain", "env", "install", hub_id]
    assert call["VIRTUAL_ENV"] == call["UV_PROJECT_ENVIRONMENT"] == str(Path(train_py).parent.parent)

    cleanup(train_py, name)
    monkeypatch.setenv("FAKE_PRIME_MODE", "fail-quietly")
    with pytest.raises(DriverError) as e:
        ensure_installed(train_py, name, hub_id)
    msg = str(e.value)
    assert msg.startswith("hub env not found") and f"cannot import {name}" in msg
    assert "Installation failed" in msg and e.value.exit_code == 2


def test_a_training_interpreter_outside_a_venv_is_refused_before_prime_runs(tmp_path, fake_prime, names, hub):
    """prime installs only into a venv: an interpreter with no pyvenv.cfg two levels up is
    refused with what to do, and prime is not run."""
    base = getattr(sys, "_base_executable", None)
    if not base or (Path(base).parent.parent / "pyvenv.cfg").exists():
        pytest.skip("no interpreter outside a venv here")
    name = names()
    pkg = _package(tmp_path, name, hub, 5)
    with pytest.raises(DriverError) as e:
        install_package(base, pkg)
    msg = str(e.value)
    assert "is not in a virtual environment" in msg and "pyvenv.cfg" in msg and "python -m venv" in msg
    assert fake_prime() == [] and not (purelib(PY) / name).exists()


def test_without_prime_the_in_process_install_targets_the_training_interpreter(tmp_path, train_py, names, hub,
                                                                                monkeypatch):
    """No prime on PATH: hatchling and installer put the package in the training interpreter's
    scheme, where it imports; the driver's site-packages is untouched."""
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                                               if not (Path(d) / "prime").exists()))
    name = names()
    pkg = _package(tmp_path, name, hub, 5)
    install_package(train_py, pkg)
    assert (purelib(train_py) / name / "__init__.py").exists() and not (purelib(PY) / name).exists()
    assert is_importable(train_py, name)
