"""StockArithmetic-v1 as a classic verifiers environment (verifiers <= 0.3.1).

The answer is one JSON object `{"final_stock": <int>}`, optionally after one leading
`<think>...</think>` block. Reward 1 for a correct answer, 0 otherwise; a response cut at the
token limit scores 0. `lenient_correct` (weight 0) reports the right number in any format;
`population_ID50` and `population_OOD100` (weight 0) label each row's population (1 for its
own, 0 for the other), following the driver's naming rule, so a reader of numeric metrics alone
can split accuracy by population.
"""
from __future__ import annotations

import verifiers as vf

if not hasattr(vf, "SingleTurnEnv"):
    raise ImportError(
        f"the classic StockArithmetic-v1 environment needs verifiers <= 0.3.1 (found "
        f"{getattr(vf, '__version__', '?')}, which has no classic API); with verifiers >= 0.4 use "
        "the taskset form, stock_arithmetic.StockArithmeticTaskset (taskset id stock-arithmetic)")

from datasets import Dataset  # noqa: E402

from .data import build_splits
from .verifier import SYSTEM_PROMPT, lenient_correct as _lenient, score_response, split_think


class StockAnswerParser(vf.Parser):
    """Answer = the last assistant message's text after an optional leading think block."""

    def parse(self, text: str) -> str | None:
        return split_think(text)


def _completion_text(completion) -> str | None:
    if isinstance(completion, str):
        return completion
    for msg in reversed(completion or []):
        role = msg.get("role") if isinstance(msg, dict) else getattr(msg, "role", None)
        if role == "assistant":
            content = msg.get("content") if isinstance(msg, dict) else getattr(msg, "content", None)
            return content if isinstance(content, str) else None
    return None


def _truncated(state) -> bool:
    if not state:
        return False
    if state.get("is_truncated"):
        return True
    return any(bool(step.get("is_truncated")) for step in (state.get("trajectory") or []))


async def correct_final_stock(completion, answer, info=None, state=None, **kwargs) -> float:
    """1.0 when the strict answer equals the solver's value for info['problem']."""
    return score_response(_completion_text(completion), (info or {})["problem"], _truncated(state))


async def lenient_correct(completion, answer, info=None, state=None, **kwargs) -> float:
    """1.0 when the right number appears anywhere in the answer, whatever its format."""
    return _lenient(_completion_text(completion), (info or {})["problem"])


async def population_ID50(completion, answer, info=None, state=None, **kwargs) -> float:
    """1.0 for a row of the ID50 population (operands up to 50): a label, not a score."""
    return 1.0 if (info or {}).get("population") == "ID50" else 0.0


async def population_OOD100(completion, answer, info=None, state=None, **kwargs) -> float:
    """1.0 for a row of the OOD100 population (operands up to 100): a label, not a score."""
    return 1.0 if (info or {}).get("population") == "OOD100" else 0.0


def load_environment(seed: int = 0, eval_split: str = "test", num_train_examples: int = -1,
                     num_eval_examples: int = -1, **kwargs) -> vf.Environment:
    if eval_split not in ("test", "validation", "selection"):
        raise ValueError("eval_split must be 'test', 'validation' or 'selection'")
    splits = build_splits(seed)

    def take(rows, n):
        return rows if n is None or n < 0 else rows[:n]

    parser = StockAnswerParser()
    rubric = vf.Rubric(funcs=[correct_final_stock, lenient_correct, population_ID50,
                              population_OOD100],
                       weights=[1.0, 0.0, 0.0, 0.0], parser=parser)
    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(take(splits["train"], num_train_examples)),
        eval_dataset=Dataset.from_list(take(splits[eval_split], num_eval_examples)),
        system_prompt=SYSTEM_PROMPT,
        parser=parser,
        rubric=rubric,
        **kwargs,
    )

