"""Each seam's implementations, held to its protocol by the type checker (`mypy`, run in CI):
an implementation that drifts from its protocol fails here, not at a user's run."""
from __future__ import annotations

from driver.backends.base import Backend, Runner
from driver.backends.hosted import Hosted, HostedRunner
from driver.backends.local import Local
from driver.backends.process import ProcessRunner
from driver.backends.prime_rl import PrimeRL
from driver.dialects.base import Dialect
from driver.dialects.classic import ClassicDialect
from driver.dialects.current import CurrentDialect

DIALECTS: tuple[type[Dialect], ...] = (ClassicDialect, CurrentDialect)
BACKENDS: tuple[type[Backend], ...] = (PrimeRL, Local, Hosted)
RUNNERS: tuple[type[Runner], ...] = (ProcessRunner, HostedRunner)
