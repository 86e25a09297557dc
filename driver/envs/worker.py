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

Where fork is unavailable, or the worker cannot start, `run_py` falls back to a new
interpreter per script (the old behaviour, same results).
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

# Runs in the target interpreter: argv[1] = JSON list of import statements to run first.
_SERVER = r'''
import json, os, sys, traceback
for stmt in json.loads(sys.argv[1]):
    try:
        exec(stmt, {})
    except Exception:
        pass   # a library that is not there is imported (or found missing) by the request
out = os.fdopen(os.dup(1), "w")
print(json.dumps({"ready": True}), file=out, flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setsid()   # its own group: a time limit kills the request's whole tree
            for target, path in ((1, req["stdout"]), (2, req["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), target)
            if req.get("cwd"):
                os.chdir(req["cwd"])
            os.environ.update(req.get("env") or {})
            sys.stdin = open(os.devnull)
            sys.argv = ["-c", *req["argv"]]
            try:
                exec(compile(req["script"], "<driver script>", "exec"), {"__name__": "__main__"})
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except BaseException:
                traceback.print_exc()
                code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    print(json.dumps({"pid": pid}), file=out, flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), file=out, flush=True)
'''

VERIFIERS = ["import verifiers as vf; vf.SingleTurnEnv; vf.Rubric; vf.Parser",
             "from verifiers.types import State", "import datasets"]
# verifiers v1 (tasksets) takes about four seconds to import: only a worker for scripts that use
# it (driver/tasksets.py's) loads it
V1 = ["import verifiers.v1", "from verifiers.v1.utils.loaders import taskset_class"]
TORCH = ["import torch", "import transformers",
         "from transformers.models.qwen2 import modeling_qwen2",
         "import embedded_trainer.rollouts"]


class Worker:
    """One warm interpreter; requests run one at a time."""

    def __init__(self, python: str, preload: list[str]):
        self.python = python
        self.lock = threading.Lock()
        self.buf = b""
        self.proc = subprocess.Popen([python, "-c", _SERVER, json.dumps(preload)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.ready = False   # the imports run while the driver goes on; run() waits for them

    def _await_ready(self) -> None:
        if not self.ready:
            if not self._read(timeout=300).get("ready"):
                raise OSError("the worker did not start")
            self.ready = True

    def _read(self, timeout: float) -> dict:
        """The worker's next protocol line, waiting at most `timeout` seconds for it (read from
        the raw pipe, so a line already received is never waited for again)."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
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

    def run(self, script: str, args: list[str], timeout: float, cwd: str | None = None,
            env: dict | None = None) -> subprocess.CompletedProcess:
        with self.lock, tempfile.TemporaryDirectory(prefix="driver-worker-") as tmp:
            self._await_ready()
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            req = {"script": script, "argv": [str(a) for a in args], "stdout": str(out),
                   "stderr": str(err), "cwd": cwd, "env": env or {}}
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
                raise subprocess.TimeoutExpired([self.python, "-c", "<driver script>"], timeout) from None
            text = [p.read_text(errors="replace") if p.exists() else "" for p in (out, err)]
        return subprocess.CompletedProcess([self.python, "-c", "<driver script>", *args], rc, *text)

    def close(self) -> None:
        if self.alive():
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


_WORKERS: dict[tuple[str, bool, bool, str], Worker | None] = {}


def _key(python: str, torch: bool, v1: bool) -> tuple[str, bool, bool, str]:
    # a worker's sys.path was fixed when it started: another PYTHONPATH needs another worker
    return (python, torch, v1, os.environ.get("PYTHONPATH", ""))


def get(python: str, torch: bool = False, v1: bool = False) -> Worker | None:
    """`python`'s worker (with torch and transformers loaded too when `torch`, verifiers v1
    when `v1`), started on first call; its imports run in the background until the first
    request waits for them."""
    if not hasattr(os, "fork") or os.environ.get("DRIVER_NO_WORKER"):
        return None
    key = _key(python, torch, v1)
    w = _WORKERS.get(key)
    if w is not None and w.alive():
        return w
    try:
        # a v1 worker serves taskset scripts only: the classic API (seconds more) stays out
        w = Worker(python, (V1 if v1 else VERIFIERS) + (TORCH if torch else []))
    except OSError:
        w = None
    _WORKERS[key] = w
    return w


def run_py(python: str, script: str, args: list[str], timeout: float = 600,
           cwd: str | None = None, env: dict | None = None,
           torch: bool = False) -> subprocess.CompletedProcess:
    """Run `script` (source text) with `args` as sys.argv[1:] in a fresh process of `python`,
    as `subprocess.run([python, "-c", script, *args], capture_output=True, text=True)` would."""
    v1 = "verifiers.v1" in script
    w = get(python, torch, v1)
    if w is not None:
        try:
            return w.run(script, args, timeout, cwd=cwd, env=env)
        except OSError:   # the worker did not start, or died mid-request: the old way
            _WORKERS.pop(_key(python, torch, v1), None)
    return subprocess.run([python, "-c", script, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})})


# runs a module as `python -m MODULE ARGS...` would: argv = MODULE, ARGS...
RUN_MODULE = ("import runpy, sys\nmodule = sys.argv.pop(1)\nsys.argv[0] = module\n"
              "runpy.run_module(module, run_name='__main__', alter_sys=True)\n")


def close_all() -> None:
    for w in _WORKERS.values():
        if w is not None:
            w.close()
    _WORKERS.clear()


atexit.register(close_all)
