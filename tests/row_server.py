"""A warm loader for the trainer double: `python row_server.py SOCKET`.

prime-rl loads each env it trains on through verifiers in its own process, and so does the
trainer double: an env's rows, its rubric's metric names, a v1 taskset's tasks
(trainer_double.through_verifiers). Importing verifiers (with its openai, anthropic and datasets
clients; v1 as much again) is most of a launch's time on 2 cores, about 4 s, and nearly every
launch of a run loads an env no earlier launch loaded (each arm's generated env, the run's
selection env), so the row cache (DOUBLE_ROW_CACHE) rarely helps. This server imports verifiers
once, listens on a unix socket, and makes each requested load in a fresh process forked from
itself, with the launch's whole environment: the result is the one the launch would get itself,
through the same function, only without the import. A launch whose request fails loads the env
itself, so an env that cannot load fails in the launch exactly as it would without the server.

One request per connection, a JSON line: {"env_id", "args", "what", "pid", "env", "out"}; the
answer is {"rc": 0} once the result is in the file `out` (JSON), or {"rc": 1}: the load failed,
or the launch's environment differs from the server's in what its imports read when they ran
(driver/envs/worker.py's import_time_settings, without torch's; PYTHONPATH is set per request). Each request, answered
or declined (with why), is a line in SOCKET.served. The test session starts one server per test
process (conftest.py), under the settings driver_env gives a launch, and names its socket in
DOUBLE_ROW_SERVER.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sys

SERVER_ENV: dict[str, str] = {}   # the environment this server started (and imported) under
BASE_PATH: list[str] = []   # sys.path without PYTHONPATH's entries (worker_server.base_path)
SERVED_LOG = ""   # a line per request, answered or declined: served_log(socket)


def served_log(path: str) -> str:
    """The file a server at socket `path` appends each request's outcome to."""
    return path + ".served"


def _load(req: dict) -> None:
    """In the forked child: the request's rows into req["out"]."""
    os.environ.clear()
    os.environ.update(req["env"])
    # sys.path as the launch's interpreter builds it: its script's folder (this one's too), then
    # the launch's PYTHONPATH (a test's own envs), then the rest, as the driver's warm worker
    # sets a request's (caches invalidated: env packages installed since the server started)
    from driver.envside.worker_server import set_request_path

    set_request_path(BASE_PATH)
    from trainer_double import through_verifiers   # the launch's own load, the same code

    loaded = through_verifiers(req["what"], req["env_id"], req.get("args") or {})
    tmp = req["out"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(loaded, f, default=str)
    os.replace(tmp, req["out"])


def import_time(env: dict) -> list:
    """What this server's imports read from the environment when they ran (the driver's warm
    worker keys on the same variables): a request under other values is declined."""
    from driver.envs.worker import import_time_settings

    return import_time_settings(env, torch=False)   # PYTHONPATH is set per request


def _serve_one(conn: socket.socket, started_under: list) -> None:
    """In the forked child: read the request, load, answer, and log the outcome (a line in
    SOCKET.served: the load, the launch's pid, and why a declined request was declined); never
    returns."""
    code, req, why = 1, {}, ""
    try:
        with conn.makefile("rb") as f:
            req = json.loads(f.readline())
        theirs = import_time(req["env"])
        if theirs != started_under:   # its libraries would see other settings: it loads itself
            why = f"import-time settings differ: {sorted(set(theirs) ^ set(started_under))}"
            return
        devnull = os.open(os.devnull, os.O_WRONLY)   # verifiers' progress bars go nowhere
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        _load(req)
        code = 0
    except BaseException as e:  # noqa: BLE001 - the launch loads the env itself and reports it
        why = f"{type(e).__name__}: {e}"
    finally:
        try:
            with open(SERVED_LOG, "a") as log:   # one short line, one append: whole under O_APPEND
                log.write(json.dumps({"env_id": req.get("env_id"), "what": req.get("what"),
                                      "pid": req.get("pid"), "answered": code == 0,
                                      "why": why[:300]}) + "\n")
            conn.sendall((json.dumps({"rc": code}) + "\n").encode())
        finally:
            os._exit(code)


def serve(path: str) -> None:
    global SERVED_LOG
    from driver.envs.worker import V1, VERIFIERS
    from driver.envside.worker_server import base_path, preload

    BASE_PATH[:] = base_path()
    for spec in VERIFIERS + V1:   # what every request is spared, as the driver's warm workers preload
        preload(spec)
    SERVED_LOG = served_log(path)

    SERVER_ENV.update(os.environ)
    started_under = import_time(SERVER_ENV)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)   # children are reaped as they end
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        if os.fork() == 0:
            srv.close()
            _serve_one(conn, started_under)
        conn.close()


def request(path: str, env_id: str, args: dict, what: str, out: str) -> bool:
    """From a launch: whether the server made the load `what` (trainer_double.through_verifiers)
    and wrote its result into `out`."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
            s.sendall((json.dumps({"env_id": env_id, "args": args, "what": what, "pid": os.getpid(),
                                   "env": dict(os.environ), "out": out}) + "\n").encode())
            with s.makefile("rb") as f:
                line = f.readline()
        return bool(line) and json.loads(line).get("rc") == 0 and os.path.exists(out)
    except OSError:
        return False


if __name__ == "__main__":
    serve(sys.argv[1])
