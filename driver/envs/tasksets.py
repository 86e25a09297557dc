"""The taskset side of the environment seam (verifiers v1, prime-rl >= v0.8.1): the same jobs as
envs.py's classic scripts (introspection, row counts, train resamples, gate scoring, eval
fingerprints) done on a `vf.Taskset`, and generated environments as taskset packages.

Every script runs in the interpreter that trains (prime-rl's venv), as the classic ones do; the
driver never imports verifiers. A taskset selects its split with a config field (`split`, or
`dataset_split`); the driver trains on "train", reports on "test" and selects on "validation"
when the taskset has one. Eval tasks are only counted and fingerprinted, never printed.
"""
from __future__ import annotations

from driver.gates import accuracy, decontam

KIND = "taskset"
SPLIT_FIELDS = ("split", "dataset_split")
TRAIN_SPLIT, EVAL_SPLITS, SELECTION_SPLITS = "train", ("test", "eval"), ("validation", "val", "dev")

# Shared by every taskset script: the split names, loading a taskset by id with config fields,
# and a task's text.
PRELUDE = f"""
SPLIT_FIELDS, TRAIN_SPLIT = {SPLIT_FIELDS!r}, {TRAIN_SPLIT!r}
EVAL_SPLITS, SELECTION_SPLITS = {EVAL_SPLITS!r}, {SELECTION_SPLITS!r}
""" + r'''
import asyncio, json, sys, typing
import verifiers.v1 as vf
from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

def load(taskset_id, fields):
    return taskset_class(taskset_id)(taskset_config_type(taskset_id)(id=taskset_id, **fields))

def role(m):
    return m.get("role") if isinstance(m, dict) else getattr(m, "role", None)

def text_of(prompt):
    if isinstance(prompt, str) or prompt is None:
        return prompt or ""
    users = [m for m in prompt if role(m) == "user"]
    if not users:
        return ""
    c = users[-1].get("content") if isinstance(users[-1], dict) else users[-1].content
    return c if isinstance(c, str) else json.dumps(c, default=str)

def data_fields(task_cls):
    return list(task_cls.data_type().model_fields)

def trace_for(task, reply):
    from verifiers.v1.trace import TraceTask
    t = vf.Trace(task=TraceTask(type=type(task).__name__, data=task.data.model_dump(mode="json"),
                                key=task.key), agent=vf.AgentInfo(config={}))
    t.nodes.append(vf.MessageNode(message=vf.UserMessage(content=text_of(task.data.prompt))))
    t.nodes.append(vf.MessageNode(message=vf.AssistantMessage(content=reply), sampled=True, parent=0))
    return t

def row_of(task):
    d = task.data
    return {"question": text_of(d.prompt), "answer": str(getattr(d, "answer", "") or ""),
            "info": getattr(d, "info", None) or {}}
'''

_INTROSPECT = PRELUDE + r'''
taskset_id, env_args = sys.argv[1], json.loads(sys.argv[2])
cls, cfg_type = taskset_class(taskset_id), taskset_config_type(taskset_id)
fields = cfg_type.model_fields
split_field = next((f for f in SPLIT_FIELDS if f in fields), None)
if split_field is None:
    sys.exit(f"taskset {taskset_id} has no split field ({', '.join(SPLIT_FIELDS)}): the driver "
             "needs train tasks apart from eval tasks")
choices = [c for c in typing.get_args(fields[split_field].annotation) if isinstance(c, str)]
def size(split):
    try:
        return sum(1 for _ in load(taskset_id, {**env_args, split_field: split}))
    except Exception:
        return 0
def first(names):
    for s in names:
        if (not choices or s in choices) and size(s):
            return s
    return None
train_split = TRAIN_SPLIT
eval_split = first(EVAL_SPLITS)
selection_split = first(SELECTION_SPLITS) if eval_split else None
if eval_split is None:       # a taskset with train + validation only: validation is the eval split
    eval_split, selection_split = first(SELECTION_SPLITS), None
if eval_split is None or not size(train_split):
    sys.exit(f"taskset {taskset_id} needs a {TRAIN_SPLIT!r} split and one of "
             f"{EVAL_SPLITS + SELECTION_SPLITS} (its {split_field} field: {choices or 'free text'})")
train = list(load(taskset_id, {**env_args, split_field: train_split}))
task = train[0]
rewards = [{"name": fn.__name__, "weight": float(getattr(fn, "_vf_weight", 1.0)),
            "rubric_class": type(task).__name__} for fn in task.hooks("reward")]
metrics = [{"name": fn.__name__, "weight": 0.0, "rubric_class": type(task).__name__}
           for fn in task.hooks("metric")]
ev = load(taskset_id, {**env_args, split_field: eval_split})
print("@@HUB@@" + json.dumps({
    "kind": "taskset",
    "env_class": cls.__name__, "env_module": cls.__module__,
    "parser_class": None, "parser_module": None,
    "rubric_class": type(task).__name__, "rubric_funcs": rewards + metrics,
    "system_prompt": task.data.system_prompt or "",
    "train_size": len(train), "eval_size": sum(1 for _ in ev),
    "train_columns": data_fields(type(task)),
    "sample_train_rows": [row_of(t) for t in train[:3]],
    "split_field": split_field,
    "train_args": {split_field: train_split}, "eval_args": {split_field: eval_split},
    "selection": ({"args": {**env_args, split_field: selection_split}, "split": selection_split,
                   "size": size(selection_split)} if selection_split else None),
    "info_keys_read": None,
}, default=str))
ds = [row_of(t) for t in ev]
''' + decontam.FINGERPRINT_ROWS_BODY

_COUNT = PRELUDE + r'''
print("@@ROWS@@", sum(1 for _ in load(sys.argv[1], {})))
'''

# Script text shared with envs.py's classic resample: `picks` = n indices into `train`, seeded by
# `seed`, without replacement until the split runs out.
SEEDED_PICKS = r'''
rng = random.Random(seed)
order = list(range(len(train)))
rng.shuffle(order)
picks = [order[i % len(order)] for i in range(n)]
'''

_SAMPLE_TRAIN = PRELUDE + r'''
import random
taskset_id, fields, n, seed, dest = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
train = list(load(taskset_id, fields))
''' + SEEDED_PICKS + r'''with open(dest, "w", encoding="utf-8") as f:
    for i in picks:
        f.write(json.dumps(row_of(train[i]), default=str) + "\n")
print("@@ROWS@@", len(picks))
'''

# the ACCURATE gate on a taskset: each generated row becomes a task of the hub's own Task class
# (its data type, its rewards) and its info.reasoning is scored as the reply
_SCORE_ROWS = PRELUDE + r'''
taskset_id, fields, dataset, system = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
task_cls = taskset_class(taskset_id).task_type()
data_cls = task_cls.data_type()
known = data_cls.model_fields
probe = task_cls(data_cls(**{k: v for k, v in {"idx": 0, "prompt": "", "answer": "", "info": {}}.items() if k in known}))
ceiling = sum(float(getattr(fn, "_vf_weight", 1.0)) for fn in probe.hooks("reward")
              if float(getattr(fn, "_vf_weight", 1.0)) > 0)
''' + accuracy.READ_REASONED_ROWS + r'''async def score(n, row):
    errors = []
    try:
        values = {"idx": n, "prompt": str(row.get("question", "")), "system_prompt": system or None,
                  "answer": str(row.get("answer", "")), "info": row["info"]}
        task = task_cls(data_cls(**{k: v for k, v in values.items() if k in known}))
        trace = trace_for(task, row["info"]["reasoning"])
        await task.score(trace)
        reward = float(trace.reward)
    except Exception as e:
        cause = e.__cause__ or e
        reward, errors = 0.0, [f"{type(cause).__name__}: {cause}"[:300]]
    return {"line": n, "template": [row["info"].get("domain"), row["info"].get("sub_domain")],
            "reward": reward, "errors": errors}
async def run():
    return [await score(n, r) for n, r in rows]
print("@@ACC@@" + json.dumps({"ceiling": ceiling, "rows": asyncio.run(run())}))
'''

_EVAL_SIDE = PRELUDE + r'''
ds = [row_of(t) for t in load(sys.argv[1], json.loads(sys.argv[2]))]
''' + decontam.FINGERPRINT_ROWS_BODY

SCRIPTS = {"introspect": _INTROSPECT, "count": _COUNT, "sample_train": _SAMPLE_TRAIN,
           "score_rows": _SCORE_ROWS, "eval_side": _EVAL_SIDE}


def train_fields(hub: dict) -> dict:
    return {**(hub.get("env_args") or {}), **(hub.get("train_args") or {})}


def eval_fields(hub: dict) -> dict:
    return {**(hub.get("env_args") or {}), **(hub.get("eval_args") or {})}


def package_templates(hub: dict) -> tuple[str, str, dict]:
    """(pyproject template, module template, its values) of a generated taskset package: its
    one Taskset yields tasks of the hub taskset's own Task class (its rewards, stops and
    metrics by construction) built from the generated rows."""
    return ("current/taskset_pyproject.toml.j2", "current/taskset_module.py.j2",
            {"hub_taskset_id": hub["env_id"], "system_prompt": hub.get("system_prompt") or ""})


def script(name: str) -> str:
    return SCRIPTS[name]

