"""A warm interpreter for the scripts the driver runs in the training interpreter.

Every check that touches an environment (introspection, the rubric scoring the rows'
reasoning, the row count after an install, the gradient probe) runs as a script in the
interpreter that will train, so that what it sees is what the trainer will see. Each of those
used to start that interpreter afresh and import verifiers (with its openai, anthropic and
datasets clients) and, for the probe, torch and transformers: three to eight seconds per
check, most of a generated iteration's driver overhead.

The worker imports those libraries once, then runs each request in a **fresh process forked
from it**: the request's script starts with the libraries loaded and nothing else — no module
of any environment, no state from an earlier request — exactly as a new interpreter would, only
without the import time. A request that needs a library the worker has not loaded imports it
itself. The worker reads requests on stdin, so it ends when the driver does, however the driver
ends; a request past its time limit has its process killed.

The worker and what it runs are files of driver/envside, run by path: worker_server.py, and
per request a file such as envside/call.py (an env-side job) or envside/run_module.py (a module,
as `python -m` runs it). Where fork is unavailable (or DRIVER_NO_WORKER is set), or the worker
cannot start, `run_py` falls back to a new interpreter per request (same results).
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from driver.envside.worker_server import path_entries

ENVSIDE = Path(__file__).resolve().parents[1] / "envside"
SERVER = ENVSIDE / "worker_server.py"
# runs a module as `python -m MODULE ARGS...` would: run_py(python, RUN_MODULE, [MODULE, *ARGS])
RUN_MODULE = ENVSIDE / "run_module.py"

# What a worker imports before its first request (worker_server.py: "module" or
# "module:attr,attr", the attributes touched so that verifiers' lazily loaded classic API loads)
VERIFIERS = ["verifiers:SingleTurnEnv,Rubric,Parser", "verifiers.types:State", "datasets"]
# verifiers v1 (tasksets) takes about four seconds to import: only a worker for requests that
# say they need it (v1=True: the taskset jobs) loads it, and that one leaves the classic API out
V1 = ["verifiers.v1", "verifiers.v1.utils.loaders:taskset_class"]
TORCH = ["torch", "transformers", "transformers.models.qwen2.modeling_qwen2",
         "embedded_trainer.rollouts"]


class Worker:
    """One warm interpreter; requests run one at a time."""

    def __init__(self, python: str, preload: list[str], pythonpath: str):
        self.python = python
        self.lock = threading.Lock()
        self.buf = b""
        # started under `pythonpath`: sys.path's entries from it, made absolute against the
        # working directory as a new interpreter makes them
        self.path_entries = path_entries(pythonpath, os.getcwd())
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if pythonpath:
            env["PYTHONPATH"] = pythonpath
        self.proc = subprocess.Popen([python, str(SERVER), json.dumps(preload)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.ready = False   # the imports run while the driver goes on; run() waits for them
        # its top-level modules, once ready, each with the sys.path entry it was found in ("" for
        # one without a file: a namespace package, or built in)
        self.loaded: dict[str, str] = {}

    def _await_ready(self) -> None:
        if not self.ready:
            line = self._read(timeout=300)
            if not line.get("ready"):
                raise OSError("the worker did not start")
            self.loaded = dict(line.get("modules", {}))
            self.ready = True

    def serves_path(self, pythonpath: str, cwd: str | None = None) -> bool:
        """Whether a request under `pythonpath` gets from this worker what a new interpreter
        would give it. The request's process puts the request's entries on sys.path in place of
        the worker's (worker_server.py); what the worker imported before it started stays, so
        the answer is no when an entry the request adds holds a module of a name the worker
        loaded from elsewhere, when one it drops is where the worker loaded a module from, or
        when the entries both have change order. Waits for the worker's imports (what they
        loaded decides), which a request would wait for anyway."""
        theirs = path_entries(pythonpath, cwd or os.getcwd())
        mine = self.path_entries
        if theirs == mine:
            return True
        if [p for p in mine if p in theirs] != [p for p in theirs if p in mine]:
            return False
        self._await_ready()
        origins = {os.path.realpath(o) for o in self.loaded.values() if o}
        if any(os.path.realpath(p) in origins for p in set(mine) - set(theirs)):
            return False
        for folder in set(theirs) - set(mine):
            names = module_names(folder)
            here = os.path.realpath(folder)
            if names is None or any(not self.loaded[n] or os.path.realpath(self.loaded[n]) != here
                                    for n in names & self.loaded.keys()):
                return False
        return True

    def _read(self, timeout: float | None) -> dict:
        """The worker's next protocol line, waiting at most `timeout` seconds for it (None: as
        long as it takes; read from the raw pipe, so a line already received is never waited
        for again)."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            ready, _, _ = select.select([fd], [], [], None if timeout is None else max(0.0, timeout))
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                raise OSError("the worker ended")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, script: Path, args: list[str], timeout: float | None, cwd: str | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
        with self.lock, tempfile.TemporaryDirectory(prefix="driver-worker-") as tmp:
            self._await_ready()
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            req = {"path": str(script), "argv": [str(a) for a in args], "stdout": str(out),
                   "stderr": str(err), "cwd": cwd,
                   # the whole environment as the driver has it now (the request replaces the
                   # worker's, which is the driver's as it was when the worker started)
                   "env": {**os.environ, **(env or {})}}
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
            pid = self._read(timeout=60)["pid"]
            try:
                rc = self._read(timeout=timeout)["rc"]
            except TimeoutError:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self._read(timeout=60)
                raise subprocess.TimeoutExpired([self.python, str(script)], timeout) from None
            text = [p.read_text(errors="replace") if p.exists() else "" for p in (out, err)]
        return subprocess.CompletedProcess([self.python, str(script), *map(str, args)], rc, *text)

    def close(self) -> None:
        self.ask_to_end()
        self.await_end()

    def ask_to_end(self) -> None:
        """Close its stdin: the server ends once it reads the end (after its imports)."""
        if self.alive() and not self.proc.stdin.closed:
            self.proc.stdin.close()

    def await_end(self) -> None:
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# What the preloaded libraries read from the environment once, when imported: sys.path
# (PYTHONPATH), Hugging Face's caches and offline switches (huggingface_hub.constants,
# datasets.config, transformers), torch's and CUDA's settings, the API clients' defaults. A
# request runs with the driver's whole environment as it is then, but what an import already
# read stays as the worker's start saw it: a driver whose values of these differ from its
# worker's (a driver called in-process more than once) gets another worker. PYTHONPATH alone is
# set per request, as a new interpreter sets sys.path from it, wherever that cannot change which
# file an already imported module came from (Worker.serves_path).
IMPORT_TIME_ENV = ("PYTHONPATH", "HOME", "XDG_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_",
                   "DATASETS_", "TORCH", "PYTORCH_", "CUDA_", "OPENAI_", "ANTHROPIC_")
# of those, what only torch reads: a worker without torch loaded (verifiers and datasets import
# none of it) leaves them to the request, which imports torch itself if it needs it
TORCH_ENV = ("TORCH", "PYTORCH_", "CUDA_")


def import_time_settings(env: dict, torch: bool) -> list[tuple[str, str]]:
    """The settings in `env` that a worker's imports read once (torch's only where `torch` is
    loaded), PYTHONPATH aside: a request sets that itself (Worker.serves_path)."""
    return sorted((k, v) for k, v in env.items() if k.startswith(IMPORT_TIME_ENV)
                  and k != "PYTHONPATH" and (torch or not k.startswith(TORCH_ENV)))

_WORKERS: dict[tuple, Worker | None] = {}
MAX_WORKERS = 4   # a run needs at most three: classic, v1, torch


def module_names(folder: str) -> set[str] | None:
    """The top-level module names an import could find in the sys.path entry `folder`; None for
    any name at all (an entry that is a file, a zip, could hold any module)."""
    if os.path.isfile(folder):
        return None
    try:
        entries = os.listdir(folder)
    except OSError:
        return set()
    return {n.split(".", 1)[0] for n in entries
            if n.isidentifier() or n.endswith((".py", ".pyc", ".so", ".pyd"))}


def _key(python: str, torch: bool, v1: bool) -> tuple:
    return (python, torch, v1, tuple(import_time_settings(dict(os.environ), torch)))


def get(python: str, torch: bool = False, v1: bool = False, cwd: str | None = None,
        env: dict | None = None) -> Worker | None:
    """`python`'s worker (with torch and transformers loaded too when `torch`, verifiers v1
    when `v1`), started on first call; its imports run in the background until the first
    request waits for them. A request's PYTHONPATH (the driver's, or `env`'s) picks among
    workers of the same settings the first whose imports it leaves as they are (`cwd`: the
    request's working directory)."""
    if not hasattr(os, "fork") or os.environ.get("DRIVER_NO_WORKER"):
        return None
    pythonpath = {**os.environ, **(env or {})}.get("PYTHONPATH", "")
    same = _key(python, torch, v1)
    for key in [k for k in _WORKERS if k[:-1] == same]:
        w = _WORKERS.pop(key)
        if w is None or not w.alive():
            continue
        _WORKERS[key] = w   # the most recently used last
        try:
            if w.serves_path(pythonpath, cwd):
                return w
        except (OSError, TimeoutError):   # it did not start: replaced below
            _WORKERS.pop(key)
            w.close()
    key = (*same, pythonpath)
    while len(_WORKERS) >= MAX_WORKERS:   # the least recently used goes (a torch one holds a GB)
        old = _WORKERS.pop(next(iter(_WORKERS)))
        if old is not None:
            old.close()
    try:
        # a v1 worker serves the taskset jobs only: the classic API (seconds more) stays out
        w = Worker(python, (V1 if v1 else VERIFIERS) + (TORCH if torch else []), pythonpath)
    except OSError:
        w = None
    _WORKERS[key] = w
    return w


def run_py(python: str, script: Path, args: list[str], timeout: float | None = 600,
           cwd: str | None = None, env: dict | None = None, torch: bool = False,
           v1: bool = False, fresh: bool = False) -> subprocess.CompletedProcess:
    """Run the file `script` with `args` as sys.argv[1:] in a fresh process of `python`, as
    `subprocess.run([python, script, *args], capture_output=True, text=True)` would.
    `torch`: the request uses torch and transformers (the probe); `v1`: it uses verifiers v1
    (the taskset jobs). Each says so explicitly and gets a worker with those preloaded.
    `fresh`: a new interpreter, not the worker (the request must see `python` as it starts now,
    and needs none of the worker's imports); `timeout` None: no limit."""
    w = None if fresh else get(python, torch, v1, cwd=cwd, env=env)
    if w is not None:
        try:
            return w.run(script, args, timeout, cwd=cwd, env=env)
        except OSError:   # the worker did not start, or died mid-request: the old way
            for key in [k for k, v in _WORKERS.items() if v is w]:
                del _WORKERS[key]
    return subprocess.run([python, str(script), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})}, check=False)


def close_all() -> None:
    """End every worker: all are asked first, so they end side by side (an interpreter that
    holds torch takes a second or two to exit)."""
    workers = [w for w in _WORKERS.values() if w is not None]
    _WORKERS.clear()
    for w in workers:
        w.ask_to_end()
    for w in workers:
        w.await_end()


atexit.register(close_all)
