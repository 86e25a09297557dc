"""A tiny v1 taskset for prime-rl's CPU tests: 16 inline one-turn tasks; the reward is 1.0 when
the last reply contains "yes", else 0.0 (the inference stand-in's `mixed` policy answers "yes"
about half the time, so GRPO groups carry advantages; `constant` always "yes": zero advantage).

Resolved from `taskset.id = "prl-cpu-env"` with this package's parent on PYTHONPATH:
verifiers/v1/utils/loaders.py:70-78,129-130,141-142@a60a606 import `prl_cpu_env` and take the
one `Taskset` subclass in `__all__` (:99-126).
"""
from __future__ import annotations

from collections.abc import Iterable

import verifiers.v1 as vf

__all__ = ["PrlCpuEnvTaskset"]

NUM_TASKS = 16


class PrlCpuEnvTask(vf.Task):
    @vf.reward
    async def says_yes(self, trace) -> float:
        # Trace.last_reply: the last assistant message's text (verifiers/v1/trace.py:521-525@a60a606)
        return 1.0 if "yes" in trace.last_reply.lower() else 0.0


class PrlCpuEnvTaskset(vf.Taskset[PrlCpuEnvTask]):
    def load(self) -> Iterable[PrlCpuEnvTask]:
        for i in range(NUM_TASKS):
            yield PrlCpuEnvTask(vf.TaskData(idx=i, name=f"q{i}",
                                            prompt=f"Question {i}: answer yes or no."),
                                self.config.task)
