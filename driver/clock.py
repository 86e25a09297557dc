"""The driver's clock for waiting and for the limits it measures (startup, stall, eval, grace,
poll intervals). Every such wait calls `monotonic()` and `sleep()` here rather than `time`'s, so
that a test whose subject is a limit of minutes can run the driver on a faster clock
(tests/conftest.py's `fast_clock`) instead of waiting the minutes out. Timestamps recorded in
the run directory are wall-clock time (`run.rundir.now`), never this clock's."""
from __future__ import annotations

import time


def monotonic() -> float:
    return time.monotonic()


def sleep(seconds: float) -> None:
    time.sleep(seconds)
