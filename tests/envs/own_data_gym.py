"""A classic env whose class builds its own data in __init__ and takes no `dataset` argument, as
verifiers' ReasoningGymEnv does (tests/test_generated_env.py).

OwnDataEnv makes its rows, parser and rubric itself (an XMLParser with an <answer> field, a
correctness reward that closes over that parser, a format reward at weight 0) and passes them to
SingleTurnEnv; constructing it with a `dataset` is a TypeError. `explode=True` makes its
constructor raise (a hub env whose load fails). style="keyword": a SingleTurnEnv subclass that
takes its dataset through **kwargs, so a generated env keeps that class.
"""
import random

import verifiers as vf
from datasets import Dataset

SYSTEM_PROMPT = "Multiply. Give only the final number inside <answer>...</answer>."


def rows(seed: int, n: int, digits: int = 2) -> list[dict]:
    rng = random.Random(seed)
    lo, hi = 10 ** (digits - 1), 10 ** digits - 1
    out = []
    for _ in range(n):
        a, b = rng.randint(lo, hi), rng.randint(lo, hi)
        out.append({"question": f"What is {a} times {b}?", "answer": str(a * b), "info": {"a": a, "b": b}})
    return out


class OwnDataEnv(vf.SingleTurnEnv):
    def __init__(self, num_train_examples: int = 300, num_eval_examples: int = 60,
                 system_prompt: str = SYSTEM_PROMPT, parser: vf.Parser | None = None, seed: int = 0,
                 explode: bool = False):
        if explode:
            raise ValueError("OwnDataEnv was told to fail in its constructor")
        parser = parser or vf.XMLParser(fields=["answer"])
        rubric = vf.Rubric(parser=parser)

        async def correct_product(completion, answer, **kwargs) -> float:
            got = parser.parse_answer(completion)
            return 1.0 if got is not None and got.strip() == answer else 0.0

        rubric.add_reward_func(correct_product)
        rubric.add_reward_func(parser.get_format_reward_func(), weight=0.0)
        super().__init__(dataset=Dataset.from_list(rows(seed, num_train_examples)),
                         eval_dataset=Dataset.from_list(rows(seed + 1, num_eval_examples)),
                         system_prompt=system_prompt, parser=parser, rubric=rubric, message_type="chat")
        self.parser = parser
        self.rubric = rubric


class KeywordEnv(vf.SingleTurnEnv):
    """Takes its dataset through **kwargs."""

    def __init__(self, tag: str = "keyword", **kwargs):
        super().__init__(**kwargs)
        self.tag = tag


def load_environment(style: str = "own_data", **kwargs) -> vf.Environment:
    if style == "keyword":
        parser = vf.XMLParser(fields=["answer"])

        def correct_product(completion, answer, **kw) -> float:
            got = parser.parse_answer(completion)
            return 1.0 if got is not None and got.strip() == answer else 0.0

        return KeywordEnv(dataset=Dataset.from_list(rows(0, 300)), eval_dataset=Dataset.from_list(rows(1, 60)),
                          system_prompt=SYSTEM_PROMPT, parser=parser,
                          rubric=vf.Rubric(funcs=[correct_product], weights=[1.0], parser=parser), **kwargs)
    return OwnDataEnv(**kwargs)
