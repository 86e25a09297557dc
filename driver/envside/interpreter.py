"""The env-side jobs that ask the training interpreter about itself, not about an environment:
which modules it finds, where it installs, and where it finds one module. They run before an
env is installed, in an interpreter that may have no verifiers: standard library only.

Each answers as `python -c` would in a new interpreter of that Python (driver/envs/envside.py
runs these actions in a fresh process, never forked from the warm worker): the folder of these
scripts, which call.py puts first on sys.path to import the job, and the job modules it
imported from there are set aside while the job looks.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import sysconfig
from collections.abc import Iterator

HERE = os.path.dirname(os.path.realpath(__file__))


def _is_here(entry: str) -> bool:
    return bool(entry) and os.path.realpath(entry) == HERE


@contextlib.contextmanager
def _as_python_c() -> Iterator[None]:
    """sys.path and sys.modules as under `python -c`: without this folder and the job modules
    imported from it (the running script, __main__, stays)."""
    path = sys.path[:]
    mine = {name: sys.modules.pop(name) for name, m in list(sys.modules.items())
            if name != "__main__" and _is_here(os.path.dirname(getattr(m, "__file__", None) or ""))}
    sys.path[:] = [p for p in sys.path if not _is_here(p)]
    try:
        yield
    finally:
        sys.path[:] = path
        sys.modules.update(mine)


def missing_modules(request: dict) -> dict:
    """The modules of `request["modules"]` this interpreter cannot find (no import runs)."""
    with _as_python_c():
        return {"missing": [m for m in request["modules"] if importlib.util.find_spec(m) is None]}


def install_paths(request: dict) -> dict:
    """This interpreter's install scheme (sysconfig's paths: purelib, platlib, scripts, ...)."""
    return {"paths": sysconfig.get_paths()}


def module_locations(request: dict) -> dict:
    """Where this interpreter finds `request["module"]`: a package's directories, a module's
    file; none when it finds no such module."""
    with _as_python_c():
        spec = importlib.util.find_spec(request["module"])
    if spec is None:
        return {"locations": []}
    return {"locations": list(spec.submodule_search_locations or []) or [spec.origin or ""]}


JOBS = {"missing_modules": missing_modules, "install_paths": install_paths,
        "module_locations": module_locations}
