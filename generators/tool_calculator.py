"""Family generator for tool_calculator (ToolCalculator-v1, a tool-using env).

A row is a problem: the operation (`info.op`, add or multiply) and its two numbers (`info.a`,
`info.b`); its answer is the result, which the model gets by calling the env's tool with the
two numbers. The question is worded with the env's own grammar (tool_calculator.problems.
question), so rows that differ only in their numbers are told apart by their words. Buckets are
what a student fails on: how long the numbers it must copy into the call are (three domains), and
which tool the question names.

The reasoning is the replies that win the episode, which the gate plays through the env: the
reference player's tool call (the tool the question names, with its two numbers), an assistant
message with `tool_calls` in OpenAI's shape, then the answer the tool returns
(`<answer>N</answer>`). The gate runs the call with the hub's own tools and puts its result in
the conversation before the answer, and the hub rubric must give the whole episode full reward.
A row's reasoning depth is how many digits the episode copies (both numbers' into the call, the
result's into the answer), so a bucket's rows spread over several depths.
"""
from __future__ import annotations

import json
import random

from tool_calculator.problems import MAX_OPERAND, question, result, trajectory

from generators.core import (
    BucketQuota,
    RowWriter,
    bucket_plan,
    draw_difficulty,
    prior_clone_keys,
    rows_over_skeleton_floor,
)
from generators.family import Family

OP_NAMES = {"add": "addition", "multiply": "multiplication"}


def structure_of(info: dict) -> dict | None:
    """A train rollout's problem: its operation, numbers, and the digits of the longer one."""
    info = info or {}
    try:
        op, a, b = str(info["op"]), int(info["a"]), int(info["b"])
    except (KeyError, TypeError, ValueError):
        return None
    if op not in OP_NAMES:
        return None
    return {"op": op, "a": a, "b": b, "digits": len(str(max(abs(a), abs(b)))),
            "short": len(str(min(abs(a), abs(b)))), "result_digits": len(str(abs(result(op, a, b))))}


# Domains: how long the numbers the call must copy are (the student's weakness is copying); each
# split by the tool the question names. Three domains and every feature reachable in each, so the
# dataset gate's domain, difficulty and feature lines can pass wherever the teacher aims.
BUCKETS = {
    ("short numbers", "addition"): lambda p: p["digits"] <= 2 and p["op"] == "add",
    ("short numbers", "multiplication"): lambda p: p["digits"] <= 2 and p["op"] == "multiply",
    ("one three-digit number", "addition"): lambda p: p["digits"] >= 3 and p["short"] <= 2 and p["op"] == "add",
    ("one three-digit number", "multiplication"):
        lambda p: p["digits"] >= 3 and p["short"] <= 2 and p["op"] == "multiply",
    ("two three-digit numbers", "addition"): lambda p: p["short"] >= 3 and p["op"] == "add",
    ("two three-digit numbers", "multiplication"): lambda p: p["short"] >= 3 and p["op"] == "multiply",
}

FEATURE_DEFINITIONS = {
    "shared_digit": "the two numbers share a digit (a copy can swap them)",
    "repeated_digit": "a number repeats a digit",
    "carry": "the result has more digits than the longer number",
    "long_result": "the result has four digits or more",
    "mixed_lengths": "the two numbers differ in length",
    "zero_digit": "a number or the result holds a 0",
}

DATA_PLAN = ("tool_calculator family generator: fresh problems drawn into each bucket's operation "
             "and number length, worded with the env's own grammar, each with its winning replies "
             "as reasoning (the tool call, then the answer: the gate plays them through the env, "
             "the call run by the hub's tools); 40% skeletons that keep a failed "
             "train problem's operation and number lengths with new numbers and wording.")


def skeleton(source: str, info: dict) -> dict:
    p = structure_of(info)
    return {"source": source, "info": {"op": p["op"], "a_digits": len(str(p["a"])),
                                       "b_digits": len(str(p["b"]))} if p else {}}


def features(op: str, a: int, b: int) -> list[str]:
    f = []
    if set(str(a)) & set(str(b)):
        f.append("shared_digit")
    if any(len(set(str(n))) < len(str(n)) for n in (a, b)):
        f.append("repeated_digit")
    n = len(str(result(op, a, b)))
    if n > len(str(max(a, b))):
        f.append("carry")
    if n >= 4:
        f.append("long_result")
    if len(str(a)) != len(str(b)):
        f.append("mixed_lengths")
    if "0" in f"{a}{b}{result(op, a, b)}":
        f.append("zero_digit")
    return f


def difficulty(feats: list[str]) -> str:
    return "hard" if len(feats) >= 3 else "medium" if len(feats) == 2 else "easy"


DIFFICULTY_MIX = [("hard", 0.6), ("medium", 0.3), ("easy", 0.1)]


def number(rng: random.Random, digits: int | None = None) -> int:
    d = digits or rng.randint(1, 3)
    return rng.randint(max(2, 10 ** (d - 1)), min(MAX_OPERAND, 10 ** d - 1))


def _in_aim(p: dict, aim: dict | None) -> bool:
    if not aim or aim.get("magnitude") != "number length":
        return False
    return p["digits"] >= aim["at_least"] if "at_least" in aim else p["digits"] <= aim["at_most"]


def winning_replies(op: str, a: int, b: int) -> list:
    """The replies that win the episode, as info.reasoning holds them: the tool call (an
    assistant message with `tool_calls` in OpenAI's shape, the arguments a JSON object), then the
    answer. The reference trajectory's own replies (tool_calculator.problems.trajectory), less
    the tool's result, which the env gives."""
    replies = [m for m in trajectory([(op, a, b)], result(op, a, b)) if m["role"] == "assistant"]
    call, answer = replies
    fn = call["tool_calls"][0]["function"]
    call["tool_calls"][0]["function"] = {"name": fn["name"], "arguments": json.loads(fn["arguments"])}
    return [call, answer["content"]]


def depth(a: int, b: int, op: str = "add") -> int:
    """The digits the episode copies: both numbers' into the call, the tool's result into the
    answer."""
    return len(str(a)) + len(str(b)) + len(str(result(op, a, b)))


def row_info(op: str, a: int, b: int, key: tuple, want: str, feats: list[str], source: str) -> dict:
    return {"op": op, "a": a, "b": b, "domain": key[0], "sub_domain": key[1], "difficulty": want,
            "structural_features": feats, "source": source,
            "reasoning": winning_replies(op, a, b), "reasoning_depth": depth(a, b, op)}


def generate(weakness: dict, skeletons: list[dict], out: str = "dataset.jsonl", seed: int = 0,
             skeleton_share: float = 0.4, prior: list[str] = ()) -> list[dict]:
    """Rows for the weakness report's allocations. `skeletons` are failed train problems
    ({"source": "train_step_S_idx_I", "info": {op, a_digits, b_digits}}): a skeleton paraphrase
    keeps the operation and the numbers' lengths, with new numbers and wording. Where buckets
    no failure fits (an operation none failed on) hold much of the plan, the others carry the
    skeleton share (generators.core.rows_over_skeleton_floor)."""
    plan = list(bucket_plan(weakness, BUCKETS, "tool_calculator"))
    return rows_over_skeleton_floor(lambda shares: _rows(weakness, skeletons, out, seed, plan, shares, prior),
                                    plan, skeleton_share)


def _rows(weakness: dict, skeletons: list[dict], out: str, seed: int, plan: list, skeleton_shares: dict,
          prior) -> tuple:
    """One pass of `generate`: (its rows, unwritten; rows made per bucket; of them from skeletons)."""
    rng = random.Random(seed)
    writer = RowWriter(out)
    seen: set = prior_clone_keys(prior)
    usable = [s for s in skeletons if s.get("info", {}).get("op") in OP_NAMES]
    aim = weakness.get("aim")
    made: dict = {}
    from_skeletons: dict = {}
    for key, constraint, target in plan:
        op = "add" if key[1] == "addition" else "multiply"
        skeleton_share = skeleton_shares[key]
        quota = BucketQuota(seen, 0.7)
        aimed = 0
        fits = [s for s in usable if s["info"]["op"] == op and constraint(
            {"op": op, "digits": max(s["info"]["a_digits"], s["info"]["b_digits"]),
             "short": min(s["info"]["a_digits"], s["info"]["b_digits"])})]
        while quota.made < target:
            quota.attempt(key, target)
            want = draw_difficulty(rng, DIFFICULTY_MIX)
            use_skeleton = bool(fits) and quota.skeleton_due(rng, skeleton_share)
            if use_skeleton:
                sk = rng.choice(fits)
                a, b = number(rng, sk["info"]["a_digits"]), number(rng, sk["info"]["b_digits"])
                source = f"skeleton:{sk['source']}"
            else:
                a, b = number(rng), number(rng)
                source = f"template:{key[1]}"
            p = structure_of({"op": op, "a": a, "b": b})
            if not constraint(p):
                continue
            if aim and not use_skeleton and aimed < aim.get("share", 0) * (quota.made + 1) and not _in_aim(p, aim):
                continue
            feats = features(op, a, b)
            if difficulty(feats) != want and quota.attempts < target * 200:
                continue
            if not quota.depth_ok(depth(a, b, op)):
                continue
            q = question(op, a, b, rng)
            if not quota.claim(q, depth(a, b, op), use_skeleton):
                continue
            aimed += _in_aim(p, aim)
            writer.add(q, str(result(op, a, b)), row_info(op, a, b, key, difficulty(feats), feats, source))
        made[key], from_skeletons[key] = quota.made, quota.from_skeletons
    return writer, made, from_skeletons


def untargeted(count: int, out: str = "dataset.jsonl", seed: int = 0) -> list[dict]:
    """Control C's rows: problems of the hub's own distribution, drawn with no aim, in the same
    row shape."""
    from tool_calculator.problems import draw

    rng = random.Random(f"untargeted|{seed}")
    writer = RowWriter(out)
    quota = BucketQuota(set(), 1.0)
    while quota.made < count:
        row = draw(rng)
        i = row["info"]
        if not quota.claim(row["question"], depth(i["a"], i["b"], i["op"])):
            continue
        p = structure_of(i)
        key = next(k for k, c in BUCKETS.items() if c(p))
        feats = features(i["op"], i["a"], i["b"])
        writer.add(row["question"], row["answer"],
                   row_info(i["op"], i["a"], i["b"], key, difficulty(feats), feats, "template:untargeted"))
    writer.write()
    return writer.rows


FAMILY = Family(
    module=__name__, buckets=BUCKETS, feature_definitions=FEATURE_DEFINITIONS,
    structure_of=structure_of, skeleton=skeleton, data_plan=DATA_PLAN, generate=generate,
    magnitudes={"number length": lambda p: p["digits"]}, untargeted=untargeted)
