"""The env-side jobs on a verifiers v1 taskset (verifiers >= 0.3.1's `verifiers.v1`, prime-rl
>= v0.8.1): the same jobs as classic.py, done on a `vf.Taskset` and its Task class.

A taskset selects its split with a config field (`split`, or `dataset_split`); the driver trains
on "train", reports on "test" and selects on "selection" (else "validation") when the taskset has one. Eval tasks
are only counted and fingerprinted, never returned. Only this module imports verifiers.v1.
"""
from __future__ import annotations

import asyncio
import json
import typing

import fingerprint
import rows
import verifiers.v1 as vf
from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

SPLIT_FIELDS = ("split", "dataset_split")
TRAIN_SPLIT, EVAL_SPLITS, SELECTION_SPLITS = "train", ("test", "eval"), ("selection", "validation", "val", "dev")


class UnusableTaskset(ValueError):
    """The taskset lacks what the driver needs (a split field, a train split, an eval split)."""


def load(taskset_id: str, fields: dict):
    return taskset_class(taskset_id)(taskset_config_type(taskset_id)(id=taskset_id, **fields))


def _role(m):
    return m.get("role") if isinstance(m, dict) else getattr(m, "role", None)


def text_of(prompt) -> str:
    """A prompt's text: itself when a string, else its last user message's content."""
    if isinstance(prompt, str) or prompt is None:
        return prompt or ""
    users = [m for m in prompt if _role(m) == "user"]
    if not users:
        return ""
    c = users[-1].get("content") if isinstance(users[-1], dict) else users[-1].content
    return c if isinstance(c, str) else json.dumps(c, default=str)


def data_fields(task_cls) -> list[str]:
    return list(task_cls.data_type().model_fields)


def trace_for(task, reply: str):
    """A trace of one user turn (the task's prompt) and `reply` as the sampled assistant turn."""
    from verifiers.v1.trace import TraceTask

    t = vf.Trace(task=TraceTask(type=type(task).__name__, data=task.data.model_dump(mode="json"),
                                key=task.key), agent=vf.AgentInfo(config={}))
    t.nodes.append(vf.MessageNode(message=vf.UserMessage(content=text_of(task.data.prompt))))
    t.nodes.append(vf.MessageNode(message=vf.AssistantMessage(content=reply), sampled=True, parent=0))
    return t


def row_of(task) -> dict:
    d = task.data
    return {"question": text_of(d.prompt), "answer": str(getattr(d, "answer", "") or ""),
            "info": getattr(d, "info", None) or {}}


def _weight(fn) -> float:
    return float(getattr(fn, "_vf_weight", 1.0))


def introspect(req: dict) -> dict:
    """{"hub": hub_env.json's content from the taskset, "fingerprints": its eval split's}."""
    taskset_id, env_args = req["env_id"], req.get("env_args") or {}
    cls, cfg_type = taskset_class(taskset_id), taskset_config_type(taskset_id)
    fields = cfg_type.model_fields
    split_field = next((f for f in SPLIT_FIELDS if f in fields), None)
    if split_field is None:
        raise UnusableTaskset(f"taskset {taskset_id} has no split field ({', '.join(SPLIT_FIELDS)}): "
                              "the driver needs train tasks apart from eval tasks")
    choices = [c for c in typing.get_args(fields[split_field].annotation) if isinstance(c, str)]

    def size(split):
        try:
            return sum(1 for _ in load(taskset_id, {**env_args, split_field: split}))
        except Exception:  # noqa: BLE001 - a split that does not load has no tasks
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
        raise UnusableTaskset(f"taskset {taskset_id} needs a {TRAIN_SPLIT!r} split and one of "
                              f"{EVAL_SPLITS + SELECTION_SPLITS} (its {split_field} field: "
                              f"{choices or 'free text'})")
    train = list(load(taskset_id, {**env_args, split_field: train_split}))
    task = train[0]
    rewards = [{"name": fn.__name__, "weight": _weight(fn), "rubric_class": type(task).__name__}
               for fn in task.hooks("reward")]
    metrics = [{"name": fn.__name__, "weight": 0.0, "rubric_class": type(task).__name__}
               for fn in task.hooks("metric")]
    ev = [row_of(t) for t in load(taskset_id, {**env_args, split_field: eval_split})]
    hub = {
        "kind": "taskset",
        "env_class": cls.__name__, "env_module": cls.__module__,
        "distribution": rows.distribution_of(cls.__module__),
        "parser_class": None, "parser_module": None,
        "rubric_class": type(task).__name__, "rubric_funcs": rewards + metrics,
        "system_prompt": task.data.system_prompt or "",
        "train_size": len(train), "eval_size": len(ev),
        "train_columns": data_fields(type(task)),
        "sample_train_rows": [row_of(t) for t in train[:3]],
        "split_field": split_field,
        "train_args": {split_field: train_split}, "eval_args": {split_field: eval_split},
        "selection": ({"args": {**env_args, split_field: selection_split}, "split": selection_split,
                       "size": size(selection_split)} if selection_split else None),
        "info_keys_read": None,
    }
    return {"hub": hub, "fingerprints": fingerprint.fingerprint_rows(ev)}


def count(req: dict) -> dict:
    """How many tasks the installed taskset builds (its default config)."""
    return {"rows": sum(1 for _ in load(req["env_id"], {}))}


def sample_train(req: dict) -> dict:
    """A seeded resample of `n` train tasks written to `dest` as question/answer/info lines
    (`env_args`: the config fields that select the train split)."""
    train = list(load(req["env_id"], req.get("env_args") or {}))
    picks = rows.seeded_picks(len(train), req["n"], req["seed"])
    return {"rows": rows.write_jsonl(req["dest"], (row_of(train[i]) for i in picks))}


def score_rows(req: dict) -> dict:
    """The ACCURATE gate on a taskset: each generated row becomes a task of the hub's own Task
    class (its data type, its rewards) and its info.reasoning is scored as the reply."""
    task_cls = taskset_class(req["env_id"]).task_type()
    data_cls = task_cls.data_type()
    known = data_cls.model_fields
    system = req.get("system_prompt") or ""
    probe = task_cls(data_cls(**{k: v for k, v in {"idx": 0, "prompt": "", "answer": "", "info": {}}.items()
                                 if k in known}))
    ceiling = sum(_weight(fn) for fn in probe.hooks("reward") if _weight(fn) > 0)

    async def score(n, row):
        errors = []
        try:
            values = {"idx": n, "prompt": str(row.get("question", "")), "system_prompt": system or None,
                      "answer": str(row.get("answer", "")), "info": row["info"]}
            task = task_cls(data_cls(**{k: v for k, v in values.items() if k in known}))
            trace = trace_for(task, row["info"]["reasoning"])
            await task.score(trace)
            reward = float(trace.reward)
        except Exception as e:  # noqa: BLE001 - a row's failure is its own, not the job's
            cause = e.__cause__ or e
            reward, errors = 0.0, [f"{type(cause).__name__}: {cause}"[:300]]
        return {"line": n, "template": [row["info"].get("domain"), row["info"].get("sub_domain")],
                "reward": reward, "errors": errors}

    async def run():
        return [await score(n, r) for n, r in rows.read_reasoned_rows(req["dataset"])]

    return {"ceiling": ceiling, "rows": asyncio.run(run())}


def eval_fingerprints(req: dict) -> dict:
    """The eval split's fingerprints (`env_args`: the config fields that select it)."""
    return fingerprint.fingerprint_rows([row_of(t) for t in load(req["env_id"], req.get("env_args") or {})])


JOBS = {"introspect": introspect, "count": count, "sample_train": sample_train,
        "score_rows": score_rows, "eval_fingerprints": eval_fingerprints}
