"""StockArithmetic with a choice of train rows and the *validation* split as its eval split,
for bench/rl_headroom.py. The hub env's own parser and rubric score every row.

kind = "hub"    the hub env's 1,000 train rows (what iter_0 trains on)
kind = "fresh"  new problems from the hub's own problem and question generators: the train
                register exactly, none of them in any hub split
kind = "hard"   like fresh, each with >= 3 of the family generator's structural features
                (what the dataset gate asks 40% of a teacher's rows to be)
kind = "three_digit"  like fresh, each with a running stock that reaches 100 or more (the
                weakness the streamed warm start plants): perfectly targeted rows
kind = "plain" / "plain_three_digit"  like fresh / three_digit, worded by the family
                generator's plain style (what the built-in teacher writes) instead of the hub's
"""
from __future__ import annotations

import random

import verifiers as vf
from datasets import Dataset

import stock_arithmetic as hub
from generators import stock_arithmetic as family
from stock_arithmetic.data import build_splits, generate_problem, make_row
from stock_arithmetic.verifier import normalized_problem


def fresh_rows(n: int, seed: int, kind: str) -> list[dict]:
    splits = build_splits(0)
    seen = {normalized_problem(r["info"]["problem"]) for rows in splits.values() for r in rows}
    rng, text_rng, out = random.Random(seed), random.Random(seed + 1), []
    while len(out) < n:
        p = generate_problem(rng, family.MAX_OPERAND)
        key = normalized_problem(p)
        if key in seen or (kind == "hard" and len(family.features(p, False, False)) < 3):
            continue
        if kind.endswith("three_digit") and max(family.running(p)) < 100:
            continue
        seen.add(key)
        row = make_row(p, "ID50", "train", text_rng)
        if kind.startswith("plain"):
            row["question"] = family.render(p, text_rng, False, False, "plain")
        out.append(row)
    return out


def load_environment(kind: str = "hub", n: int = 1000, seed: int = 123, **kwargs) -> vf.Environment:
    base = hub.load_environment(eval_split="validation")
    splits = build_splits(0)
    rows = splits["train"] if kind == "hub" else fresh_rows(n, seed, kind)
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows),
                            eval_dataset=Dataset.from_list(splits["validation"]),
                            system_prompt=hub.SYSTEM_PROMPT, parser=base.parser, rubric=base.rubric)
