"""Fault injection for the kill-anywhere tests.

`DRIVER_FAULT_KILL_AT=NAME` (or `NAME#K` for the K-th time the point is reached) makes the
driver SIGKILL itself at that named point: no cleanup, no flush, exactly like a power cut.
`DRIVER_FAULT_ENOSPC_AT=NAME[#K]` raises "No space left on device" there instead (a full disk
while writing). `DRIVER_FAULT_BUG_AT=NAME[#K]` raises a RuntimeError there (an unexpected
error from a library or a bug). Unset, `point()` costs three dict lookups.
"""
import errno
import os
import signal
from collections import Counter

_hits: Counter = Counter()


def _due(var: str, name: str) -> bool:
    target = os.environ.get(var)
    if not target:
        return False
    want, _, nth = target.partition("#")
    if name != want:
        return False
    _hits[(var, name)] += 1
    return _hits[(var, name)] == int(nth or 1)


def point(name: str) -> None:
    if _due("DRIVER_FAULT_KILL_AT", name):
        os.kill(os.getpid(), signal.SIGKILL)
    if _due("DRIVER_FAULT_ENOSPC_AT", name):
        raise OSError(errno.ENOSPC, f"No space left on device (simulated at {name})")
    if _due("DRIVER_FAULT_BUG_AT", name):
        raise RuntimeError(f"simulated unexpected error at {name}")
