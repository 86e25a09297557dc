"""Run one env-side job: `python call.py ACTION REQUEST.json RESPONSE.json`.

ACTION is MODULE.JOB (`classic.introspect`, `taskset.score_rows`, ...). The job's module is
imported only now, so a taskset job never imports the classic API and a classic job never
imports verifiers.v1. The job takes the request (a JSON object) and returns the response's
result; the response is written atomically as {"ok": true, "result": ...}, or, when the job
raises, {"ok": false, "error": {"type", "message", "traceback"}} with a non-zero exit, so the
driver reports the real cause. Run by path in the training interpreter (forked from the warm
worker, or a fresh one), where the `driver` package may not be installed: the sibling modules
are imported by plain name from this file's folder.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import traceback

HERE = os.path.dirname(os.path.realpath(__file__))
MODULES = ("classic", "taskset", "aux", "student", "model", "interpreter")


def _sibling_imports() -> None:
    """This folder first, for the job modules; then the working directory, as `python -c`
    would give it (`python call.py` puts this folder there instead)."""
    if sys.path and os.path.realpath(sys.path[0] or os.curdir) == HERE:
        sys.path[0] = ""
    sys.path.insert(0, HERE)


def run(action: str, request: dict) -> dict:
    """The result of ACTION on `request`."""
    module, _, job = action.partition(".")
    if module not in MODULES:
        raise ValueError(f"unknown env-side action {action!r}: its module is one of {MODULES}")
    jobs = importlib.import_module(module).JOBS
    if job not in jobs:
        raise ValueError(f"unknown env-side action {action!r}: {module} has {sorted(jobs)}")
    return jobs[job](request)


def main(argv: list[str]) -> int:
    action, request_path, response_path = argv
    _sibling_imports()
    import rows

    try:
        with open(request_path, encoding="utf-8") as f:
            response, code = {"ok": True, "result": run(action, json.load(f))}, 0
    except Exception as e:  # noqa: BLE001 - whatever the job raised goes back to the driver
        tb = traceback.format_exc()
        print(tb, file=sys.stderr, flush=True)
        response = {"ok": False, "error": {"type": type(e).__name__, "message": str(e), "traceback": tb}}
        code = 1
    rows.write_json_atomic(response_path, response)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
