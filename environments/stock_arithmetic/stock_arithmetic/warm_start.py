"""A warm-start corpus for a student of StockArithmetic-v1: a stream of fresh problems in the
train rows' register, each with its worked reference completion (what the embedded trainer's
tiny student learns to read and compute from, before any RL).

No problem of any hub split (train, validation, test) of the env built with `env_seed` (the
default env is seed 0), nor a permutation of one, is ever emitted: the keys of all three splits
are excluded after normalisation.

The corpus can plant a documented weakness: `three_digit_share` is the share of problems whose
running stock reaches 100 or more (about 16% of the train split's problems do; 0.05 makes them
rare, so a student warm-started on it solves them sometimes, not never). `wide_share` is the
share of problems drawn with operands up to 100 instead of the train split's 50.
"""
from __future__ import annotations

import random

from .data import build_splits, generate_problem, make_row
from .verifier import normalized_problem


def reaches_three_digits(problem: dict) -> bool:
    """The running stock peaks after the two deliveries."""
    return problem["initial"] + sum(problem["deliveries"]) >= 100


def warm_start_corpus(count: int, seed: int = 0, three_digit_share: float = -1.0,
                      wide_share: float = 0.0, env_seed: int = 0) -> list[dict]:
    """`count` rows shaped like the hub's train rows (prompt, answer, info with a
    reference_completion), drawn fresh from `seed`. A negative `three_digit_share` keeps the
    natural share."""
    from . import SYSTEM_PROMPT

    held = {normalized_problem(r["info"]["problem"]) for rows in build_splits(int(env_seed)).values()
            for r in rows}
    rng, text_rng = random.Random(f"warm-start|{seed}"), random.Random(f"warm-text|{seed}")
    out: list[dict] = []
    while len(out) < count:
        wide = rng.random() < wide_share
        want_three = rng.random() < three_digit_share if three_digit_share >= 0 else None
        while True:
            p = generate_problem(rng, 100 if wide else 50)
            if normalized_problem(p) in held:
                continue
            if want_three is None or reaches_three_digits(p) == want_three:
                break
        row = make_row(p, "OOD100" if wide else "ID50", "warm_start", text_rng)
        row["prompt"] = [{"role": "system", "content": SYSTEM_PROMPT},
                         {"role": "user", "content": row.pop("question")}]
        out.append(row)
    return out
