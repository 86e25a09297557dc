"""Installing environments into the training interpreter: whether it imports an env's module
(a built-in is installed from the bundled copy, a hub env by `prime env install`), where it
installs (its venv, its sysconfig scheme), and a generated package's cleanup-then-install,
checked by counting its rows in a fresh process of that interpreter.

What runs in that interpreter runs as an env-side job (driver/envside, through
driver/envs/envside.py); the driver never imports an environment itself.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sysconfig
from pathlib import Path

from driver import faults, resources
from driver.envs import envside
from driver.errors import DriverError
from generators.core import module_name

BUILTIN_ENVS = {"stock_arithmetic", "model_router", "hidden_number", "tool_calculator"}
# what install_package writes in a package's dist-info/INSTALLER: the driver's own installs, told
# apart from pip's and uv's
INSTALLER = "synthetic-self-improve-rl"
# beside INSTALLER in an installed package's dist-info: the directory it was installed from
SOURCE_RECORD = "synthetic_self_improve_rl_source"


def _unimportable(python: str, modules: list[str]) -> set[str]:
    """The modules the given interpreter cannot find (one fresh process for all of them); all
    of them when the interpreter fails to answer."""
    try:
        got = envside.call(python, envside.MISSING_MODULES, envside.ModulesRequest(modules=modules))
    except envside.EnvsideError:
        return set(modules)
    return set(got.missing)


def is_importable(python: str, module: str) -> bool:
    return not _unimportable(python, [module])


def missing_envs(python: str, env_ids: list[str]) -> list[str]:
    """The env ids whose modules the given interpreter cannot import."""
    gone = _unimportable(python, [module_name(e) for e in env_ids])
    return [e for e in env_ids if module_name(e) in gone]


def ensure_installed(python: str, env_id: str, hub_id: str | None = None) -> None:
    """An installed module is used directly; a built-in is installed from the bundled copy;
    otherwise `prime env install HUB_ID` (the run's --hub-id, else the env id) into `python`'s
    virtual environment when the prime CLI is there; else a clear error. An install counts
    only when `python` then imports the module."""
    mod = module_name(env_id)
    if is_importable(python, mod):
        return
    if mod in BUILTIN_ENVS:
        install_package(python, resources.environments_dir() / mod)
        if not is_importable(python, mod):
            raise DriverError(f"installing the built-in env {mod} into {python} left it unimportable there")
        return
    if shutil.which("prime"):
        why = prime_install(python, hub_id or env_id, mod)
        if not why:
            return
        raise DriverError(f"hub env not found: '{env_id}' is not installed for {python} and could "
                          f"not be installed: {why}", exit_code=2)
    raise DriverError(
        f"hub env not found: '{env_id}' is not installed for {python} and could not be "
        f"installed (the prime CLI is not on PATH). Install it (`prime env install "
        f"{hub_id or env_id}` with VIRTUAL_ENV set to that interpreter's venv, or `pip install` its "
        "package into that interpreter), then run the command again.", exit_code=2)


def venv_of(python: str) -> Path:
    """The virtual environment `python` runs in: the directory two levels above its bin/python
    (the path as given, not the binary a venv's python links to), which holds pyvenv.cfg."""
    exe = Path(python if os.sep in python else (shutil.which(python) or python))
    venv = Path(os.path.abspath(exe)).parent.parent
    if not (venv / "pyvenv.cfg").is_file():
        raise DriverError(
            f"the training interpreter {python} is not in a virtual environment ({venv} has no "
            "pyvenv.cfg), and `prime env install` installs only into one ($UV_PROJECT_ENVIRONMENT or "
            "$VIRTUAL_ENV). Train with a venv's interpreter (`python -m venv DIR`, then "
            "DIR/bin/python), or take the prime CLI off PATH so the driver installs into "
            f"{python} itself, and resume.", exit_code=2)
    return venv


PRIME_TIMEOUT = 1800.0   # seconds: a hub install resolves and downloads


def prime_install(python: str, target: str, module: str, path: Path | None = None) -> str | None:
    """`prime env install TARGET [-p PATH]` into `python`'s virtual environment; None when
    `python` then imports `module`, else why not (the interpreter, the command, the tail of its
    output). prime 0.18 has no --python: it installs into $UV_PROJECT_ENVIRONMENT, else
    $VIRTUAL_ENV, else the nearest project .venv, else its own interpreter, so both variables
    name that venv and it runs beside it; and it exits 0 when the install fails, so only the
    import in `python` is believed."""
    try:
        venv = venv_of(python)
    except DriverError as e:
        return str(e)
    cmd = [shutil.which("prime") or "prime", "--plain", "env", "install", target]
    if path is not None:
        cmd += ["-p", str(Path(path).resolve())]
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv), "VIRTUAL_ENV": str(venv),
           "PRIME_DISABLE_VERSION_CHECK": "1"}
    shown = f"`{shlex.join(cmd)}` (in {venv.parent}, VIRTUAL_ENV={venv})"
    try:
        r = subprocess.run(cmd, cwd=venv.parent, env=env, capture_output=True, text=True,
                           timeout=PRIME_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{shown} for {python} did not finish: {type(e).__name__}: {e}"
    if r.returncode == 0 and is_importable(python, module):
        return None
    out = "\n".join(((r.stdout or "") + (r.stderr or "")).strip().splitlines()[-15:]) or "no output"
    result = (f"it exited {r.returncode}" if r.returncode else
              f"it exited 0, but {python} cannot import {module}")
    return (f"{shown} did not install {module} for {python}: {result}. Its output ends:\n{out}\n"
            f"Run it by hand to see all of it; resume once {python} imports {module}.")


_SCHEMES: dict[str, dict[str, str]] = {}


def install_scheme(python: str) -> dict[str, str]:
    """`python`'s install paths (sysconfig's), read once per driver process."""
    if python not in _SCHEMES:
        try:
            got = envside.call(python, envside.INSTALL_PATHS, envside.NoArguments())
        except envside.EnvsideError as e:
            raise DriverError(f"cannot read the install paths of {python}: {e.tail()[-500:]}") from None
        _SCHEMES[python] = got.paths
    return _SCHEMES[python]


def purelib(python: str) -> Path:
    return Path(install_scheme(python)["purelib"])


def _is_driver_target(python: str) -> bool:
    """Whether `python` installs where the driver's own interpreter does (its purelib: two
    venvs' pythons link to one binary, so the binary says nothing)."""
    return purelib(python).resolve() == Path(sysconfig.get_paths()["purelib"]).resolve()


def _copies(name: str) -> list[str]:
    """The site-packages entries that are copies of generated package `name`."""
    return [f"{name}.py", name, f"{name}-*.dist-info", f"_{name}.pth", f"__editable__*{name}*"]


def cleanup(python: str, name: str) -> list[str]:
    """Remove every installed copy of `name` from site-packages: its module, its metadata, an
    editable install's path file, and any stale root-level copy of its data or module. Returns
    what was removed."""
    return remove_copies(purelib(python), name, ("dataset.jsonl",))


def remove_copies(site: Path, name: str, also: tuple[str, ...] = ()) -> list[str]:
    """Remove generated package `name`'s entries (and the `also` patterns) from the site-packages
    directory `site`; returns what was removed."""
    removed = []
    for pattern in [*also, *_copies(name)]:
        for p in site.glob(pattern):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p.name)
    return removed


def driver_installs(site: Path) -> set[str]:
    """The packages in the site-packages directory `site` that install_package put there (their
    INSTALLER says so), by name."""
    return {d.name.split("-", 1)[0] for d in site.glob("*.dist-info")
            if (d / "INSTALLER").is_file() and (d / "INSTALLER").read_text().strip() == INSTALLER}


def installed_from(site: Path, name: str) -> Path | None:
    """The package directory install_package installed `name` from (its SOURCE_RECORD), or
    None where it did not record one."""
    for d in site.glob(f"{name}-*.dist-info"):
        if (d / SOURCE_RECORD).is_file():
            return Path((d / SOURCE_RECORD).read_text().strip())
    return None


def remove_driver_installs(site: Path, keep: frozenset[str] | set[str] = frozenset(),
                           under: Path | None = None) -> list[str]:
    """Remove from `site` every package install_package put there but those named in `keep`
    (and, with `under`, those it recorded installing from outside that directory: another
    run's); their names."""
    gone = sorted(driver_installs(site) - keep)
    if under is not None:
        root = Path(under).resolve()
        gone = [n for n in gone if (src := installed_from(site, n)) is None or src.is_relative_to(root)]
    for name in gone:
        remove_copies(site, name)
    return gone


def stale_copies(python: str, name: str) -> list[str]:
    """Copies of `name` that `python` may load instead of the installed package: entries of its
    site-packages named after `name` that the installed distribution's RECORD does not own, and
    the place `python` finds `name` when that is not the installed package's directory (a copy
    earlier on sys.path). Empty when the one copy is the installed one."""
    sp = purelib(python)
    owned: set[str] = set()
    for dist in sp.glob(f"{name}-*.dist-info"):
        record = dist / "RECORD"
        if record.is_file():
            owned |= {line.split(",", 1)[0].split("/", 1)[0] for line in record.read_text().splitlines() if line}
    stale = [str(p) for pattern in _copies(name) for p in sp.glob(pattern) if p.name not in owned]
    try:
        locations = envside.call(python, envside.MODULE_LOCATIONS,
                                 envside.ModuleRequest(module=name)).locations
    except envside.EnvsideError:   # the interpreter did not answer: only the site-packages entries
        locations = []
    installed = (sp / name).resolve()
    for where in filter(None, map(str.strip, locations)):
        found = Path(where).resolve()
        if found != installed and installed not in found.parents and where not in stale:
            stale.append(where)
    return stale


def install_package(python: str, pkg_dir: Path) -> None:
    """Install a package directory into `python`'s site-packages: hatchling builds its wheel in
    this process and `installer` (PyPA's wheel installer) unpacks it into that interpreter's
    scheme. No pip, no resolver, no interpreter start: a generated environment has no
    dependency the hub env does not already bring. With the `prime` CLI on PATH and another
    interpreter as the target, `prime env install` does it instead, as a prime user expects,
    into that interpreter's venv and checked by importing the package there (prime_install)."""
    import tempfile

    if shutil.which("prime") and not _is_driver_target(python):
        why = prime_install(python, pkg_dir.name, pkg_dir.name, path=Path(pkg_dir).parent)
        if why:
            raise DriverError(f"installing {pkg_dir} failed: {why}")
        return
    from hatchling.builders.wheel import WheelBuilder
    from installer import install
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    scheme = install_scheme(python)
    with tempfile.TemporaryDirectory(prefix="driver-wheel-") as tmp:
        try:
            wheel = next(iter(WheelBuilder(str(pkg_dir)).build(directory=tmp, versions=["standard"])))
            dest = SchemeDictionaryDestination(
                {"purelib": scheme["purelib"], "platlib": scheme["platlib"],
                 "headers": scheme["include"], "scripts": scheme["scripts"], "data": scheme["data"]},
                interpreter=python, script_kind="posix", bytecode_optimization_levels=())
            with WheelFile.open(wheel) as source:
                install(source, dest, {"INSTALLER": f"{INSTALLER}\n".encode(),
                                       SOURCE_RECORD: f"{Path(pkg_dir).resolve()}\n".encode()})
        except Exception as e:  # noqa: BLE001 - a broken pyproject, a full disk, a file already there
            raise DriverError(f"installing {pkg_dir} failed: {type(e).__name__}: {e}") from None


def count_rows(python: str, name: str, kind: str = envside.CLASSIC) -> int | None:
    """How many rows (or tasks) an installed generated env builds, in a fresh process."""
    try:
        return envside.call(python, envside.JOBS[kind].count, envside.CountRequest(env_id=name)).rows
    except envside.EnvsideError:
        return None


def install_generated(python: str, pkg_dir: Path, expected_rows: int,
                      kind: str = envside.CLASSIC) -> dict:
    """Cleanup, install, then count rows in a fresh process of the same interpreter. A mismatch
    or a failed load repeats the cleanup once, then stops with what the load raised first (the
    cause verifiers' loader wraps: its type, message, file and line), naming a stale copy of
    the package only when one is there (stale_copies)."""
    name = pkg_dir.name
    rows: int | None = None
    failed: envside.EnvsideError | None = None
    for attempt in (1, 2):
        removed = cleanup(python, name)
        faults.point("install:after-cleanup")
        install_package(python, pkg_dir)
        faults.point("install:after-install")
        try:
            rows = envside.call(python, envside.JOBS[kind].count, envside.CountRequest(env_id=name)).rows
            failed = None
        except envside.EnvsideError as e:
            rows, failed = None, e
        if rows == expected_rows:
            return {"package": name, "rows": rows, "attempts": attempt, "removed": removed}
    stale = stale_copies(python, name)
    if stale:
        then = (f" A stale copy of {name} is still there, which {python} may load instead of the "
                f"installed one: {', '.join(stale)}. Remove it, then resume.")
    elif failed is not None:
        then = (f" Fix what the error names (the package is {pkg_dir}, its rows "
                f"{pkg_dir / name / 'dataset.jsonl'}), then resume.")
    else:
        then = (f" Its rows are {pkg_dir / name / 'dataset.jsonl'}: check that they are the ones the "
                "dataset phase wrote, then resume.")
    if failed is not None:
        raise DriverError(f"loading {name} failed (cleanup and install repeated once): "
                          f"{failed.first_error(prefer=f'{os.sep}{name}{os.sep}')}.{then}")
    raise DriverError(f"environment {name} builds {rows} rows after install, expected {expected_rows} "
                      f"(cleanup repeated once).{then}")
