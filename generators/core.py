"""Row writing, seeded sampling, the round-trip check and the cold-read audit."""
from __future__ import annotations

import asyncio
import json
import random
import re
from pathlib import Path

_NUM = re.compile(r"\d+(?:\.\d+)?")
_NAME = re.compile(r"(?<=[a-z,;:] )[A-Z][a-z]+")


def clone_key(question: str) -> str:
    """Equal keys = clones: numbers and proper names masked ("Sally->Sarah, 5->7" is a clone).
    The dataset gate uses this same function, so a generator can avoid clones up front."""
    q = _NUM.sub("#", question)
    q = _NAME.sub("NAME", q)
    return re.sub(r"\s+", " ", q).strip().lower()


def prior_clone_keys(paths) -> set[str]:
    keys: set[str] = set()
    for p in paths:
        if Path(p).exists():
            with open(p, encoding="utf-8") as f:
                keys |= {clone_key(json.loads(line)["question"]) for line in f if line.strip()}
    return keys


# the required info keys of driver.gates.rules.ROW_FIELDS (generators never import the driver;
# a test holds the two equal)
REQUIRED_INFO = ("domain", "sub_domain", "difficulty", "structural_features", "source", "reasoning")


def bucket_plan(weakness: dict, buckets: dict, family: str):
    """(key, constraint, target rows) for each (domain, sub_domain) of the weakness report, in
    the report's order. A bucket with no template is an error naming the family to extend."""
    for dom in weakness["domains"]:
        for sub in dom["sub_domains"]:
            key = (dom["name"], sub["name"])
            if key not in buckets:
                raise ValueError(f"no template for bucket {key}; add one to generators.{family}")
            yield key, buckets[key], weakness["allocations"][f"{key[0]} / {key[1]}"]


def draw_difficulty(rng: random.Random, mix: list[tuple[str, float]]) -> str:
    """The difficulty the next row is to have, drawn from the family's (label, weight) mix."""
    return rng.choices([d for d, _ in mix], [w for _, w in mix])[0]


class BucketQuota:
    """One bucket's bookkeeping: no reasoning depth above max_depth_share (checked once the
    bucket has 10 rows), no clone of any row already claimed (`seen` is shared across buckets
    and pre-filled with prior iterations' clone keys), the rows made from failed skeletons, and
    the tries, bounded so that a template that cannot reach its target says so."""

    def __init__(self, seen: set, max_depth_share: float):
        self.seen, self.max_share = seen, max_depth_share
        self.depths: dict = {}
        self.made = self.from_skeletons = self.attempts = 0

    def attempt(self, key, target: int, limit: int = 20000) -> None:
        """Count a try at the bucket's next row: more than `limit` tries a row stops the run."""
        self.attempts += 1
        if self.attempts > target * limit:
            raise RuntimeError(f"template {key} cannot reach {target} rows")

    def skeleton_due(self, rng: random.Random, share: float) -> bool:
        """Whether the next row paraphrases a failed skeleton: always while the bucket's rows
        from skeletons are behind `share` of its rows, else with probability `share`."""
        return self.from_skeletons < share * (self.made + 1) or rng.random() < share

    def depth_ok(self, depth) -> bool:
        return self.made < 10 or (self.depths.get(depth, 0) + 1) / (self.made + 1) <= self.max_share

    def claim(self, question: str, depth, from_skeleton: bool = False) -> bool:
        key = clone_key(question)
        if key in self.seen:
            return False
        self.seen.add(key)
        self.depths[depth] = self.depths.get(depth, 0) + 1
        self.made += 1
        self.from_skeletons += from_skeleton
        return True


# The gate's skeleton-source line (driver/gates/rules.py MIN_SKELETON). A generator runs in the
# teacher's interpreter and imports nothing of the driver, so the share is stated here as well;
# tests/test_gate.py holds the two equal.
SKELETON_FLOOR = 0.30


def spread_skeleton_share(share: float, made: dict, from_skeletons: dict) -> dict | None:
    """Per bucket, the skeleton share for a second pass when a first one fell under the gate's
    floor because some buckets fit no failed skeleton at all (`from_skeletons` 0 there): the
    buckets that took one carry the dataset's `share` for the others, share x total / their
    total, at most 1. None where the first pass cleared the floor or no bucket took one."""
    total = sum(made.values())
    if not total or sum(from_skeletons.values()) >= SKELETON_FLOOR * total:
        return None
    able = [k for k, n in from_skeletons.items() if n]
    able_total = sum(made[k] for k in able)
    if not able_total:
        return None
    lifted = min(1.0, share * total / able_total)
    return {k: (lifted if k in able else share) for k in made}


def rows_over_skeleton_floor(one_pass, plan: list, share: float) -> list[dict]:
    """The rows `one_pass(shares)` makes (shares: the skeleton share per bucket key of `plan`,
    bucket_plan's list; it returns (its RowWriter, rows made per bucket, of them from
    skeletons)), written to the writer's file: made once at `share` in every bucket, and made
    again with spread_skeleton_share's shares where that pass fell under the gate's floor
    because some buckets fit no failed skeleton. A pass that cleared the floor is kept as it
    was made."""
    writer, made, from_skeletons = one_pass({key: share for key, _, _ in plan})
    spread = spread_skeleton_share(share, made, from_skeletons)
    if spread:
        writer, _, _ = one_pass(spread)
    writer.write()
    return writer.rows


def seeded_rng(seed: int, *salt) -> random.Random:
    return random.Random("|".join(str(s) for s in (seed, *salt)))


class RowWriter:
    """Writes the seed's row schema: question, answer, info{domain, sub_domain, difficulty,
    structural_features, source, reasoning, reasoning_depth, ...} (driver.gates.rules)."""

    def __init__(self, path: str | Path = "dataset.jsonl"):
        self.path = Path(path)
        self.rows: list[dict] = []

    def add(self, question: str, answer: str, info: dict) -> None:
        missing = [k for k in REQUIRED_INFO if k not in info]
        if missing:
            raise ValueError(f"row info lacks {missing}")
        self.rows.append({"question": question, "answer": str(answer), "info": info})

    def write(self) -> int:
        tmp = self.path.with_suffix(".jsonl.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row) + "\n" for row in self.rows)
        tmp.replace(self.path)
        return len(self.rows)


def round_trip(env_id: str, rows: list[dict], per_template: int = 5, env_args: dict | None = None) -> None:
    """Score `info.reasoning` of `per_template` rows per (domain, sub_domain) with the hub env's
    own scoring (a v1 taskset's Task rewards where `env_id` is a taskset, else the classic
    env's rubric); every one must earn the full reward. A mismatch raises, naming the template,
    so the template gets fixed rather than the rows patched."""
    picked: dict = {}
    for row in rows:
        key = (row["info"]["domain"], row["info"]["sub_domain"])
        picked.setdefault(key, [])
        if len(picked[key]) < per_template:
            picked[key].append(row)
    score, ceiling = _classic_scorer(env_id, env_args) or _taskset_scorer(env_id)

    async def run():
        return {key: [await score(r) for r in rs] for key, rs in picked.items()}

    results = asyncio.run(run())
    for key, rewards in results.items():
        bad = [r for r in rewards if r < ceiling - 1e-9]
        if bad:
            raise AssertionError(
                f"round-trip failed for template {key[0]} / {key[1]}: the hub rubric gave "
                f"{bad} to the template's own reasoning (expected {ceiling}). Fix the template.")


def module_name(env_id: str) -> str:
    """An env id's Python module, by verifiers' own rule: owner prefix and @version dropped,
    dashes to underscores."""
    return env_id.split("/")[-1].split("@")[0].replace("-", "_")


def _classic_scorer(env_id: str, env_args: dict | None):
    """(score, ceiling) with the classic env's rubric, or None where there is no classic form
    (verifiers >= 0.4, or a module without load_environment: a v1 taskset)."""
    import importlib

    import verifiers as vf

    if not hasattr(vf, "SingleTurnEnv") or not hasattr(importlib.import_module(module_name(env_id)),
                                                       "load_environment"):
        return None
    from verifiers.types import State

    env = vf.load_environment(env_id, **(env_args or {}))
    # a reward that scores against the env's own data (ReasoningGymEnv's kind) cannot score a
    # generated row's answer: score it as the generated env will, from the row's info.entry
    from driver.envside import row_truth

    record = row_truth.detect(env, list(env.get_dataset())[:row_truth.SAMPLE_ROWS * 4])
    if record.get("verdict") == "yes" and record.get("scorer"):
        row_truth.swap(env, env.rubric, record)

    async def score(row):
        st = State(input={"prompt": [{"role": "user", "content": row["question"]}],
                          "answer": row["answer"], "info": row["info"], "example_id": 0})
        st["completion"] = [{"role": "assistant", "content": row["info"]["reasoning"]}]
        st["trajectory"] = []
        await env.rubric.score_rollout(st)
        return st["reward"]

    return score, sum(w for w in _weights(env.rubric) if w > 0)


def _taskset_scorer(env_id: str):
    """(score, ceiling) with the Task class of the v1 taskset `env_id`, or None when `env_id`
    is not a taskset (no verifiers.v1, or its module exports no Taskset)."""
    try:
        import verifiers.v1 as vf
        from verifiers.v1.trace import TraceTask
        from verifiers.v1.utils.loaders import taskset_class

        task_cls = taskset_class(env_id).task_type()
    except Exception:  # noqa: BLE001 - any failure here means `env_id` is not a taskset
        return None
    data_cls = task_cls.data_type()

    def task_of(row):
        values = {"idx": 0, "prompt": row["question"], "answer": row["answer"], "info": row["info"]}
        return task_cls(data_cls(**{k: v for k, v in values.items() if k in data_cls.model_fields}))

    async def score(row):
        task = task_of(row)
        trace = vf.Trace(task=TraceTask(type=task_cls.__name__, data=task.data.model_dump(mode="json"),
                                        key=task.key), agent=vf.AgentInfo(config={}))
        trace.nodes.append(vf.MessageNode(message=vf.UserMessage(content=row["question"])))
        trace.nodes.append(vf.MessageNode(message=vf.AssistantMessage(content=row["info"]["reasoning"]),
                                          sampled=True, parent=0))
        await task.score(trace)
        return trace.reward

    probe = task_of({"question": "", "answer": "", "info": {}})
    weights = [float(getattr(fn, "_vf_weight", 1.0)) for fn in probe.hooks("reward")]
    return score, sum(w for w in weights if w > 0)


def _weights(rubric) -> list[float]:
    if hasattr(rubric, "rubrics"):
        return [w for r in rubric.rubrics for w in _weights(r)]
    return list(getattr(rubric, "weights", []))


def cold_read(rows: list[dict], n: int = 20, seed: int = 0) -> str:
    """Twenty random rows, printed in full for the teacher to read cold."""
    rng = random.Random(seed)
    sample = rng.sample(rows, min(n, len(rows)))
    return "\n\n".join(f"[{r['info']['domain']} / {r['info']['sub_domain']} / "
                       f"{r['info']['difficulty']}]\nQ: {r['question']}\nA: {r['answer']}"
                       for r in sample)
