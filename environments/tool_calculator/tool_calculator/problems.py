"""The problems and the tools, with no verifiers in them: the rows, the calculator tools, and a
reference player. The environment (classic.py), its warm-start corpus and its family generator
(generators/tool_calculator.py) all use these, so they cannot disagree on a rule.

A row is an operation (add or multiply) and two numbers, worded as a question; its answer is the
result. The model is to call the tool the question names with the two numbers, read the result
the env sends back, and answer it as <answer>N</answer>. Tool calls are written as vLLM's hermes
parser reads them (rl_contract/tool_calls.py): <tool_call>{"name": "multiply", "arguments":
{"a": 12, "b": 7}}</tool_call>.
"""
from __future__ import annotations

import json
import random
import re

SYSTEM_PROMPT = ('Tools: add(a, b), multiply(a, b). Call one as <tool_call>{"name": ..., "arguments": '
                 '{"a": ..., "b": ...}}</tool_call>, then reply <answer>N</answer>.')
ANSWER = re.compile(r"<answer>\s*(-?\d+)\s*</answer>")
OPS = ("add", "multiply")
MAX_OPERAND = 999


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return int(a) + int(b)


def multiply(a: int, b: int) -> int:
    """The product of a and b."""
    return int(a) * int(b)


TOOLS = {"add": add, "multiply": multiply}


def result(op: str, a: int, b: int) -> int:
    return TOOLS[op](a, b)


def parse_answer(text: str | None) -> int | None:
    """The number in a reply's first <answer>N</answer>, or None."""
    m = ANSWER.search(text or "")
    return int(m.group(1)) if m else None


# The question's wording: an opener, the operation put one of four ways with a unit, a closer.
# 7,200 wordings per operation, so rows that differ only in their numbers are still told apart
# by their words (the dataset gate's clone rule).
OPENERS = ["Quick one.", "Help me out.", "For the ledger:", "Check this.", "Work it out.",
           "A small sum.", "From the order sheet:", "Count carefully.", "For the report:", "Please compute."]
UNITS = ["jars", "coins", "tickets", "boxes", "crates", "apples", "pages", "bricks", "cups", "nails",
         "stamps", "seeds", "tiles", "bottles", "cards", "eggs", "pens", "rolls", "sacks", "shells",
         "spoons", "beads", "bolts", "planks", "books", "candles", "buttons", "marbles", "pots", "ropes"]
PHRASES = {
    "add": ["What is {a} {unit} plus {b} {unit}?", "Add {a} {unit} and {b} {unit}.",
            "What is the sum of {a} {unit} and {b} {unit}?", "{a} {unit} + {b} {unit} = ?"],
    "multiply": ["What is {a} times {b} {unit}?", "Multiply {a} {unit} by {b}.",
                 "What is the product of {a} and {b} {unit}?", "{a} x {b} {unit} = ?"],
}
CLOSERS = ["", "Use a tool.", "Thanks.", "Answer in <answer> tags.", "Go.", "No guessing."]


def question(op: str, a: int, b: int, rng: random.Random) -> str:
    unit = rng.choice(UNITS)
    parts = [rng.choice(OPENERS), rng.choice(PHRASES[op]).format(a=a, b=b, unit=unit), rng.choice(CLOSERS)]
    return " ".join(p for p in parts if p)


def make_row(op: str, a: int, b: int, rng: random.Random, **info) -> dict:
    return {"question": question(op, a, b, rng), "answer": str(result(op, a, b)),
            "info": {"op": op, "a": a, "b": b, **info}}


def operand(rng: random.Random) -> int:
    """A number of one, two or three digits, each as likely."""
    digits = rng.randint(1, 3)
    return rng.randint(max(2, 10 ** (digits - 1)), 10 ** digits - 1)


def draw(rng: random.Random) -> dict:
    """A row of the hub's distribution."""
    return make_row(rng.choice(OPS), operand(rng), operand(rng), rng)


def call_text(op: str, a: int, b: int) -> str:
    """A tool call as the model writes it."""
    return f'<tool_call>{{"name": {json.dumps(op)}, "arguments": {json.dumps({"a": a, "b": b})}}}</tool_call>'


def reference_moves(op: str, a: int, b: int) -> list[str]:
    """The reference player's replies, one per turn: the call, then the answer."""
    return [call_text(op, a, b), f"<answer>{result(op, a, b)}</answer>"]


def trajectory(calls: list[tuple[str, int, int]], answer: int) -> list[dict]:
    """The messages after the prompt when `calls` are made in turn and `answer` is given: each
    call an assistant message with tool_calls (OpenAI's shape), each result a tool message."""
    out: list[dict] = []
    for k, (op, a, b) in enumerate(calls):
        cid = f"call_{k}_0"
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": op, "arguments": json.dumps({"a": a, "b": b})}}]})
        out.append({"role": "tool", "content": str(result(op, a, b)), "tool_call_id": cid})
    out.append({"role": "assistant", "content": f"<answer>{answer}</answer>"})
    return out


def splits(seed: int = 0, n_train: int = 2000, n_test: int = 200) -> dict[str, list[dict]]:
    """Disjoint train and test rows (no (op, a, b) in both)."""
    rng = random.Random(f"tool-calculator|{seed}")
    seen: set = set()
    out: dict[str, list[dict]] = {"train": [], "test": []}
    for name, n in (("test", n_test), ("train", n_train)):
        while len(out[name]) < n:
            row = draw(rng)
            key = (row["info"]["op"], row["info"]["a"], row["info"]["b"])
            if key in seen:
                continue
            seen.add(key)
            out[name].append(row)
    return out


def warm_start_corpus(count: int, seed: int = 0, slip_share: float = 0.0, env_seed: int = 0) -> list[dict]:
    """`count` rows shaped like the train rows, drawn fresh (none of either split), each with a
    reference trajectory (`info.reference_trajectory`: the call, the tool's result, the
    answer). `slip_share` of them call the other tool and answer its result (a wrong answer), so
    a student warm-started on them sometimes picks the wrong tool."""
    held = {(r["info"]["op"], r["info"]["a"], r["info"]["b"]) for rows in splits(env_seed).values()
            for r in rows}
    rng = random.Random(f"tool-calculator-warm|{seed}")
    out: list[dict] = []
    while len(out) < count:
        row = draw(rng)
        i = row["info"]
        if (i["op"], i["a"], i["b"]) in held:
            continue
        op = i["op"]
        if rng.random() < slip_share:
            op = "add" if op == "multiply" else "multiply"
        traj = trajectory([(op, i["a"], i["b"])], result(op, i["a"], i["b"]))
        out.append({"prompt": [{"role": "system", "content": SYSTEM_PROMPT},
                               {"role": "user", "content": row["question"]}],
                    "answer": row["answer"], "info": {**i, "reference_trajectory": traj}})
    return out
