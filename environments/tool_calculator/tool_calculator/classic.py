"""ToolCalculator-v1 as a classic verifiers tool-using environment (verifiers' ToolEnv,
verifiers <= 0.3.1).

ToolEnv plays the episode: it offers the tools (`add`, `multiply`), runs each tool call of a
reply and answers with the results as tool messages, and ends the episode at a reply that calls
no tool or at `max_turns`. Reward 1 when the last reply's <answer>N</answer> is the row's
answer, else 0; verifiers' tool monitor counts the calls (weight 0).
"""
from __future__ import annotations

import verifiers as vf

if not hasattr(vf, "ToolEnv"):
    raise ImportError(f"ToolCalculator-v1 needs verifiers' classic API (<= 0.3.1); found "
                      f"{getattr(vf, '__version__', '?')}")

from datasets import Dataset  # noqa: E402

from .problems import SYSTEM_PROMPT, add, multiply, parse_answer, splits  # noqa: E402


def _text(msg) -> str:
    content = msg.get("content") if isinstance(msg, dict) else getattr(msg, "content", None)
    return content if isinstance(content, str) else ""


def _role(msg) -> str | None:
    return msg.get("role") if isinstance(msg, dict) else getattr(msg, "role", None)


class AnswerParser(vf.Parser):
    """A reply's answer: the number in its first <answer>N</answer>."""

    def parse(self, text: str) -> str | None:
        got = parse_answer(text)
        return None if got is None else str(got)


def correct(completion, answer, **kwargs) -> float:
    """1.0 when the episode's last reply answers the row's result."""
    last = next((m for m in reversed(completion or []) if _role(m) == "assistant"), None)
    got = parse_answer(_text(last)) if last is not None else None
    return 1.0 if got is not None and str(got) == str(answer) else 0.0


def load_environment(seed: int = 0, num_train_examples: int = -1, num_eval_examples: int = -1,
                     max_turns: int = 3, **kwargs) -> vf.Environment:
    rows = splits(seed)
    train = rows["train"] if num_train_examples < 0 else rows["train"][:num_train_examples]
    test = rows["test"] if num_eval_examples < 0 else rows["test"][:num_eval_examples]
    parser = AnswerParser()
    rubric = vf.Rubric(funcs=[correct], weights=[1.0], parser=parser)
    return vf.ToolEnv(tools=[add, multiply], dataset=Dataset.from_list(train),
                      eval_dataset=Dataset.from_list(test), system_prompt=SYSTEM_PROMPT,
                      parser=parser, rubric=rubric, max_turns=max_turns, **kwargs)
