"""The env-side jobs on a classic verifiers environment (verifiers <= 0.3.1: `load_environment`,
a parser, a rubric of weighted reward functions).

Each job takes the request dict that driver/envs/envside.py sends and returns its response
dict; call.py runs them. Eval rows are only counted and fingerprinted, never returned.
"""
from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging

import episodes
import fingerprint
import hub_parts
import row_truth
import rows
import verifiers as vf

# the splits a best checkpoint may be chosen on, first found first (taskset.py's own list)
SELECTION_SPLITS = ("selection", "validation", "val", "dev")


def _load(req: dict):
    return vf.load_environment(req["env_id"], **(req.get("env_args") or {}))


def _train(env):
    return env.get_dataset() if hasattr(env, "get_dataset") else env.dataset


def _funcs(rubric) -> list[dict]:
    if hasattr(rubric, "rubrics"):
        out = []
        for r in rubric.rubrics:
            out += _funcs(r)
        return out
    names = [getattr(f, "__name__", repr(f)) for f in getattr(rubric, "funcs", getattr(rubric, "reward_funcs", []))]
    weights = list(getattr(rubric, "weights", getattr(rubric, "reward_weights", [])))
    return [{"name": n, "weight": float(w), "rubric_class": type(rubric).__name__} for n, w in zip(names, weights)]


def _weights(rubric) -> list[float]:
    if hasattr(rubric, "rubrics"):
        return [w for r in rubric.rubrics for w in _weights(r)]
    return list(getattr(rubric, "weights", getattr(rubric, "reward_weights", [])))


# the metric-only rubrics verifiers adds beside an env's own (a multi-turn env's, a tool env's)
MONITOR_RUBRICS = ("MultiTurnMonitorRubric", "ToolMonitorRubric")


def _own_rubric_class(rubric) -> str:
    """The env's own rubric: verifiers groups it with its monitor rubrics (MONITOR_RUBRICS)."""
    if hasattr(rubric, "rubrics"):
        own = [r for r in rubric.rubrics if type(r).__name__ not in MONITOR_RUBRICS]
        if len(own) == 1:
            return type(own[0]).__name__
    return type(rubric).__name__


def _selection(req: dict) -> dict | None:
    """A selection split: the env's loader takes eval_split and has a split named for choosing
    behind it, the first of SELECTION_SPLITS that loads (its size is read, none of its rows)."""
    env_id, env_args = req["env_id"], req.get("env_args") or {}
    try:
        mod = importlib.import_module(req["module"])
        if "eval_split" not in inspect.signature(mod.load_environment).parameters or "eval_split" in env_args:
            return None
        for split in SELECTION_SPLITS:
            try:
                n_sel = len(vf.load_environment(env_id, **{**env_args, "eval_split": split}).get_eval_dataset())
            except Exception:  # noqa: BLE001, S112 - that split does not load: try the next
                continue
            if n_sel:
                return {"args": {**env_args, "eval_split": split}, "split": split, "size": n_sel}
    except Exception:  # noqa: BLE001 - no selection split is a valid answer
        return None
    return None


class _Recorder(dict):
    """An info dict that records every key looked up in it into `seen`."""

    def __init__(self, info: dict, seen: set):
        super().__init__(info)
        self.seen = seen

    def __getitem__(self, k):
        self.seen.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self.seen.add(k)
        return super().get(k, default)

    def __contains__(self, k):
        self.seen.add(k)
        return super().__contains__(k)


def _info_keys_read(env, train) -> list[str] | None:
    """The info keys the rubric reads: sample train rows scored (their answer as the completion,
    the messages verifiers' own objects, as a rollout hands them to a reward) with an info that
    records every key looked up; None where scoring cannot run this way."""
    seen: set = set()
    try:
        from verifiers.types import State

        for i in range(min(3, len(train))):
            row = train[i]
            st = State(input={"prompt": episodes.as_messages(row.get("prompt") or []),
                              "answer": str(row.get("answer", "")),
                              "info": _Recorder(row.get("info") or {}, seen), "example_id": i, "task": "default"})
            st["completion"] = episodes.as_messages([{"role": "assistant", "content": str(row.get("answer", ""))}])
            st["trajectory"] = []
            asyncio.run(env.rubric.score_rollout(st))
        return sorted(map(str, seen))
    except Exception:  # noqa: BLE001 - this rubric cannot be scored this way: unknown
        return None


def _generated_env_class(env) -> dict:
    """The class a generated env of this hub is built on, and why: the choice the generated
    module makes at load time (both read hub_parts.env_class)."""
    cls, why = hub_parts.env_class(env)
    return {"class": cls.__name__ if cls else None, "module": cls.__module__ if cls else None, "why": why}


def introspect(req: dict) -> dict:
    """{"hub": hub_env.json's content from the env, "fingerprints": the eval split's}."""
    env = _load(req)
    train = _train(env)
    ev = env.get_eval_dataset()
    samples = []
    for i in range(min(3, len(train))):
        row = train[i]
        samples.append({k: row[k] for k in ("question", "answer", "info") if k in row})
    hub = {
        "env_class": type(env).__name__,
        "env_module": type(env).__module__,
        "distribution": rows.distribution_of(type(env).__module__),
        "parser_class": type(env.parser).__name__,
        "parser_module": type(env.parser).__module__,
        "rubric_class": _own_rubric_class(env.rubric),
        "rubric_funcs": _funcs(env.rubric),
        "system_prompt": env.system_prompt or "",
        "train_size": len(train),
        "eval_size": len(ev),
        "train_columns": list(train.column_names),
        "sample_train_rows": samples,
        "selection": _selection(req),
        "info_keys_read": _info_keys_read(env, train),
        "generated_env_class": _generated_env_class(env),
        "reward_reads_env_state": row_truth.detect(env, train),
        "interaction": episodes.interaction(env, train),
    }
    return {"hub": hub, "fingerprints": fingerprint.fingerprint_rows(ev)}


def count(req: dict) -> dict:
    """How many train rows the installed env builds."""
    return {"rows": len(vf.load_environment(req["env_id"]).get_dataset())}


def sample_train(req: dict) -> dict:
    """A seeded resample of `n` train rows (control C's rows when the env has no family
    generator) written to `dest` as question/answer/info lines. Where the env's reward scores
    against its own state (`scorer_attr`: row_truth.py), each row carries the scorer's entry for
    its answer as info.entry, as a generated row does, so the generated env scores it alike."""
    env = _load(req)
    train = _train(env)
    attr = req.get("scorer_attr")

    def flat(row):
        q = row.get("question")
        if q is None:
            users = [m for m in row.get("prompt") or [] if m.get("role") == "user"]
            q = users[-1]["content"] if users else ""
        info = dict(row.get("info") or {})
        if attr:   # raises where the env holds no entry for the row: no such row can be scored
            info[row_truth.ENTRY] = row_truth.plain(row_truth.entry_of(env, attr, row.get("answer")))
        return {"question": q, "answer": row.get("answer", ""), "info": info}

    picks = rows.seeded_picks(len(train), req["n"], req["seed"])
    return {"rows": rows.write_jsonl(req["dest"], (flat(train[i]) for i in picks))}


class _Catch(logging.Handler):
    """A reward function's exception reaches only the log: keep its text for the gate."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage()[:300])


def score_rows(req: dict) -> dict:
    """The ACCURATE gate: the env's rubric scores each generated row's info.reasoning as the
    completion; where a reward reads the env's own state (row_truth.py), the rubric the generated
    env gets, which scores that reward from the row's info.entry. {"ceiling": the sum of the
    positive weights, "rows": [{"line", "template", "reward", "errors"}]}."""
    from verifiers.types import State

    env = _load(req)
    record = req.get("reward_reads_env_state")
    if record is None:   # not recorded (validate --env, an older hub_env.json): look now
        record = row_truth.detect(env, _train(env))
    if record.get("verdict") == "yes" and record.get("scorer"):
        # the generated env's rubric: the hub's scorer on each row's info.entry (row_truth.py)
        row_truth.swap(env, env.rubric, record)
    ceiling = sum(w for w in _weights(env.rubric) if w > 0)
    catch = _Catch()
    logging.getLogger().addHandler(catch)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("verifiers"):
            logging.getLogger(name).addHandler(catch)
    reasoned = rows.read_reasoned_rows(req["dataset"])
    system = [{"role": "system", "content": env.system_prompt}] if env.system_prompt else []
    if episodes.kind(env) != "single_turn":
        return {"ceiling": ceiling, "rows": [_play_row(env, system, n, row, catch, ceiling) for n, row in reasoned]}

    async def score(n, row):
        catch.messages = []
        if not isinstance(row["info"]["reasoning"], str):
            return {"line": n, "template": [row["info"].get("domain"), row["info"].get("sub_domain")],
                    "reward": 0.0, "errors": ["info.reasoning is a list of replies, and this env is "
                                              "single-turn: it scores one completion (a string)"]}
        st = State(input={"prompt": episodes.as_messages(system + [{"role": "user", "content": str(row.get("question", ""))}]),
                          "answer": str(row.get("answer", "")), "info": row["info"], "example_id": n,
                          "task": "default"})
        st["completion"] = episodes.as_messages([{"role": "assistant", "content": row["info"]["reasoning"]}])
        st["trajectory"] = []
        try:
            await env.rubric.score_rollout(st)
            reward = float(st["reward"])
        except Exception as e:  # noqa: BLE001 - a row's failure is its own, not the job's
            reward, catch.messages = 0.0, catch.messages + [f"{type(e).__name__}: {e}"[:300]]
        return {"line": n, "template": [row["info"].get("domain"), row["info"].get("sub_domain")],
                "reward": reward, "errors": list(dict.fromkeys(catch.messages))[:3]}

    async def run():
        return [await score(n, r) for n, r in reasoned]   # one at a time: errors stay with their row

    return {"ceiling": ceiling, "rows": asyncio.run(run())}


def _play_row(env, system: list, n: int, row: dict, catch, ceiling: float) -> dict:
    """A generated row of a multi-turn env: its replies (info.reasoning, one per turn; a tool
    env's may call tools, which the env runs) played through the env's own turns from the row's
    initial state, the episode scored by the rubric. An episode that ends before its replies run
    out, or needs more, says so; one short of `ceiling` that called tools shows each call's
    result."""
    moves = row["info"]["reasoning"]
    moves = moves if isinstance(moves, list) else [moves]
    catch.messages = []
    prompt = system + [{"role": "user", "content": str(row.get("question", ""))}]
    try:
        ep = episodes.play(env, {"prompt": prompt, "answer": str(row.get("answer", "")),
                                 "info": row["info"], "example_id": n}, episodes.moves_reply(moves), n)
        reward, errors = ep["reward"], list(catch.messages)
        if ep["turns"] < len(moves):
            errors.append(f"the env ended the episode after {ep['turns']} of the {len(moves)} replies "
                          f"({ep['stop_condition']})")
        elif ep["error"] and ep["stop_condition"] == "has_error":
            errors.append(f"the env still wanted a reply after the {len(moves)} given")
        calls = rows.tool_exchanges(ep["completion"])
        if calls and reward < ceiling - 1e-9:
            errors.append("tool calls played: " + "; ".join(
                f"{c['name']}({json.dumps(c['arguments'])}) -> {str(c['result'])[:80]!r}" for c in calls[:4]))
    except Exception as e:  # noqa: BLE001 - a row's failure is its own, not the job's
        reward, errors = 0.0, catch.messages + [f"{type(e).__name__}: {e}"[:300]]
    return {"line": n, "template": [row["info"].get("domain"), row["info"].get("sub_domain")],
            "reward": reward, "errors": list(dict.fromkeys(errors))[:3]}


def eval_fingerprints(req: dict) -> dict:
    """The eval split's fingerprints (fingerprint.py): hashes only, no eval text."""
    return fingerprint.fingerprint_rows(_load(req).get_eval_dataset())


JOBS = {"introspect": introspect, "count": count, "sample_train": sample_train,
        "score_rows": score_rows, "eval_fingerprints": eval_fingerprints}
