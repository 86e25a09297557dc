"""The driver's clocks. `monotonic()` and `sleep()` are for waiting and for the limits it
measures (startup, stall, eval, grace, poll intervals): every such wait calls them rather than
`time`'s, so that a test whose subject is a limit of minutes can run the driver on a faster clock
(tests/conftest.py's `fast_clock`) instead of waiting the minutes out. `wall()` is the time of
day every timestamp the run directory records is read from (`run.rundir.now`: run.json's start
and end, each phase's start and end, which the budget is measured on), so that a test whose
subject is the budget can give each launch a known length."""
from __future__ import annotations

import time


def monotonic() -> float:
    return time.monotonic()


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def wall() -> float:
    """Seconds since the epoch, as the run's records hold them."""
    return time.time()
