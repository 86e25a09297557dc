"""StockArithmetic with a choice of train rows and of eval rows that are never the test split,
for bench/rl_headroom.py. The hub env's own parser and rubric score every row.

Train rows (`kind`):
  "hub"          the hub env's 1,000 train rows (what iter_0 trains on)
  "fresh"        new problems from the hub's own problem and question generators: the train
                 register exactly, none of them in any hub split
  "hard"         like fresh, each with >= 3 of the family generator's structural features
  "three_digit"  like fresh, each with a running stock that reaches 100 or more (the weakness
                 the streamed warm start plants): perfectly targeted rows
  "plain" / "plain_three_digit"  like fresh / three_digit, worded by the family generator's
                 plain style (what the built-in teacher writes) instead of the hub's
  "mix_three_digit" / "plain_mix_three_digit"  60% three_digit rows and 40% fresh rows whose
                 running stock stays below 100: targeted, with the contrast a teacher's bucket
                 floors keep (a student shown only three-digit totals can learn "always write a
                 hundreds digit" instead of when to)
  "mix_peak120"  60% fresh train-range rows whose day's peak stock is 120 or more (about 4% of
                 the train split's problems, 82% of OOD100-shaped ones) and 40% whose stock stays
                 below 100: rows aimed as sharply as a teacher could at a weakness that starts
                 at a peak of 120
  "mix_peak120_wide"  as mix_peak120, its peaks of 120 or more drawn with operands up to 100
                 (the family's verifier accepts them) so that they spread over 120..300 as the
                 peaks of OOD100-shaped problems do, not only over the train range's 120..150
  "mix_peak120_uptoM"  as mix_peak120, its peaks of 120 or more drawn with operands up to M
                 (between the train range's 50 and mix_peak120_wide's 100)
  "mix_peak120@S"  as mix_peak120 with a share S (0..1) of the rows at a peak of 120 or more
                 instead of 60% (the built-in teacher's AIM_SHARE is 0.6)
  "mix_wide"     60% fresh problems with operands up to 100 (at least one above 50: the
                 verifier's documented domain beyond the train split's range) and 40% fresh
                 train-range ones; none in any hub split

Eval rows (`eval_kind`):
  "selection"    the hub's selection split (100 ID50 and 100 OOD100 problems, drawn as the
                 test split is, none of them a test problem; "validation" is accepted for it,
                 the name it had before seed 003's all-ID50 validation split came back)
  "wide"         200 fresh problems with operands up to 100 and at least one above 50, in the
                 hub's wording, none in any hub split: the shape of the test split's OOD100
                 half without its problems, so a decision can weigh it without the test split
  "three"        200 fresh problems in the train range whose running stock reaches 100, in the
                 hub's wording, none in any hub split: the planted skill, measured on more
                 problems than the selection split's 32
"""
from __future__ import annotations

import random

import verifiers as vf
from datasets import Dataset

import stock_arithmetic as hub
from generators import stock_arithmetic
from stock_arithmetic.data import build_splits, generate_problem, make_row
from stock_arithmetic.verifier import normalized_problem


def held_keys() -> set:
    return {normalized_problem(r["info"]["problem"]) for rows in build_splits(0).values() for r in rows}


MIX_SHARE = 0.6   # three-digit (or wide) share of the mix kinds


def has_wide_operand(p: dict) -> bool:
    """An operand above the train split's 50: the test split's OOD100 shape."""
    return max(p["initial"], *p["deliveries"], *p["withdrawals"]) > 50


def fresh_rows(n: int, seed: int, kind: str) -> list[dict]:
    kind, _, share = kind.partition("@")
    mix_share = float(share) if share else MIX_SHARE
    seen = held_keys()
    rng, text_rng, out = random.Random(seed), random.Random(seed + 1), []
    while len(out) < n:
        want_three = None   # any structure
        if kind.endswith("three_digit") or kind.startswith("mix_peak120"):
            want_three = "mix" not in kind or rng.random() < mix_share
        wide = (kind == "mix_wide" and rng.random() < mix_share) or (
            kind == "mix_peak120_wide" and want_three)
        top = 100 if wide else stock_arithmetic.MAX_OPERAND
        if kind.startswith("mix_peak120_upto") and want_three:
            top = int(kind.removeprefix("mix_peak120_upto"))
        while True:
            p = generate_problem(rng, top)
            key = normalized_problem(p)
            if key in seen or (kind == "hard" and len(stock_arithmetic.features(p, False, False)) < 3):
                continue
            if wide and kind == "mix_wide" and not has_wide_operand(p):
                continue
            if kind.startswith("mix_peak120") and want_three:
                if max(stock_arithmetic.running(p)) >= 120:
                    break
                continue
            if want_three is None or (max(stock_arithmetic.running(p)) >= 100) == want_three:
                break
        seen.add(key)
        row = make_row(p, "ID50", "train", text_rng)
        if kind.startswith("plain"):
            row["question"] = stock_arithmetic.render(p, text_rng, False, False, "plain")
        out.append(row)
    return out


def wide_rows(n: int = 200, seed: int = 7) -> list[dict]:
    return probe_rows("wide", n, seed)


def probe_rows(kind: str, n: int = 200, seed: int = 7) -> list[dict]:
    """Fresh eval rows of one shape (see the module docstring), seeded, none in any split."""
    seen = held_keys()
    rng, text_rng, out = random.Random(f"{kind}|{seed}"), random.Random(f"{kind}-text|{seed}"), []
    while len(out) < n:
        p = generate_problem(rng, 100 if kind == "wide" else 50)
        key = normalized_problem(p)
        if key in seen:
            continue
        if kind == "wide" and not has_wide_operand(p):
            continue
        if kind == "three" and max(stock_arithmetic.running(p)) < 100:
            continue
        seen.add(key)
        out.append(make_row(p, "OOD100" if kind == "wide" else "ID50", "bench", text_rng))
    return out


def load_environment(kind: str = "hub", n: int = 1000, seed: int = 123,
                     eval_kind: str = "selection", **kwargs) -> vf.Environment:
    base = hub.load_environment(eval_split="selection")
    splits = build_splits(0)
    rows = splits["train"] if kind == "hub" else fresh_rows(n, seed, kind)
    selection = eval_kind in ("selection", "validation")
    evals = splits["selection"] if selection else probe_rows(eval_kind)
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), eval_dataset=Dataset.from_list(evals),
                            system_prompt=hub.SYSTEM_PROMPT, parser=base.parser, rubric=base.rubric)
