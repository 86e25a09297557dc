"""The env-side job that runs a teacher's auxiliary rewards on the generated rows.

`check_rows` loads `aux_rewards.py` by path and calls every function AUX_REWARDS declares on
every generated row, as the generated env's rubric will call it in training: completion = the
row's info.reasoning as the assistant message (the shape the hub rubric is scored with),
answer = the row's answer, info = the row's info (a fresh copy per call). Each call has a time
limit. It reports, per function, the rows whose value is not a number in [0, 1] and the rows
where it raised or ran past its limit; the driver's gate (driver/gates/aux_rewards.py) turns
them into its line. Standard library only: a classic env and a v1 taskset run it alike.
"""
from __future__ import annotations

import asyncio
import copy
import importlib.util
import inspect
import math
import numbers
import os
import signal
import sys
import threading

import rows

MAX_LINES = 5        # row line numbers reported per function and fault
REPEAT_ALARM = 0.5   # a function that swallows the time limit is interrupted again this often,
STUBBORN = 4         # and after this many more the job ends, naming it (stderr reaches the gate)


class _Overtime(BaseException):
    """A call past its time limit (a BaseException: `except Exception` in the function does not
    swallow it)."""


def _load(path: str):
    spec = importlib.util.spec_from_file_location("driver_aux_rewards_under_check", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # as an import would (a dataclass in the file needs it)
    spec.loader.exec_module(module)
    return module


class _Caller:
    """Calls one function on one row, within `limit` seconds, awaiting what it returns on one
    event loop (a fresh one after a call was interrupted)."""

    def __init__(self, limit: float):
        self.limit, self.name, self.alarms = limit, "", 0
        self.loop = asyncio.new_event_loop()
        self.timed = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
        if self.timed:
            signal.signal(signal.SIGALRM, self._alarm)

    def _alarm(self, _signum, _frame):
        self.alarms += 1
        if self.alarms > STUBBORN:
            os.write(2, f"aux function {self.name} ran past its {self.limit:g} s limit and caught "
                        "every interruption: stopped\n".encode())
            os._exit(3)
        raise _Overtime

    def __call__(self, name, fn, completion, answer, info):
        self.name, self.alarms = name, 0
        if self.timed:
            signal.setitimer(signal.ITIMER_REAL, self.limit, REPEAT_ALARM)
        try:
            value = fn(completion, answer, info)
            if inspect.isawaitable(value):
                value = self.loop.run_until_complete(value)
            return value
        except _Overtime:
            self.loop = asyncio.new_event_loop()   # the old one may be mid-step
            raise
        finally:
            if self.timed:
                signal.setitimer(signal.ITIMER_REAL, 0)


def _in_range(value) -> bool:
    return isinstance(value, numbers.Real) and not math.isnan(value) and 0.0 <= value <= 1.0


class _Faults:
    """One function's faults: {kind: {"detail": the first one's text, "count", "lines"}}."""

    def __init__(self):
        self.by_kind: dict[str, dict] = {}

    def add(self, kind: str, detail: str, line: int | None = None) -> None:
        f = self.by_kind.setdefault(kind, {"detail": detail[:300], "count": 0, "lines": []})
        f["count"] += 1
        if line is not None and len(f["lines"]) < MAX_LINES:
            f["lines"].append(line)


def check_rows(req: dict) -> dict:
    """{"rows": rows checked, "functions": the declared names, "load_error": why the file did not
    load (or None), "faults": [{"name", "kind": "value"|"error"|"timeout"|"missing", "detail",
    "count", "lines"}]}."""
    try:
        module = _load(req["aux_file"])
        declared = [str(e[0]) for e in module.AUX_REWARDS]
    except (Exception, SystemExit) as e:  # noqa: BLE001 - the teacher's file: its fault, reported
        return {"rows": 0, "functions": [], "load_error": f"{type(e).__name__}: {e}"[:500], "faults": []}
    reasoned = rows.read_reasoned_rows(req["dataset"])
    call = _Caller(float(req.get("call_timeout") or 5.0))
    faults = {name: _Faults() for name in declared}
    for name in declared:
        fn = getattr(module, name, None)
        if not callable(fn):
            faults[name].add("missing", f"aux_rewards.py defines no function {name}")
            continue
        for n, row in reasoned:
            completion = [{"role": "assistant", "content": row["info"]["reasoning"]}]
            try:
                value = call(name, fn, completion, str(row.get("answer", "")), copy.deepcopy(row["info"]))
            except _Overtime:
                faults[name].add("timeout", f"ran past its {call.limit:g} s limit", n)
                break   # every later row would wait as long: one is enough
            except (Exception, SystemExit) as e:  # noqa: BLE001 - the row's fault, reported
                faults[name].add("error", f"{type(e).__name__}: {e}", n)
                continue
            if not _in_range(value):
                faults[name].add("value", repr(value)[:100], n)
    return {"rows": len(reasoned), "functions": declared, "load_error": None,
            "faults": [{"name": name, "kind": kind, **f}
                       for name in declared for kind, f in faults[name].by_kind.items()]}


JOBS = {"check_rows": check_rows}
