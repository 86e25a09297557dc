"""A third-party-style classic env the driver has never seen, for the agent path's tests.

An XMLParser with <think> and <answer> fields, a shaped reward (correctness 1.0 plus the
parser's format reward 0.2, so full reward is 1.2), a correctness function that reads the
problem from `info["numbers"]` (a row without that key cannot be scored), and no family
generator: only an agent or an LLM teacher can write data for it.
"""
import random

import verifiers as vf
from datasets import Dataset

SYSTEM_PROMPT = ("Reason inside <think>...</think>, then give only the final number inside "
                 "<answer>...</answer>.")
parser = vf.XMLParser(["think", "answer"], answer_field="answer")


def digit_total(numbers: list[int]) -> int:
    return sum(int(c) for x in numbers for c in str(x))


def _rows(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        numbers = [rng.randint(10, 9999) for _ in range(rng.randint(1, 3))]
        rows.append({"question": "What is the total of all digits in "
                                 + ", ".join(map(str, numbers)) + "?",
                     "answer": str(digit_total(numbers)), "info": {"numbers": numbers}})
    return rows


def correct_total(completion, answer, info=None, **kwargs) -> float:
    want = digit_total(info["numbers"])
    got = parser.parse_answer(completion)
    return 1.0 if got is not None and got.strip() == str(want) else 0.0


def load_environment(parser_kind: str = "xml", **kwargs) -> vf.Environment:
    """parser_kind="think": the hub parser is a ThinkParser, which strips <think> blocks (the
    case a Qwen3 student is warned about)."""
    used = vf.ThinkParser() if parser_kind == "think" else parser
    rubric = vf.Rubric(funcs=[correct_total, parser.get_format_reward_func()], weights=[1.0, 0.2],
                       parser=used)
    return vf.SingleTurnEnv(dataset=Dataset.from_list(_rows(0, 800)),
                            eval_dataset=Dataset.from_list(_rows(1, 200)),
                            system_prompt=SYSTEM_PROMPT, parser=used, rubric=rubric, **kwargs)
