"""The hub env's introspection, loaded once per test process for each distinct request: what an
in-process driver's test (conftest.driver) gets for `classic.introspect` and `taskset.introspect`.

Nearly every whole run of the suite starts by introspecting the same hub env (stock_arithmetic,
no env args) in the same interpreter: a real load through verifiers, twice over (its selection
split too), about half a second of CPU each, some eighty times a suite. The answer depends only on
the request, the interpreter, the environment the job runs with and the env's own files, so a
request equal in all of those (the shell but for the test's own paths and the doubles' knobs,
PER_TEST) gets the answer the job gave the first time, as the same job would
give it again. What stays real: the first load of each distinct request; every request that
failed (a failure is never kept, so an env that does not load fails every time); every other
env-side job; every driver run as a process of its own; and every direct call of
`envside.call` in a test (test_envside.py, test_environments.py test the jobs themselves).

The env's files are found as the job's interpreter finds them: the request's PYTHONPATH first,
then this interpreter's sys.path (the same venv), by PathFinder, without importing anything. A
module no PathFinder finds (an import hook of an editable install, none here) is never kept.
Every file under the module (or the module file itself) is in the key by size and mtime, so an
env rewritten or reinstalled between two runs of one test is loaded afresh.

SUITE_ENVSIDE_FRESH=1 turns it off (`python bench/suite_time.py --peer-env SUITE_ENVSIDE_FRESH=1`
compares the two).
"""
from __future__ import annotations

import contextlib
import os
import sys
from importlib.machinery import PathFinder
from pathlib import Path

from driver.envs import envside
from generators.core import module_name

ACTIONS = frozenset({"classic.introspect", "taskset.introspect"})
# the variables that name a test's own files and the doubles' knobs, which no env reads: the rest
# of the shell the job runs with is in the key
PER_TEST = ("DRIVER_", "DOUBLE_", "PRIME_DOUBLE_", "PYTEST_", "NETRC")
_ANSWERS: dict[tuple, object] = {}
COUNTS = {"loaded": 0, "kept": 0}


def _files(root: Path) -> tuple:
    if root.is_file():
        st = root.stat()
        return ((str(root), st.st_size, st.st_mtime_ns),)
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            st = path.stat()
            out.append((str(path), st.st_size, st.st_mtime_ns))
    return tuple(out)


def source_stamp(env_id: str) -> tuple | None:
    """The env module's files as the job's interpreter would find them, or None where they
    cannot be told without importing (then nothing is kept)."""
    top = module_name(env_id).split(".")[0]
    cwd = os.getcwd()
    entries = [os.path.join(cwd, p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    spec = PathFinder.find_spec(top, entries + [p for p in sys.path if p])
    if spec is None:
        return None
    roots = list(spec.submodule_search_locations or []) or [spec.origin]
    return tuple(_files(Path(r)) for r in roots if r)


def key(python: str, action: envside.Action, request) -> tuple | None:
    stamp = source_stamp(request.env_id)
    if stamp is None:
        return None
    shell = tuple(sorted((k, v) for k, v in os.environ.items() if not k.startswith(PER_TEST)))
    return (python, action.name, request.model_dump_json(), os.getcwd(), shell, stamp)


@contextlib.contextmanager
def active():
    """envside.call answering the introspection of an env already loaded with the same key."""
    real = envside.call

    def call(python, action, request, timeout=None):
        k = key(python, action, request) if action.name in ACTIONS else None
        if k is None:
            return real(python, action, request, timeout)
        if k in _ANSWERS:
            COUNTS["kept"] += 1
            return _ANSWERS[k].model_copy(deep=True)
        got = real(python, action, request, timeout)   # a failure raises: nothing is kept
        COUNTS["loaded"] += 1
        _ANSWERS[k] = got.model_copy(deep=True)
        return got

    envside.call = call
    try:
        yield
    finally:
        envside.call = real
