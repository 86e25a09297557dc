"""ToolCalculator-v1 as a verifiers v1 taskset (verifiers 0.3.1 and 0.4.0; prime-rl >= v0.8.1).

The same rows, tools and reward as the classic form. The tools are a taskset-scoped toolset
(`CalculatorToolset`, one MCP server shared by every rollout, verifiers' `Taskset.toolsets`),
advertised bare (`add`, `multiply`, TOOL_PREFIX None) as the classic form names them, so the
system prompt and a generated row's tool calls read the same on both generations. The agent
(prime-rl's null harness) calls them through MCP and ends the episode at a reply with no call.
Reward `correct_answer` (weight 1): the last reply's <answer>N</answer> is the row's result;
`tool_calls` (a metric) counts the calls. Each task's key is `<split>:<i>`.
"""
from __future__ import annotations

from typing import Any, Literal

import verifiers.v1 as vf

from .problems import SYSTEM_PROMPT, add, multiply, parse_answer, splits


class CalculatorToolset(vf.Toolset[vf.SharedToolsetConfig]):
    TOOL_PREFIX = None   # `add`, not `calculator_toolset_add`: the names the prompt gives

    @vf.tool
    def add(self, a: int, b: int) -> int:
        """The sum of a and b."""
        return add(a, b)

    @vf.tool
    def multiply(self, a: int, b: int) -> int:
        """The product of a and b."""
        return multiply(a, b)


class CalculatorData(vf.TaskData):
    answer: str
    info: dict[str, Any] = {}
    row_key: str = ""


class CalculatorTask(vf.Task[CalculatorData]):
    @property
    def key(self) -> str:
        return self.data.row_key or self.hash

    @vf.reward(weight=1.0)
    async def correct_answer(self, trace: vf.Trace) -> float:
        replies = trace.assistant_messages
        got = parse_answer(replies[-1].content) if replies and isinstance(replies[-1].content, str) else None
        return 1.0 if got is not None and str(got) == str(self.data.answer) else 0.0

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(sum(len(m.tool_calls or []) for m in trace.assistant_messages))


class ToolCalculatorConfig(vf.TasksetConfig):
    seed: int = 0
    split: Literal["train", "test"] = "train"
    num_examples: int = -1
    calculator: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class ToolCalculatorTaskset(vf.Taskset[CalculatorTask, ToolCalculatorConfig]):
    @classmethod
    def toolsets(cls, config: ToolCalculatorConfig) -> list[vf.Toolset]:
        return [CalculatorToolset(config.calculator)]

    def load(self):
        rows = splits(self.config.seed)[self.config.split]
        if self.config.num_examples >= 0:
            rows = rows[: self.config.num_examples]
        for i, row in enumerate(rows):
            yield CalculatorTask(CalculatorData(idx=i, prompt=row["question"], system_prompt=SYSTEM_PROMPT,
                                                answer=row["answer"], info=row["info"],
                                                row_key=f"{self.config.split}:{i}"), self.config.task)
