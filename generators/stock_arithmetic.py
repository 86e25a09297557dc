"""Family generator for StockArithmetic-v1.

Every row is a valid StockArithmetic problem (one initial stock, two deliveries, two
withdrawals, no negative intermediate stock), so the hub env's own verifier scores it. Its
structural features are computed from the problem, never declared; its choices come from the
weakness analysis of train rollouts (which buckets, how many rows, which failed skeletons to
paraphrase) and from the diversity pillar. The test split is never an input.
"""
from __future__ import annotations

import json
import random

from generators.core import (
    BucketQuota,
    RowWriter,
    bucket_plan,
    clone_key,
    draw_difficulty,
    prior_clone_keys,
    rows_over_skeleton_floor,
)
from generators.family import Family

MAX_OPERAND = 50  # the train split's range, read from train rows by the teacher

# ---------------------------------------------------------------------------------------------
# Structure


def solve(p: dict) -> int:
    return p["initial"] + sum(p["deliveries"]) - sum(p["withdrawals"])


def running(p: dict) -> list[int]:
    stock, out = p["initial"], [p["initial"]]
    for v in p["deliveries"]:
        stock += v
        out.append(stock)
    for v in p["withdrawals"]:
        stock -= v
        out.append(stock)
    return out


def valid(p: dict) -> bool:
    ops = [p["initial"], *p["deliveries"], *p["withdrawals"]]
    return all(0 <= v <= 100 for v in ops) and min(running(p)) >= 0


def carries(p: dict) -> int:
    s = running(p)
    return sum(1 for a, v in zip(s[:2], p["deliveries"]) if (a % 10) + (v % 10) >= 10)


def borrows(p: dict) -> int:
    s = running(p)
    return sum(1 for a, v in zip(s[2:4], p["withdrawals"]) if (a % 10) < (v % 10))


def features(p: dict, distractor: bool, interleaved: bool) -> list[str]:
    f = []
    if carries(p):
        f.append("carry")
    if borrows(p):
        f.append("borrow")
    if max(running(p)) >= 100:
        f.append("three_digit_total")
    if solve(p) <= 9:
        f.append("near_zero_result")
    if distractor:
        f.append("distractor_numbers")
    if interleaved:
        f.append("interleaved_order")
    return f


FEATURE_DEFINITIONS = {
    "carry": "a delivery pushes the running stock across a tens boundary",
    "borrow": "a withdrawal needs a borrow from the tens digit",
    "three_digit_total": "the running stock reaches 100 or more",
    "near_zero_result": "the final stock is below 10",
    "distractor_numbers": "the story contains numbers that are not stock movements",
    "interleaved_order": "the story mentions movements out of chronological order",
}


def depth(p: dict) -> int:
    """Reasoning depth: the number of steps that cross a tens boundary (carries + borrows)."""
    return carries(p) + borrows(p)


# Magnitudes of a problem whose failing range the teacher may find. A bucket's threshold is
# fixed in advance ("the stock reaches 100"); a student's weakness has its own edge (a habit
# that starts at a peak of 120, say), which only the train rollouts' failure rates show.
MAGNITUDES = {"peak stock": lambda p: max(running(p)), "closing stock": solve}


def in_aim(p: dict, aim: dict) -> bool:
    """Whether a problem lies in a weakness report's aim: {"magnitude": name of MAGNITUDES,
    "at_least": t} or {"magnitude": ..., "at_most": t}."""
    v = MAGNITUDES[aim["magnitude"]](p)
    return v >= aim["at_least"] if "at_least" in aim else v <= aim["at_most"]


def difficulty(feats: list[str]) -> str:
    return "hard" if len(feats) >= 3 else "medium" if len(feats) == 2 else "easy"


# Each bucket is a constraint on the problem's structure.
BUCKETS = {
    ("carry-heavy deliveries", "double carry sums"): lambda p: carries(p) == 2,
    ("carry-heavy deliveries", "carry past one hundred"): lambda p: carries(p) >= 1 and max(running(p)) >= 100,
    ("borrow-heavy withdrawals", "double borrow withdrawals"): lambda p: borrows(p) == 2,
    ("borrow-heavy withdrawals", "withdrawal to near zero"): lambda p: borrows(p) >= 1 and solve(p) <= 9,
    ("long running totals", "large intermediate stock"): lambda p: max(running(p)) >= 90,
    ("long running totals", "mixed carry and borrow"): lambda p: carries(p) >= 1 and borrows(p) >= 1,
}


# ---------------------------------------------------------------------------------------------
# The built-in teacher's view of this family: how a train rollout's info maps to a structure
# the buckets can test, and what a failed one contributes as a skeleton.

DATA_PLAN = ("StockArithmetic family generator: cover stories, interleaved order, distractor "
             "numbers, carries and borrows; 40% skeleton paraphrases of failed train problems.")


def structure_of(info: dict) -> dict | None:
    p = (info or {}).get("problem")
    return p if isinstance(p, dict) and valid(p) else None


def skeleton(source: str, info: dict) -> dict:
    return {"source": source, "problem": structure_of(info)}


def sample_problem(rng: random.Random, hi: int = MAX_OPERAND) -> dict:
    initial = rng.randint(0, hi)
    deliveries = [rng.randint(0, hi) for _ in range(2)]
    available = initial + sum(deliveries)
    first = rng.randint(0, min(hi, available))
    second = rng.randint(0, min(hi, available - first))
    return {"initial": initial, "deliveries": deliveries, "withdrawals": [first, second]}


def sample_in_aim(rng: random.Random, aim: dict, hi: int = MAX_OPERAND) -> dict:
    """A fresh problem inside an aim, its magnitude drawn evenly over the range rather than as
    the train split spreads it: there a peak thins out fast above 100, so a range's far end,
    the part the student has practised least, would get almost no rows. A peak stock is built
    to its value; any other magnitude is drawn until it falls in the range."""
    if aim["magnitude"] != "peak stock":
        while True:
            p = sample_problem(rng, hi)
            if in_aim(p, aim):
                return p
    lo, top = (aim["at_least"], 3 * hi) if "at_least" in aim else (0, aim["at_most"])
    peak = rng.randint(max(0, lo), min(3 * hi, top))
    initial = rng.randint(max(0, peak - 2 * hi), min(hi, peak))
    first = rng.randint(max(0, peak - initial - hi), min(hi, peak - initial))
    p = {"initial": initial, "deliveries": [first, peak - initial - first], "withdrawals": [0, 0]}
    out = rng.randint(0, min(hi, peak))
    p["withdrawals"] = [out, rng.randint(0, min(hi, peak - out))]
    return p


def perturb(p: dict, rng: random.Random, hi: int = MAX_OPERAND) -> dict:
    """A skeleton paraphrase keeps the failed problem's shape and moves every number a little."""
    def nudge(v):
        return min(hi, max(0, v + rng.choice([-1, 1]) * rng.randint(1, 6)))
    return {"initial": nudge(p["initial"]), "deliveries": [nudge(v) for v in p["deliveries"]],
            "withdrawals": [nudge(v) for v in p["withdrawals"]]}


# ---------------------------------------------------------------------------------------------
# Surface

NAMES = ["Amara", "Bruno", "Chen", "Dalia", "Emeka", "Farah", "Goran", "Hana", "Ilse", "Jonas",
         "Keiko", "Luca", "Mira", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq"]
PLACES = ["a seed bank", "a ferry kiosk", "a field hospital", "a bike co-op", "a school canteen",
          "a theatre prop room", "a mountain hut", "a harbour chandlery", "a print shop",
          "a repair cafe", "a tram depot", "a community fridge"]
ITEMS = ["jars of honey", "coils of rope", "boxes of chalk", "bike tubes", "tins of paint",
         "rolls of tape", "lanterns", "sacks of flour", "ink cartridges", "pairs of gloves",
         "bottles of water", "crates of apples"]
OPENERS = [
    "{name} runs {place} and counts {n0} {item} on the shelf before opening.",
    "At dawn the ledger at {place} shows {n0} {item}.",
    "{place_cap} begins the week holding {n0} {item}, according to {name}.",
    "Inventory check at {place}: {n0} {item} on hand.",
    "When {name} unlocks {place}, there are {n0} {item} in storage.",
    "The morning count at {place} comes to {n0} {item}.",
]
DELIVERIES = [
    "A supplier drops off {a} {item}; later a second van brings {b}.",
    "Two deliveries arrive: first {a} {item}, then {b} more.",
    "{name} signs for {a} {item} at noon and another {b} in the afternoon.",
    "Restocking adds {a} {item}, and a late shipment adds {b}.",
    "First {a} {item} come in by cart, then {b} by truck.",
]
WITHDRAWALS = [
    "Customers take {c} {item}, and a volunteer later removes {d}.",
    "{name} hands out {c} {item}, then ships {d} to another site.",
    "Orders use up {c} {item}; a final order takes {d}.",
    "First {c} {item} leave the shelf, then {d} more are sent away.",
    "A school group collects {c} {item}, and a neighbour borrows {d}.",
]
INTERLEAVED = [
    "During the day, {c} {item} go out only after {a} arrive; once {b} more arrive, a further {d} go out.",
    "{name} notes that {a} {item} were delivered before {c} left, and that {b} came in before the last {d} left.",
]
DISTRACTORS = [
    "The shelf has {x} hooks, none of which hold {item}.",
    "{name} has worked there for {x} years.",
    "The door code is {x}{y}.",
    "It rained for {x} minutes at lunch.",
    "A sign promises delivery within {x} days.",
    "Last month {x} visitors came by on a single Saturday.",
]
QUESTIONS = [
    "How many {item} are left at closing?",
    "What is the stock of {item} at the end of the day?",
    "How many {item} should the closing ledger show?",
    "Give the final number of {item} in stock.",
]


# The "plain" style keeps the ledger's usual sentence order (an opening count, two deliveries,
# two withdrawals, the question) and varies only the nouns, the question and the distractors:
# the register a student that has only seen plain ledgers can still read. The teacher switches
# to it when the gradient probe shows the story style is out of the student's reach.
PLAIN = [
    "{place_cap} starts the day with {n0} {item}.",
    "A first delivery brings {a} {item}, and a second delivery brings {b} more.",
    "Then {c} {item} are taken out, and later another {d} are taken out.",
]
STYLES = ("stories", "plain")

# The surface features a row draws at these rates (the rest of its features come from the
# problem). A teacher may turn one down to 0 where the student has been seen never to solve it:
# such rows carry no gradient. Plain rows keep their distractors whatever is asked: with the
# ledger's fixed sentence order they are most of what keeps two plain questions from being
# clones, so there the teacher answers with the story style instead.
SURFACE_SHARES = {"distractor_numbers": 0.45, "interleaved_order": 0.3}


def surface_shares(style: str, surface: dict | None = None) -> dict:
    shares = {**SURFACE_SHARES, **(surface or {})}
    if style == "plain":
        shares["distractor_numbers"] = SURFACE_SHARES["distractor_numbers"]
        shares["interleaved_order"] = 0.0   # plain rows keep chronological order
    return shares


def draw_surface(rng: random.Random, shares: dict) -> tuple[bool, bool]:
    """(distractor, interleaved) for one row; a share of 0 draws nothing, so the default shares
    keep the random streams rows were drawn from before shares existed."""
    return tuple(shares[k] > 0 and rng.random() < shares[k]
                 for k in ("distractor_numbers", "interleaved_order"))


def feature_definitions(style: str, surface: dict | None = None) -> dict:
    """The features rows of this style (and surface shares) can carry."""
    shares = surface_shares(style, surface)
    return {k: v for k, v in FEATURE_DEFINITIONS.items() if shares.get(k, 1.0) > 0}


def render(p: dict, rng: random.Random, distractor: bool, interleaved: bool,
           style: str = "stories") -> str:
    name, place, item = rng.choice(NAMES), rng.choice(PLACES), rng.choice(ITEMS)
    fill = {"name": name, "place": place, "place_cap": place[0].upper() + place[1:], "item": item,
            "n0": p["initial"], "a": p["deliveries"][0], "b": p["deliveries"][1],
            "c": p["withdrawals"][0], "d": p["withdrawals"][1],
            "x": rng.randint(2, 60), "y": rng.randint(10, 99)}
    if style == "plain":
        parts = list(PLAIN)
    elif interleaved:
        parts = [rng.choice(OPENERS), rng.choice(INTERLEAVED)]
    else:
        parts = [rng.choice(OPENERS), rng.choice(DELIVERIES), rng.choice(WITHDRAWALS)]
    if distractor:
        parts.insert(rng.randint(1, len(parts)), rng.choice(DISTRACTORS))
    parts.append(rng.choice(QUESTIONS))
    return " ".join(s.format(**fill) for s in parts)


def reference_completion(p: dict) -> str:
    s = running(p)
    steps = [str(s[0])] + [f"+{v}={t}" for v, t in zip(p["deliveries"], s[1:3])] + \
        [f"-{v}={t}" for v, t in zip(p["withdrawals"], s[3:5])]
    return "<think>" + " ".join(steps) + "</think>" + json.dumps({"final_stock": solve(p)})


# ---------------------------------------------------------------------------------------------
# Generation

DIFFICULTY_MIX = [("hard", 0.5), ("medium", 0.35), ("easy", 0.15)]


MAX_DEPTH_SHARE = 0.6  # the gate allows 0.7; stay clear of it
# The gate wants every feature the weakness report defines on at least 10% of the rows. An
# allocation aimed at one weakness (say, three-digit totals) can starve a rare feature (a final
# stock below 10 comes up in about 6% of fresh problems), so while a defined feature of the
# problem itself is under this share of the rows made so far, rows without it are mostly
# redrawn. Distractors and interleaving are drawn per row at fixed rates and need no help.
FEATURE_FLOOR = 0.15
PROBLEM_FEATURES = {
    "carry": lambda p: carries(p) > 0,
    "borrow": lambda p: borrows(p) > 0,
    "three_digit_total": lambda p: max(running(p)) >= 100,
    "near_zero_result": lambda p: solve(p) <= 9,
}
SCARCE_FLOOR = 0.12   # the gate's 10% with a margin: what an aim's rare feature is given


def owed_features(aim: dict, plan: list, defined: list[str], seed: int) -> tuple[set, dict]:
    """With an aim, a defined feature that rows in the range rarely carry (no peak of 120 ends
    below 10 when withdrawals are at most 50) must come from the other rows: the buckets whose
    plain rows carry it at all (5% or more) owe it on a share of their rows large enough for
    SCARCE_FLOOR of the dataset. Returns (rare features, {bucket key: {feature: share}}).
    Measured by drawing on a stream of its own, so the rows themselves are drawn as before."""
    side = random.Random(f"aim|{seed}")
    drawn = [sample_in_aim(side, aim) for _ in range(400)]
    scarce = {f for f in defined if sum(map(PROBLEM_FEATURES[f], drawn)) < FEATURE_FLOOR * len(drawn)}
    fits = {key: [p for p in (sample_problem(side) for _ in range(2000)) if constraint(p)]
            for key, constraint, _ in plan} if scarce else {}
    total = sum(t for _, _, t in plan)
    owed: dict = {}
    for f in sorted(scarce):
        able = [(key, t) for key, _, t in plan
                if fits[key] and sum(map(PROBLEM_FEATURES[f], fits[key])) >= 0.05 * len(fits[key])]
        supply = sum(t for _, t in able)   # none able: the gate's floor line says so
        for key, _ in able:
            owed.setdefault(key, {})[f] = min(1.0, SCARCE_FLOOR * total / supply)
    return scarce, owed


def generate(weakness: dict, skeletons: list[dict], out: str = "dataset.jsonl", seed: int = 0,
             skeleton_share: float = 0.4, prior: list[str] = (), style: str = "stories",
             surface: dict | None = None) -> list[dict]:
    """Write rows for the weakness report's bucket allocations. `skeletons` are failed train
    problems: {"source": "train_step_S_idx_I", "problem": {...}}; `prior` are earlier
    iterations' datasets, whose clones are avoided; `style` is "stories" (varied cover stories,
    interleaved order) or "plain" (the ledger's usual sentence order); `surface` overrides
    SURFACE_SHARES (see surface_shares). Where the report has an `aim` (a magnitude range, see
    in_aim, with its `share`), at least that share of the rows of the buckets whose structure
    allows it lies in the range."""
    plan = list(bucket_plan(weakness, BUCKETS, "stock_arithmetic"))
    # a bucket no failed skeleton fits (a double borrow, when every failure is a large peak)
    # takes none, and where such buckets hold much of the plan the dataset falls under the
    # gate's skeleton line on every retry: the rows are made again with the share spread over
    # the buckets that do take skeletons (a dataset that cleared the line is kept as it was)
    return rows_over_skeleton_floor(
        lambda shares: _rows(weakness, skeletons, out, seed, plan, shares, prior, style, surface),
        plan, skeleton_share)


def _rows(weakness: dict, skeletons: list[dict], out: str, seed: int, plan: list,
          skeleton_shares: dict, prior, style: str, surface: dict | None) -> tuple:
    """One pass of `generate`: (its rows, unwritten; rows made per bucket; of them from skeletons)."""
    shares = surface_shares(style, surface)
    rng = random.Random(seed)
    writer = RowWriter(out)
    seen: set = prior_clone_keys(prior)
    usable = [s for s in skeletons if valid(s["problem"])]
    defined = [f["name"] for f in weakness.get("structural_features", [])
               if f.get("name") in PROBLEM_FEATURES]
    carried = {f: 0 for f in defined}   # rows made so far that carry each defined feature
    aim = weakness.get("aim")
    aimed = 0                           # rows made so far inside the aim
    made_by: dict = {}
    from_skeletons: dict = {}
    scarce, owed = owed_features(aim, plan, defined, seed) if aim else (set(), {})
    in_range = [s for s in usable if aim and in_aim(s["problem"], aim)]
    for key, constraint, target in plan:
        lag_redraws = 0
        due = owed.get(key, {})                 # {feature: share of this bucket's rows}
        due_made = {f: 0 for f in due}
        aimed_here = [s for s in in_range if constraint(s["problem"])]
        quota = BucketQuota(seen, MAX_DEPTH_SHARE)
        skel_misses = 0
        while quota.made < target:
            quota.attempt(key, target, limit=5000)
            want = draw_difficulty(rng, DIFFICULTY_MIX)
            # keep the skeleton share at its target in every bucket, unless no failed
            # skeleton fits this bucket's structure (then fresh samples fill it)
            use_skeleton = (bool(usable) and skel_misses < 20000
                            and quota.skeleton_due(rng, skeleton_shares[key]))
            made = len(writer.rows) + 1
            short = [f for f, q in due.items() if due_made[f] < q * (quota.made + 1)]
            behind_aim = bool(aim) and aimed < aim["share"] * made
            # behind the aim's share (and owing no rare feature), a fresh row is drawn in the
            # range, spread evenly over it
            from_aim = behind_aim and not use_skeleton and not short
            if use_skeleton:
                # behind the aim, a paraphrase of a failure inside the range where there is one
                sk = rng.choice(aimed_here if aimed_here and behind_aim else usable)
                p, source = perturb(sk["problem"], rng), f"skeleton:{sk['source']}"
            elif from_aim:
                p, source = sample_in_aim(rng, aim), f"template:{key[1]}"
            else:
                p, source = sample_problem(rng), f"template:{key[1]}"
            if not valid(p) or not constraint(p):
                skel_misses += use_skeleton
                continue
            if short and not any(PROBLEM_FEATURES[f](p) for f in short):
                continue
            # the rare features of an aim are owed by buckets (above), not chased row by row
            lagging = [f for f in defined if carried[f] < FEATURE_FLOOR * made and f not in scarce]
            # a bucket whose constraint excludes a lagging feature stops redrawing for it
            if (lagging and lag_redraws < target * 200 and rng.random() < 0.8
                    and not any(PROBLEM_FEATURES[f](p) for f in lagging)):
                lag_redraws += 1
                continue
            distractor, interleaved = draw_surface(rng, shares)
            feats = features(p, distractor, interleaved)
            if difficulty(feats) != want:
                continue
            dp = depth(p)
            if not quota.depth_ok(dp):
                continue
            question = render(p, rng, distractor, interleaved, style)
            if not quota.claim(question, dp, use_skeleton):
                continue
            aimed += from_aim or (bool(aim) and use_skeleton and in_aim(p, aim))
            for f in due:
                due_made[f] += PROBLEM_FEATURES[f](p)
            for f in defined:
                carried[f] += PROBLEM_FEATURES[f](p)
            writer.add(question, str(solve(p)), {
                "domain": key[0], "sub_domain": key[1], "difficulty": want,
                "structural_features": feats, "source": source,
                "reasoning": reference_completion(p), "reasoning_depth": dp,
                "problem": p,
            })
        made_by[key], from_skeletons[key] = quota.made, quota.from_skeletons
    return writer, made_by, from_skeletons


def untargeted(count: int, out: str = "dataset.jsonl", seed: int = 0,
               style: str = "plain", surface: dict | None = None) -> list[dict]:
    """Control C's rows: `count` problems from the family's plain distribution (the train
    split's operand range, no bucket constraint, no skeleton of a failure), worded in `style`
    with the same `surface` shares as the iteration it is compared with.
    Same row schema as `generate`, so the same env wrapper trains on them; nothing in them is
    aimed at a weakness."""
    rng = random.Random(f"untargeted|{seed}")
    shares = surface_shares(style, surface)
    writer = RowWriter(out)
    seen: set = set()
    attempts = 0
    while len(writer.rows) < count:
        attempts += 1
        if attempts > count * 5000:
            raise RuntimeError(f"cannot draw {count} distinct untargeted rows")
        p = sample_problem(rng)
        distractor, interleaved = draw_surface(rng, shares)
        question = render(p, rng, distractor, interleaved, style)
        key = clone_key(question)
        if key in seen:
            continue
        seen.add(key)
        feats = features(p, distractor, interleaved)
        writer.add(question, str(solve(p)), {
            "domain": "untargeted", "sub_domain": "plain distribution",
            "difficulty": difficulty(feats), "structural_features": feats,
            "source": "template:untargeted", "reasoning": reference_completion(p),
            "reasoning_depth": depth(p), "problem": p})
    writer.write()
    return writer.rows


FAMILY = Family(
    module=__name__, buckets=BUCKETS, feature_definitions=FEATURE_DEFINITIONS,
    structure_of=structure_of, skeleton=skeleton, data_plan=DATA_PLAN, generate=generate,
    styles=STYLES, surface_shares=SURFACE_SHARES, magnitudes=MAGNITUDES, untargeted=untargeted,
    shares_in_style=surface_shares, features_in_style=feature_definitions)
