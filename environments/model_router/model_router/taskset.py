"""model_router as a verifiers v1 taskset (verifiers 0.3.1 and 0.4.0): the classic env's rows,
prompt and reward (`oracle_route`: 1 for the oracle pick, 0 for another valid model, -1 for no
valid route); the reply's first <model>...</model> is the route. Keys are `<split>:<i>`."""
from __future__ import annotations

from typing import Any, Literal

import verifiers.v1 as vf

from .rows import SYSTEM_PROMPT, parse_model, route_reward_value, split_rows


class RouteData(vf.TaskData):
    answer: str
    info: dict[str, Any] = {}
    row_key: str = ""


class RouteTask(vf.Task[RouteData]):
    @property
    def key(self) -> str:
        return self.data.row_key or self.hash

    @vf.reward(weight=1.0)
    async def oracle_route(self, trace: vf.Trace) -> float:
        replies = trace.assistant_messages
        text = replies[-1].content if replies and isinstance(replies[-1].content, str) else None
        return route_reward_value(parse_model(text), self.data.info)


class ModelRouterConfig(vf.TasksetConfig):
    split: Literal["train", "test"] = "train"
    table_path: str | None = None
    seed: int = 0
    eval_fraction: float = 0.2
    num_examples: int = -1


class ModelRouterTaskset(vf.Taskset[RouteTask, ModelRouterConfig]):
    def load(self):
        train, test = split_rows(self.config.table_path, self.config.seed, self.config.eval_fraction)
        rows = train if self.config.split == "train" else test
        if self.config.num_examples >= 0:
            rows = rows[: self.config.num_examples]
        for i, row in enumerate(rows):
            yield RouteTask(RouteData(idx=i, prompt=row["question"], system_prompt=SYSTEM_PROMPT,
                                      answer=row["answer"], info=row["info"],
                                      row_key=f"{self.config.split}:{i}"), self.config.task)
