"""Fault injection for the kill-anywhere tests.

`DRIVER_FAULT_KILL_AT=NAME` (or `NAME#K` for the K-th time the point is reached) makes the
driver SIGKILL itself at that named point: no cleanup, no flush, exactly like a power cut.
Unset, `point()` costs one dict lookup.
"""
import os
import signal
from collections import Counter

_hits: Counter = Counter()


def point(name: str) -> None:
    target = os.environ.get("DRIVER_FAULT_KILL_AT")
    if not target:
        return
    want, _, nth = target.partition("#")
    if name != want:
        return
    _hits[name] += 1
    if _hits[name] >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
