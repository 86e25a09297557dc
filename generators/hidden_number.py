"""Family generator for hidden_number (HiddenNumber-v1, a multi-turn game).

A row is a game's initial state, which the env then plays with the student: the range
(`info.lo`, `info.hi`, which the env's episode logic reads), the guess budget
(`info.max_guesses`, where the env stops and up to which the reward counts) and the hidden
number (the row's `answer`). The question is worded with the game's own grammar
(hidden_number.game.question), so rows that differ only in their numbers are told apart by their
words. The solver is the halving player (hidden_number.game.halving_moves): `info.reasoning` is
its replies, one per turn, which the gate plays through the env's own turns and the hub rubric
must score at full reward. Buckets are the game's structure a student fails on: how wide the
range is and whether the budget has a spare guess.
"""
from __future__ import annotations

import random

from hidden_number.game import MAX_LO, halving_moves, needed, question

from generators.core import (
    BucketQuota,
    RowWriter,
    bucket_plan,
    draw_difficulty,
    prior_clone_keys,
    rows_over_skeleton_floor,
)
from generators.family import Family

NARROW, WIDE = 12, 24          # a range of fewer than NARROW numbers is narrow; WIDE or more, wide
MAX_WIDTH = 48                 # the widest range a generated game has (the hub's widest is 40)


def structure_of(info: dict) -> dict | None:
    """A train rollout's game: its range, its width and the budget's spare guesses."""
    info = info or {}
    try:
        lo, hi, budget = int(info["lo"]), int(info["hi"]), int(info["max_guesses"])
    except (KeyError, TypeError, ValueError):
        return None
    width = hi - lo + 1
    return {"lo": lo, "hi": hi, "width": width, "budget": budget, "spare": budget - needed(width)}


def _band(p: dict) -> str:
    return "narrow" if p["width"] < NARROW else "wide" if p["width"] >= WIDE else "mid"


BUCKETS = {
    ("wide ranges", "no spare guess"): lambda p: _band(p) == "wide" and p["spare"] <= 0,
    ("wide ranges", "a spare guess"): lambda p: _band(p) == "wide" and p["spare"] >= 1,
    ("middling ranges", "no spare guess"): lambda p: _band(p) == "mid" and p["spare"] <= 0,
    ("middling ranges", "a spare guess"): lambda p: _band(p) == "mid" and p["spare"] >= 1,
    ("narrow ranges", "no spare guess"): lambda p: _band(p) == "narrow" and p["spare"] <= 0,
    ("narrow ranges", "a spare guess"): lambda p: _band(p) == "narrow" and p["spare"] >= 1,
}

FEATURE_DEFINITIONS = {
    "wide_range": f"the range holds {WIDE} numbers or more",
    "no_spare_guess": "the budget is exactly the guesses that halving the range needs",
    "two_digit_bounds": "both ends of the range have two digits",
    "edge_number": "the hidden number is within two of an end of the range",
    "deep_search": "halving the range needs five guesses or more",
    "late_find": "the halving player finds the number on its last allowed guess",
}

DATA_PLAN = ("hidden_number family generator: fresh games drawn into each bucket's range width and "
             "budget, worded with the game's own grammar, each with the halving player's replies "
             "as its reasoning (the gate plays them through the env); 40% skeletons that keep a "
             "failed train game's range width and budget with a new hidden number and wording.")


def skeleton(source: str, info: dict) -> dict:
    p = structure_of(info)
    return {"source": source, "info": {"width": p["width"], "spare": p["spare"]} if p else {}}


def features(lo: int, hi: int, secret: int, budget: int, moves: list[str]) -> list[str]:
    width = hi - lo + 1
    f = []
    if width >= WIDE:
        f.append("wide_range")
    if budget <= needed(width):
        f.append("no_spare_guess")
    if lo >= 10:
        f.append("two_digit_bounds")
    if min(secret - lo, hi - secret) <= 2:
        f.append("edge_number")
    if needed(width) >= 5:
        f.append("deep_search")
    if len(moves) == budget:
        f.append("late_find")
    return f


def difficulty(feats: list[str]) -> str:
    return "hard" if len(feats) >= 3 else "medium" if len(feats) == 2 else "easy"


DIFFICULTY_MIX = [("hard", 0.5), ("medium", 0.38), ("easy", 0.12)]
MAX_DEPTH_SHARE = 0.6


def game(rng: random.Random, width: int | None = None, spare: int | None = None) -> tuple[int, int, int, int]:
    """(lo, hi, hidden number, budget) of a fresh game, keeping a width or spare where given."""
    w = width or rng.randint(5, MAX_WIDTH)
    lo = rng.randint(1, MAX_LO)
    s = rng.choice([0, 0, 1, 2]) if spare is None else max(0, spare)
    return lo, lo + w - 1, rng.randint(lo, lo + w - 1), needed(w) + s


def _in_aim(width: int, aim: dict | None) -> bool:
    if not aim or aim.get("magnitude") != "range width":
        return False
    return width >= aim["at_least"] if "at_least" in aim else width <= aim["at_most"]


def generate(weakness: dict, skeletons: list[dict], out: str = "dataset.jsonl", seed: int = 0,
             skeleton_share: float = 0.4, prior: list[str] = ()) -> list[dict]:
    """Rows for the weakness report's allocations. `skeletons` are failed train games
    ({"source": "train_step_S_idx_I", "info": {width, spare}}): a skeleton paraphrase keeps the
    failed game's range width and spare guesses, with a new range start, hidden number and
    wording. Where the report has an `aim` on the range width (the built-in teacher's failing
    range), at least its share of each bucket's rows that can be in it are drawn inside it.
    Where buckets no failed game fits hold much of the plan, the others carry the skeleton
    share (generators.core.rows_over_skeleton_floor)."""
    plan = list(bucket_plan(weakness, BUCKETS, "hidden_number"))
    return rows_over_skeleton_floor(lambda shares: _rows(weakness, skeletons, out, seed, plan, shares, prior),
                                    plan, skeleton_share)


def _rows(weakness: dict, skeletons: list[dict], out: str, seed: int, plan: list, skeleton_shares: dict,
          prior) -> tuple:
    """One pass of `generate`: (its rows, unwritten; rows made per bucket; of them from skeletons)."""
    rng = random.Random(seed)
    writer = RowWriter(out)
    seen: set = prior_clone_keys(prior)
    usable = [s for s in skeletons if s.get("info", {}).get("width")]
    aim = weakness.get("aim")
    made: dict = {}
    from_skeletons: dict = {}
    for key, constraint, target in plan:
        skeleton_share = skeleton_shares[key]
        quota = BucketQuota(seen, MAX_DEPTH_SHARE)
        aimed = 0
        fits = [s for s in usable if constraint({"width": s["info"]["width"], "spare": s["info"]["spare"]})]
        while quota.made < target:
            quota.attempt(key, target)
            want = draw_difficulty(rng, DIFFICULTY_MIX)
            use_skeleton = bool(fits) and quota.skeleton_due(rng, skeleton_share)
            if use_skeleton:
                sk = rng.choice(fits)
                lo, hi, secret, budget = game(rng, sk["info"]["width"], sk["info"]["spare"])
                source = f"skeleton:{sk['source']}"
            else:
                width = None
                if aim and aimed < aim.get("share", 0) * (quota.made + 1):
                    width = rng.randint(5, MAX_WIDTH)   # drawn evenly, kept when inside the aim
                    if not _in_aim(width, aim):
                        continue
                lo, hi, secret, budget = game(rng, width)
                source = f"template:{key[1]}"
            p = structure_of({"lo": lo, "hi": hi, "max_guesses": budget})
            if not constraint(p):
                continue
            moves = halving_moves(lo, hi, secret, budget)
            feats = features(lo, hi, secret, budget, moves)
            if difficulty(feats) != want or not quota.depth_ok(len(moves)):
                continue
            q = question(lo, hi, budget, rng)
            if not quota.claim(q, len(moves), use_skeleton):
                continue
            aimed += _in_aim(hi - lo + 1, aim)
            writer.add(q, str(secret), {
                "lo": lo, "hi": hi, "max_guesses": budget,
                "domain": key[0], "sub_domain": key[1], "difficulty": want,
                "structural_features": feats, "source": source,
                "reasoning": moves, "reasoning_depth": len(moves),
            })
        made[key], from_skeletons[key] = quota.made, quota.from_skeletons
    return writer, made, from_skeletons


def untargeted(count: int, out: str = "dataset.jsonl", seed: int = 0) -> list[dict]:
    """Control C's rows: games of the hub's own distribution, drawn with no aim, in the same
    row shape (the halving player's replies as reasoning)."""
    from hidden_number.game import draw

    rng = random.Random(f"untargeted|{seed}")
    writer = RowWriter(out)
    seen: set = set()
    quota = BucketQuota(seen, 1.0)
    while quota.made < count:
        row = draw(rng)
        i = row["info"]
        secret = int(row["answer"])
        if not quota.claim(row["question"], 0):
            continue
        moves = halving_moves(i["lo"], i["hi"], secret, i["max_guesses"])
        p = structure_of(i)
        bucket = next(k for k, c in BUCKETS.items() if c(p))
        feats = features(i["lo"], i["hi"], secret, i["max_guesses"], moves)
        writer.add(row["question"], row["answer"], {
            **i, "domain": bucket[0], "sub_domain": bucket[1], "difficulty": difficulty(feats),
            "structural_features": feats, "source": "template:untargeted", "reasoning": moves,
            "reasoning_depth": len(moves)})
    writer.write()
    return writer.rows


FAMILY = Family(
    module=__name__, buckets=BUCKETS, feature_definitions=FEATURE_DEFINITIONS,
    structure_of=structure_of, skeleton=skeleton, data_plan=DATA_PLAN, generate=generate,
    magnitudes={"range width": lambda p: p["width"]}, untargeted=untargeted)
