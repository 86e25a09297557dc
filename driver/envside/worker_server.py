"""The warm worker's server: `python worker_server.py PRELOAD_JSON`, started by
driver/envs/worker.py in the training interpreter.

It imports what PRELOAD_JSON names (a JSON list of "module" or "module:attr,attr", the
attributes touched so that a lazily loaded one is loaded too; one that fails is left to the
requests, which import what they need), says {"ready": true}, then reads one request per line on
stdin: {"path", "argv", "stdout", "stderr", "cwd", "env"} (env: the whole environment the request
runs with). Each request runs the file at `path`
(as `python PATH ARGV...` would, sys.path[0] included) in a fresh process forked from this one, in its own process
group, with its output in the named files; the server answers {"pid": ...} when it starts and
{"rc": ...} when it ends. Stdin closing (the driver ending, however it ends) ends the server.
"""
from __future__ import annotations

import importlib
import json
import os
import runpy
import sys
import traceback


def _child(req: dict) -> None:
    """Run one request in this forked process; never returns."""
    code = 1
    try:
        os.setsid()   # its own group: a time limit kills the request's whole tree
        for target, path in ((1, req["stdout"]), (2, req["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), target)
        if req.get("cwd"):
            os.chdir(req["cwd"])
        if "env" in req:   # the driver's whole environment at the request, as a new process gets it
            os.environ.clear()
            os.environ.update(req["env"])
        sys.stdin = open(os.devnull)  # noqa: SIM115 - the request's stdin, open until it exits
        sys.argv = [req["path"], *req["argv"]]
        sys.path[0] = os.path.dirname(os.path.realpath(req["path"]))   # as `python PATH` sets it
        # the request's PYTHONPATH before the rest, as a new interpreter builds sys.path (the
        # driver sends here only a request whose entries leave every module imported here where
        # it is: driver/envs/worker.py, Worker.serves_path)
        set_request_path(BASE_PATH)
        try:
            runpy.run_path(req["path"], run_name="__main__")
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:  # noqa: BLE001 - as an interpreter reports an uncaught exception
            traceback.print_exc()
            code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


# sys.path after its first entry as this interpreter builds it without PYTHONPATH (the standard
# library, site-packages, what their .pth files add): a request's PYTHONPATH goes before it
BASE_PATH: list[str] = []


def base_path() -> list[str]:
    """Asked of a new interpreter: this one's sys.path has lost, to site.removeduppaths, any
    entry its own PYTHONPATH held already."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
                         env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def set_request_path(base: list[str]) -> None:
    """sys.path after its first entry as a new interpreter started now would build it: this
    process's PYTHONPATH (the request's) before `base` (base_path())."""
    sys.path[1:] = list(dict.fromkeys(path_entries(os.environ.get("PYTHONPATH", ""), os.getcwd()) + base))
    importlib.invalidate_caches()


def path_entries(pythonpath: str, cwd: str) -> list[str]:
    """PYTHONPATH's entries as a new interpreter started in `cwd` puts them on sys.path: each
    made absolute against `cwd` (an empty one is `cwd` itself), without repeats, as
    site.removeduppaths leaves them. The driver's warm-worker client uses it too."""
    return list(dict.fromkeys(os.path.normpath(os.path.join(cwd, p))
                              for p in pythonpath.split(os.pathsep))) if pythonpath else []


def _loaded_from() -> dict[str, str]:
    """Each top-level module loaded, with the sys.path entry it was found in: its file's
    folder, a package's parent, a namespace package's where all its portions share one; else
    "" (built in, or portions in several entries)."""
    found = {}
    for name, mod in list(sys.modules.items()):
        if "." in name:
            continue
        f = getattr(mod, "__file__", None) or ""
        if f:
            f = os.path.dirname(f)
            if os.path.basename(getattr(mod, "__file__")).startswith("__init__."):
                f = os.path.dirname(f)
        else:
            parents = {os.path.dirname(p) for p in getattr(mod, "__path__", None) or []}
            f = parents.pop() if len(parents) == 1 else ""
        found[name] = f
    return found


def preload(spec: str) -> None:
    module, _, attrs = spec.partition(":")
    mod = importlib.import_module(module)
    for attr in filter(None, attrs.split(",")):
        getattr(mod, attr)


def serve(specs: list[str]) -> None:
    BASE_PATH[:] = base_path()
    for spec in specs:
        try:
            preload(spec)
        except Exception:  # noqa: BLE001, S110 - one not there is imported (or missed) by the request
            pass
    out = os.fdopen(os.dup(1), "w")
    # with the top-level modules loaded and where each was found, which a request's PYTHONPATH
    # must leave as they are
    print(json.dumps({"ready": True, "modules": _loaded_from()}), file=out, flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req)
        print(json.dumps({"pid": pid}), file=out, flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), file=out, flush=True)
    # the driver has gone or closed it: nothing here to save, so no interpreter teardown (with
    # torch loaded that takes seconds, which a driver's exit would wait for)
    os._exit(0)


if __name__ == "__main__":
    # the preloads are found as under `python -c` (the working directory first); a request gets
    # its own file's folder there instead, as a new interpreter would give it
    if sys.path and os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):
        sys.path[0] = ""
    serve(json.loads(sys.argv[1]))
