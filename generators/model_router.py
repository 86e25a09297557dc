"""Family generator for model_router.

Each row is a synthetic routing task: a visible description (category, component, task
difficulty, files touched, sometimes an irrelevant detail) and hidden per-model outcomes drawn
from the same outcome model the environment uses (each model's published skill, lowered by
task hardness; cost grows with files touched). The solver is the environment's own oracle rule
(`model_router.table.oracle_pick`: the best-performing model, ties to the cheapest), so the hub
rubric scores `<model>ORACLE</model>` as 1.0. Buckets are outcome patterns the student gets
wrong (read from failed train rollouts by the teacher); the eval split is never an input.
"""
from __future__ import annotations

import random

from model_router.table import CATEGORIES, MODELS, oracle_pick

from generators.core import (
    BucketQuota,
    RowWriter,
    bucket_plan,
    draw_difficulty,
    prior_clone_keys,
    rows_over_skeleton_floor,
)
from generators.family import Family

SMALL, MEDIUM, LARGE = "swift-small", "steady-medium", "deep-large"


def solved(task: dict) -> set[str]:
    return {m for m, o in task["per_model"].items() if o["resolved"]}


# (domain, sub_domain) -> the outcome pattern that defines the bucket
BUCKETS = {
    ("escalation to stronger model", "only large resolves"): lambda t: solved(t) == {LARGE},
    ("escalation to stronger model", "medium is cheapest solver"):
        lambda t: MEDIUM in solved(t) and SMALL not in solved(t),
    ("cheapest sufficient model", "all three resolve"): lambda t: solved(t) == set(MODELS),
    ("cheapest sufficient model", "small plus one other"):
        lambda t: SMALL in solved(t) and len(solved(t)) == 2,
    ("nobody solves it", "many files all fail"):
        lambda t: not solved(t) and t["files_touched"] >= 3,
    ("nobody solves it", "few files all fail"):
        lambda t: not solved(t) and t["files_touched"] <= 2,
}

FEATURE_DEFINITIONS = {
    "multi_file": "the task touches three or more files",
    "hard_task": "the task is labelled hard",
    "cost_tiebreak": "two or more models resolve it, so cost decides the route",
    "no_solver": "no model resolves it, so the cheapest failure is the oracle",
    "strong_model_needed": "only the large model resolves it",
    "distractor_detail": "the description carries a detail that is irrelevant to routing",
}

# The built-in teacher's view of this family (see generators.stock_arithmetic).
DATA_PLAN = ("model_router family generator: fresh tasks drawn from the environment's outcome "
             "model into each outcome pattern, irrelevant details, varied components and "
             "categories; 40% skeletons that keep a failed train task's difficulty and size.")


def structure_of(info: dict) -> dict | None:
    info = info or {}
    if not isinstance(info.get("per_model"), dict) or not info.get("files_touched"):
        return None
    return {"per_model": info["per_model"], "files_touched": info["files_touched"],
            "task_difficulty": info.get("difficulty")}


def skeleton(source: str, info: dict) -> dict:
    return {"source": source, "info": {"difficulty": info.get("difficulty"),
                                       "files_touched": info["files_touched"]}}


COMPONENTS = ["billing service", "auth middleware", "CSV importer", "job scheduler",
              "search indexer", "mobile sync client", "report exporter", "webhook dispatcher",
              "feature-flag loader", "image resizer", "rate limiter", "audit logger"]
SYMPTOMS = ["that fails only under load", "reported by an enterprise customer",
            "that corrupts data silently", "blocking the next release", "seen after an upgrade",
            "that reproduces once in ten runs", "found by a fuzz test", "with a failing CI check",
            "that slows every request", "flagged by the on-call engineer"]
VERBS = ["Fix", "Resolve", "Track down", "Patch", "Repair"]
DISTRACTORS = ["The ticket was filed on a Friday.", "The reporter prefers dark mode.",
               "The team lunch is at noon.", "The office plants were watered today.",
               "The issue tracker was migrated last year.", "The component's logo is blue."]
EXTRA_CATEGORIES = ["timezone handling", "unicode normalization", "memory leak",
                    "dependency upgrade", "permission check", "pagination bug"]
DIFFICULTY_MIX = [("hard", 0.5), ("medium", 0.38), ("easy", 0.12)]
MAX_DEPTH_SHARE = 0.6


def sample_task(rng: random.Random, task_difficulty: str | None = None,
                files: int | None = None) -> dict:
    """The environment's outcome model: skill + 0.35 - hardness, clipped to [0.02, 0.98]."""
    d = task_difficulty or rng.choice(["easy", "medium", "hard"])
    f = files or {"easy": 1, "medium": rng.randint(2, 3), "hard": rng.randint(3, 6)}[d]
    hardness = {"easy": 0.0, "medium": 0.25, "hard": 0.5}[d] + 0.03 * f
    per_model = {m: {"resolved": rng.random() < max(0.02, min(0.98, skill + 0.35 - hardness)),
                     "cost": round(cost * (1 + f / 4), 4)} for m, (skill, cost) in MODELS.items()}
    return {"task_difficulty": d, "files_touched": f, "per_model": per_model}


def features(task: dict, distractor: bool) -> list[str]:
    s = solved(task)
    f = []
    if task["files_touched"] >= 3:
        f.append("multi_file")
    if task["task_difficulty"] == "hard":
        f.append("hard_task")
    if len(s) >= 2:
        f.append("cost_tiebreak")
    if not s:
        f.append("no_solver")
    if s == {LARGE}:
        f.append("strong_model_needed")
    if distractor:
        f.append("distractor_detail")
    return f


def difficulty(feats: list[str]) -> str:
    return "hard" if len(feats) >= 3 else "medium" if len(feats) == 2 else "easy"


def render(task: dict, task_id: str, category: str, rng: random.Random, distractor: bool) -> str:
    text = (f"Task {task_id}: {rng.choice(VERBS)} a {task['task_difficulty']} {category} issue "
            f"in the {rng.choice(COMPONENTS)} {rng.choice(SYMPTOMS)}; it touches "
            f"{task['files_touched']} file(s).")
    if distractor:
        text += " " + rng.choice(DISTRACTORS)
    return text + f" Category: {category}. Files touched: {task['files_touched']}."


def generate(weakness: dict, skeletons: list[dict], out: str = "dataset.jsonl", seed: int = 0,
             skeleton_share: float = 0.4, prior: list[str] = ()) -> list[dict]:
    """Rows for the weakness report's allocations. `skeletons` are failed train tasks
    ({"source": "train_step_S_idx_I", "info": {task_difficulty/difficulty, files_touched}}):
    a skeleton paraphrase keeps the failed task's difficulty and size, redraws its outcomes
    into the bucket's pattern and changes its cover story. Where buckets no failed task fits
    hold much of the plan, the others carry the skeleton share
    (generators.core.rows_over_skeleton_floor)."""
    plan = list(bucket_plan(weakness, BUCKETS, "model_router"))
    return rows_over_skeleton_floor(lambda shares: _rows(skeletons, out, seed, plan, shares, prior),
                                    plan, skeleton_share)


def _rows(skeletons: list[dict], out: str, seed: int, plan: list, skeleton_shares: dict, prior) -> tuple:
    """One pass of `generate`: (its rows, unwritten; rows made per bucket; of them from skeletons)."""
    rng = random.Random(seed)
    writer = RowWriter(out)
    seen: set = prior_clone_keys(prior)
    usable = [s for s in skeletons if s.get("info", {}).get("files_touched")]
    serial = 0
    made: dict = {}
    from_skeletons: dict = {}
    for key, constraint, target in plan:
        skeleton_share = skeleton_shares[key]
        quota = BucketQuota(seen, MAX_DEPTH_SHARE)
        skel_misses = 0
        while quota.made < target:
            quota.attempt(key, target)
            want = draw_difficulty(rng, DIFFICULTY_MIX)
            # as in the StockArithmetic family: when no failed skeleton fits this bucket's
            # outcome pattern (say, only multi-file tasks failed), fresh tasks fill it
            use_skeleton = bool(usable) and skel_misses < 5000 and quota.skeleton_due(rng, skeleton_share)
            if use_skeleton:
                sk = rng.choice(usable)
                info = sk["info"]
                task = sample_task(rng, info.get("difficulty"), info["files_touched"])
                source = f"skeleton:{sk['source']}"
            else:
                task, source = sample_task(rng), f"template:{key[1]}"
            if not constraint(task):
                skel_misses += use_skeleton
                continue
            distractor = rng.random() < 0.45
            feats = features(task, distractor)
            if difficulty(feats) != want:
                continue
            dp = task["files_touched"]
            if not quota.depth_ok(dp):
                continue
            category = rng.choice(CATEGORIES + EXTRA_CATEGORIES)
            serial += 1
            question = render(task, f"gen-{seed}-{serial:05d}", category, rng, distractor)
            if not quota.claim(question, dp, use_skeleton):
                continue
            oracle = oracle_pick(task["per_model"])
            writer.add(question, oracle, {
                "domain": key[0], "sub_domain": key[1], "difficulty": want,
                "structural_features": feats, "source": source,
                "reasoning": f"<model>{oracle}</model>", "reasoning_depth": dp,
                "per_model": task["per_model"], "category": category,
                "task_difficulty": task["task_difficulty"], "files_touched": task["files_touched"],
            })
        made[key], from_skeletons[key] = quota.made, quota.from_skeletons
    return writer, made, from_skeletons


FAMILY = Family(
    module=__name__, buckets=BUCKETS, feature_definitions=FEATURE_DEFINITIONS,
    structure_of=structure_of, skeleton=skeleton, data_plan=DATA_PLAN, generate=generate)
