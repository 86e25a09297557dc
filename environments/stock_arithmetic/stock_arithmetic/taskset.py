"""StockArithmetic-v1 as a verifiers v1 taskset (verifiers 0.3.1 and 0.4.0; prime-rl >= v0.8.1).

The same rows (data.build_splits), the same system prompt and the same verifier as the classic
form: `correct_final_stock` (weight 1) is verifier.score_response on the reply after an optional
think block, 0 for a reply cut at the token limit. `lenient_correct` and the `population_<NAME>`
labels are metrics (recorded, never summed into the reward). Each task's key is `<split>:<i>`,
a durable id prime-rl pairs eval rows on.
"""
from __future__ import annotations

from typing import Any, Literal

import verifiers.v1 as vf

from .data import build_splits
from .verifier import SYSTEM_PROMPT, lenient_correct as _lenient, score_response


class StockData(vf.TaskData):
    answer: str
    info: dict[str, Any] = {}
    row_key: str = ""


def _reply(trace: vf.Trace) -> str | None:
    replies = trace.assistant_messages
    return replies[-1].content if replies and isinstance(replies[-1].content, str) else None


class StockTask(vf.Task[StockData]):
    @property
    def key(self) -> str:
        return self.data.row_key or self.hash

    @vf.reward(weight=1.0)
    async def correct_final_stock(self, trace: vf.Trace) -> float:
        return score_response(_reply(trace), self.data.info["problem"], trace.is_truncated)

    @vf.metric
    async def lenient_correct(self, trace: vf.Trace) -> float:
        return _lenient(_reply(trace), self.data.info["problem"])

    @vf.metric
    async def population_ID50(self, trace: vf.Trace) -> float:
        return 1.0 if self.data.info.get("population") == "ID50" else 0.0

    @vf.metric
    async def population_OOD100(self, trace: vf.Trace) -> float:
        return 1.0 if self.data.info.get("population") == "OOD100" else 0.0


class StockArithmeticConfig(vf.TasksetConfig):
    seed: int = 0
    split: Literal["train", "validation", "test", "selection"] = "train"
    num_examples: int = -1


class StockArithmeticTaskset(vf.Taskset[StockTask, StockArithmeticConfig]):
    def load(self):
        rows = build_splits(self.config.seed)[self.config.split]
        if self.config.num_examples >= 0:
            rows = rows[: self.config.num_examples]
        for i, row in enumerate(rows):
            yield StockTask(StockData(idx=i, prompt=row["question"], system_prompt=SYSTEM_PROMPT,
                                      answer=row["answer"], info=row["info"],
                                      row_key=f"{self.config.split}:{i}"), self.config.task)
