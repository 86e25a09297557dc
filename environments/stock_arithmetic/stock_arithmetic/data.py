"""StockArithmetic-v1 problems: deterministic from a seed, no network.

The three splits are seed 003's, as it defines them: 1,400 distinct problems, 1,000 train and
200 validation with every operand from 0 to 50 (ID50), and 200 test, of which the first 100 are
ID50 and the last 100 OOD100 (operands up to 100, at least one above 50, a range the train split
never shows). Deduplication on (initial, sorted deliveries, sorted withdrawals) runs across every
partition, so no permutation of one problem can appear in two of them.

A fourth split, `selection`, is this project's own addition, not the seed's: the split a best
checkpoint is chosen on. Validation is all ID50, where every trained arm scores alike, so
selection is drawn from the test split's distribution instead: 100 ID50 and 100 OOD100 problems,
none in another split, alternating (ID50 first) so that any even-length prefix holds both
populations in the test split's proportions.

The draws run in a fixed order: train, validation, test, selection's OOD100 half, then its
ID50 half; the question texts are drawn in the same order. Train, validation and test are
therefore the rows they were before selection existed.
"""
from __future__ import annotations

import json
import random

from .verifier import compute_final_stock, normalized_problem

SIZES = {"train": 1000, "validation": 200, "test_id50": 100, "test_ood100": 100,
         "selection_ood100": 100, "selection_id50": 100}
SPLITS = ("train", "validation", "test", "selection")

ITEMS = ["crates", "boxes", "pallets", "bags of rice", "spare tyres", "bottles", "lamps", "books"]
PLACES = ["warehouse", "shop", "depot", "pantry", "garage", "library storeroom", "bakery"]


def generate_problem(rng: random.Random, maximum: int) -> dict:
    """One problem with operands in 0..maximum and no negative intermediate stock."""
    initial = rng.randint(0, maximum)
    deliveries = [rng.randint(0, maximum) for _ in range(2)]
    available = initial + sum(deliveries)
    first = rng.randint(0, min(maximum, available))
    second = rng.randint(0, min(maximum, available - first))
    return {"initial": initial, "deliveries": deliveries, "withdrawals": [first, second]}


def render_question(problem: dict, rng: random.Random) -> str:
    item, place = rng.choice(ITEMS), rng.choice(PLACES)
    d1, d2 = problem["deliveries"]
    w1, w2 = problem["withdrawals"]
    return (
        f"A {place} starts the day with {problem['initial']} {item}. "
        f"A first delivery brings {d1} {item}, and a second delivery brings {d2} more. "
        f"Then {w1} {item} are taken out, and later another {w2} are taken out. "
        "How many are in stock at the end of the day?"
    )


def reference_completion(problem: dict) -> str:
    """A short worked chain in the think block, then the answer JSON (SFT and round-trips only)."""
    stock = problem["initial"]
    steps = [str(stock)]
    for v in problem["deliveries"]:
        stock += v
        steps.append(f"+{v}={stock}")
    for v in problem["withdrawals"]:
        stock -= v
        steps.append(f"-{v}={stock}")
    return "<think>" + " ".join(steps) + "</think>" + json.dumps({"final_stock": stock})


def make_row(problem: dict, population: str, split: str, rng: random.Random) -> dict:
    return {
        "question": render_question(problem, rng),
        "answer": str(compute_final_stock(problem)),
        "info": {
            "problem": problem,
            "population": population,
            "split": split,
            "reference_completion": reference_completion(problem),
        },
    }


def build_splits(seed: int = 0) -> dict[str, list[dict]]:
    rng = random.Random(seed)
    text_rng = random.Random(seed + 1)
    seen: set = set()

    def draw(n: int, maximum: int, ood: bool) -> list[dict]:
        out = []
        while len(out) < n:
            p = generate_problem(rng, maximum)
            operands = [p["initial"], *p["deliveries"], *p["withdrawals"]]
            if ood and max(operands) <= 50:
                continue
            key = normalized_problem(p)
            if key in seen:
                continue
            seen.add(key)
            out.append(p)
        return out

    train = draw(SIZES["train"], 50, False)
    validation = draw(SIZES["validation"], 50, False)
    test_id = draw(SIZES["test_id50"], 50, False)
    test_ood = draw(SIZES["test_ood100"], 100, True)
    sel_ood = draw(SIZES["selection_ood100"], 100, True)
    sel_id = draw(SIZES["selection_id50"], 50, False)
    # the question texts are drawn in this order too (module docstring)
    rows = {
        "train": [make_row(p, "ID50", "train", text_rng) for p in train],
        "validation": [make_row(p, "ID50", "validation", text_rng) for p in validation],
        "test": [make_row(p, "ID50", "test", text_rng) for p in test_id]
        + [make_row(p, "OOD100", "test", text_rng) for p in test_ood],
    }
    sel_ood_rows = [make_row(p, "OOD100", "selection", text_rng) for p in sel_ood]
    sel_id_rows = [make_row(p, "ID50", "selection", text_rng) for p in sel_id]
    rows["selection"] = [r for pair in zip(sel_id_rows, sel_ood_rows) for r in pair]
    return rows
