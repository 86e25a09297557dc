"""The env-side job that asks whether the embedded trainer can build its built-in student
(`builtin:tiny-char-qwen2?...`, embedded_trainer/recipe.py) for an environment, before a run
directory exists: `driver resume` cannot change a run's --model, so a student that cannot be
built is refused by `driver run` instead of failing iter_0.

A recipe is built from the settings it names, cached under a directory keyed by them and by the
env (recipe.model_dir_name), or shipped prebuilt. Where no built one exists the build needs, by
its corpus: `stream`, a `warm_start_corpus(count, seed, **options)` in the env's package;
`train`, train rows that carry `info.reference_completion`; `solver`, the corpus the second job
here wrote; and with `init=`, the named student built already. The job reports each of these
facts and leaves the verdict to the driver.

The second job (`solver_corpus`) builds that corpus for `driver run --student-solver PATH`: the
user's solver on the env's train rows, scored by the env's own rubric. Both run in the training
interpreter (the embedded trainer's), by path, importing no driver module.
"""
from __future__ import annotations

import importlib
import json

import rows
from row_truth import question_of


def _env_key(env_id: str, env_args: dict) -> str:
    # the key the embedded trainer warm-starts under: its first eval env block (the hub env,
    # with the run's env args) as embedded_trainer/rl.py writes it
    return json.dumps({"id": env_id, "args": env_args}, sort_keys=True)


def _reference_rows(env_id: str, env_args: dict) -> tuple[int | None, int | None, str | None]:
    """(train rows, those with a reference completion, why the env did not load)."""
    try:
        import verifiers as vf

        env = vf.load_environment(env_id, **env_args)
        train = list(env.get_dataset() if hasattr(env, "get_dataset") else env.dataset)
    except Exception as e:  # noqa: BLE001 - the driver's introspection reports a load failure
        return None, None, f"{type(e).__name__}: {e}"
    refs = 0
    for row in train:
        info = rows.info_of(row)
        ref, traj = info.get("reference_completion"), info.get("reference_trajectory")
        refs += (isinstance(ref, str) and bool(ref)) or (isinstance(traj, list) and bool(traj))
    return len(train), refs, None


def check(req: dict) -> dict:
    from embedded_trainer import recipe

    name, env_id, env_args = req["model"], req["env_id"], req.get("env_args") or {}
    out: dict = {"recipe": recipe.is_recipe(name), "known": recipe.RECIPE_PREFIX, "problem": None,
                 "corpus": None, "cached": None, "init": None, "init_found": True,
                 "module": None, "module_found": None, "warm_start_corpus": None,
                 "train_rows": None, "reference_completions": None, "load_error": None,
                 "solver_corpus": None}
    if not out["recipe"]:
        return out
    if name == recipe.RECIPE_PREFIX:   # the bare name: the env's own student, where its package names one
        own = _env_recipe(env_id)
        if own and own != name:
            out["env_recipe"] = name = own
    try:
        spec = recipe.parse_recipe(name)
    except ValueError as e:
        return {**out, "problem": str(e)}
    out["corpus"] = spec["corpus"]
    out["context"] = spec["max_positions"]   # the student's positions (its context, in characters)
    target = recipe.model_dir_name(name, _env_key(env_id, env_args))
    for root in (recipe.cache_root(), recipe.PREBUILT):
        if (root / target / "DONE").exists():
            return {**out, "cached": str(root / target),
                    "context": _positions(root / target) or out["context"]}
    if req.get("estimate"):
        out["build"] = _estimate(recipe, name, env_id, env_args)
    if spec["init"]:
        out["init"] = spec["init"]
        out["init_found"] = any((d / spec["init"] / "DONE").exists()
                                for d in (recipe.cache_root(), recipe.PREBUILT))
        # the build continues from the init student: its architecture, its positions
        out["context"] = next((_positions(d / spec["init"]) for d in (recipe.cache_root(), recipe.PREBUILT)
                               if (d / spec["init"] / "DONE").exists()), None) or out["context"]
    if spec["corpus"] == "solver":   # the corpus --student-solver wrote: all the build reads
        path = recipe.solver_corpus_path(spec["solver"])
        return {**out, "solver_corpus": str(path) if path.exists() else ""}
    # the module the stream corpus is asked for, named as recipe.corpus_rows names it
    module = env_id.split("/")[-1].replace("-", "_")
    out["module"] = module
    try:
        mod = importlib.import_module(module)
        out["module_found"] = True
        out["warm_start_corpus"] = callable(getattr(mod, "warm_start_corpus", None))
    except ImportError:
        out["module_found"] = False
    if spec["corpus"] == "train" or out["warm_start_corpus"] is False:
        # corpus=train reads these; for a stream without a corpus they say whether it would work
        out["train_rows"], out["reference_completions"], out["load_error"] = \
            _reference_rows(env_id, env_args)
    return out


def _positions(model_dir) -> int | None:
    """A built model's max_position_embeddings (its config.json), or None."""
    try:
        got = json.loads((model_dir / "config.json").read_text()).get("max_position_embeddings")
    except (OSError, ValueError):
        return None
    return got if isinstance(got, int) else None


def _env_recipe(env_id: str) -> str | None:
    """The built-in student the env's package names as its own (`STUDENT_RECIPE`), if any."""
    try:
        mod = importlib.import_module(env_id.split("/")[-1].replace("-", "_"))
    except ImportError:
        return None
    own = getattr(mod, "STUDENT_RECIPE", None)
    return own if isinstance(own, str) else None


def _estimate(recipe, name: str, env_id: str, env_args: dict) -> dict | None:
    """What building the student would cost here (recipe.estimate: its parameters, SFT steps,
    seconds a step), or None where its corpus or init= student is missing (reported apart)."""
    import verifiers as vf

    try:
        env = vf.load_environment(env_id, **env_args)
        got = recipe.estimate(name, env, _env_key(env_id, env_args))
    except Exception:  # noqa: BLE001 - a corpus that cannot be read: the other facts say why
        return None
    return got if got.get("examples") else None


def _load_solver(path: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location("student_solver", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _solver_function(mod, path: str, multi_turn: bool):
    """The solver's entry point for the env's kind: solve(question, info) for a single-turn
    env, next_move(messages, info) (called once per turn with the conversation so far) for a
    multi-turn one."""
    name, shape = (("next_move", "next_move(messages: list[dict], info: dict) -> str | None, called "
                    "once per turn with the conversation so far (the env is multi-turn: it answers "
                    "each reply and decides when the episode ends)") if multi_turn else
                   ("solve", "solve(question: str, info: dict) -> str | None"))
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise AttributeError(f"{path} defines no {shape}")
    return fn


def solver_corpus(req: dict) -> dict:
    """`driver run --student-solver PATH`: run the solver's `solve(question, info) -> str | None`
    on every *train* row of the env (never an eval row), score each completion with the env's
    own rubric (the gate's scoring, classic.score_rows, with each completion as the row's
    info.reasoning); on a multi-turn env, play each train row as an episode with the solver's
    `next_move(messages, info)` as every reply, scored over the whole episode (_episode_corpus);
    and write the rows scored at full reward as a warm-start corpus
    (`solver-<hash>.jsonl` under the embedded trainer's corpus cache, keyed by its content), when
    at least the floor passed: min(min_rows, the split) and min_share of the split. The counts
    come back; below the floor nothing is written."""
    import math
    import os
    import tempfile
    import traceback

    import classic
    import episodes
    from embedded_trainer import recipe

    out: dict = {"train_rows": 0, "returned": 0, "kept": 0, "floor": 0, "ceiling": 0.0,
                 "solver_error": None, "multi_turn": False,
                 "raised": 0, "first_raise": None, "misses": [], "digest": None, "path": None}
    env = classic._load(req)
    multi_turn = out["multi_turn"] = episodes.kind(env) != "single_turn"
    try:
        solve = _solver_function(_load_solver(req["solver"]), req["solver"], multi_turn)
    except Exception as e:  # noqa: BLE001 - the user's file: its error goes back as a fact
        out["solver_error"] = "".join(traceback.format_exception_only(type(e), e)).strip()[:1500]
        return out
    train = list(classic._train(env))
    out["train_rows"] = len(train)
    out["floor"] = max(min(req["min_rows"], len(train)), math.ceil(req["min_share"] * len(train)), 1)
    if multi_turn:
        return _episode_corpus(out, env, train, solve, recipe, episodes)
    answered: list[tuple[dict, str]] = []
    for row in train:
        q, info = question_of(row), rows.info_of(row)
        try:
            got = solve(q, dict(info))
        except Exception as e:  # noqa: BLE001 - a row the solver cannot do
            out["raised"] += 1
            out["first_raise"] = out["first_raise"] or f"{type(e).__name__}: {e}"[:300]
            continue
        if isinstance(got, str) and got:
            answered.append((row, got))
    out["returned"] = len(answered)
    with tempfile.TemporaryDirectory(prefix="student-solver-") as tmp:
        scored_in = os.path.join(tmp, "answered.jsonl")
        rows.write_jsonl(scored_in, ({"question": question_of(row), "answer": row.get("answer", ""),
                                      "info": {**rows.info_of(row), "reasoning": got}}
                                     for row, got in answered))
        # the env's own rows, scored by its own rubric as it stands: a reward that reads the env's
        # state (row_truth.py) finds each row's own entry there, so no generated-env rubric swap
        scored = classic.score_rows({"env_id": req["env_id"], "env_args": req.get("env_args") or {},
                                     "dataset": scored_in,
                                     "reward_reads_env_state": {"verdict": "no"}})
    out["ceiling"] = ceiling = scored["ceiling"]
    kept = []
    for s in scored["rows"]:
        row, got = answered[s["line"] - 1]
        if s["reward"] >= ceiling - 1e-9:
            kept.append({"prompt": row["prompt"], "info": {"reference_completion": got}})
        elif len(out["misses"]) < 3:
            out["misses"].append({"question": question_of(row)[:300], "completion": got[:300],
                                  "reward": s["reward"], "errors": s["errors"]})
    return _write_corpus(out, kept, recipe)


def _episode_corpus(out: dict, env, train: list, next_move, recipe, episodes) -> dict:
    """The solver corpus of a multi-turn env: every train row played as an episode by the env's
    own rollout loop, each reply from next_move(messages, info), scored by the env's rubric over
    the whole episode; the episodes at full reward are kept as reference trajectories. On a
    tool-using env a reply may call tools (_play_tools), and the kept episodes hold each call
    and each tool result, which the student's chat template renders for its warm start."""
    import classic

    out["ceiling"] = ceiling = sum(w for w in classic._weights(env.rubric) if w > 0)
    tools = episodes.kind(env) == "tools"
    kept = []
    for k, row in enumerate(train):
        raised: list = []

        def reply(messages, info, raised=raised):
            try:
                got = next_move([dict(m) for m in messages], info)
            except Exception as e:  # noqa: BLE001 - a turn the solver cannot play
                raised.append(f"{type(e).__name__}: {e}"[:300])
                return None
            if tools and isinstance(got, dict) and (got.get("content") or got.get("tool_calls")):
                return got
            return got if isinstance(got, str) and got else None

        ep = _play_tools(env, dict(row), reply, k) if tools else episodes.play(env, dict(row), reply, k)
        if raised:
            out["raised"] += 1
            out["first_raise"] = out["first_raise"] or raised[0]
        if ep["turns"]:
            out["returned"] += 1
        if ep["turns"] and ep["reward"] >= ceiling - 1e-9:
            kept.append({"prompt": row["prompt"], "info": {"reference_trajectory": ep["completion"]}})
        elif ep["turns"] and len(out["misses"]) < 3:
            transcript = " | ".join(f"{m['role']}: {_shown(m)}" for m in ep["completion"])
            out["misses"].append({"question": question_of(row)[:300], "completion": transcript[:300],
                                  "reward": ep["reward"], "errors": [e for e in [ep["error"]] if e]})
    return _write_corpus(out, kept, recipe)


def _shown(message: dict) -> str:
    """A message as a transcript shows it: its text, then each tool call with its arguments."""
    from rl_contract import tool_calls

    calls = [f"{c['name']}({c['arguments']})" for c in tool_calls.message_calls(message)]
    return " ".join([message.get("content") or ""] + calls).strip()


def _play_tools(env, row: dict, reply, k: int) -> dict:
    """One episode of a tool-using env played by its own rollout loop, as vLLM would serve the
    replies: each reply from `reply(messages, info)` is a message dict (its `tool_calls` as
    [{"name", "arguments"}] or OpenAI's {"function": {...}} shape) or text, whose tool calls are
    parsed as vLLM's hermes parser parses them (rl_contract/tool_calls.py; a malformed call stays
    text). Scored by the env's rubric; the completion keeps each call and each tool result, as
    episodes.play's does the text."""
    import asyncio
    import time

    import verifiers as vf
    from verifiers.types import Response, ResponseMessage, ToolCall

    from rl_contract import tool_calls

    info = dict(rows.info_of(row))

    class SolverClient(vf.Client):
        def setup_client(self, config):
            return None

        async def to_native_tool(self, tool):
            return tool

        async def to_native_prompt(self, messages):
            return [tool_calls.as_dict(m) for m in messages], {}

        async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
            got = reply(prompt, dict(info))
            if got is None:
                raise vf.Error("no reply for this turn (the solver gave None)")
            turn = sum(1 for m in prompt if m.get("role") == "assistant")
            if isinstance(got, str):
                content, calls = tool_calls.parse(got) if tools else (got, [])
            else:
                content = got.get("content") if isinstance(got.get("content"), str) else None
                calls = tool_calls.message_calls(got)
            return content, [ToolCall(id=f"call_{turn}_{n}", name=c["name"], arguments=c["arguments"])
                             for n, c in enumerate(calls)]

        async def raise_from_native_response(self, response):
            return None

        async def from_native_response(self, native):
            content, calls = native
            return Response(id="solver", created=int(time.time()), model="solver", message=ResponseMessage(
                content=content, tool_calls=calls or None, finish_reason="tool_calls" if calls else "stop",
                is_truncated=False))

        async def close(self):
            return None

    async def go():
        state = await env.rollout({"prompt": row["prompt"], "example_id": int(row.get("example_id", k)),
                                   "answer": str(row.get("answer", "")), "info": info},
                                  SolverClient(None), "solver", {})
        await env.rubric.score_rollout(state)
        return state

    state = asyncio.run(go())
    completion = [tool_calls.as_dict(m) for m in state.get("completion") or []]
    return {"reward": float(state.get("reward") or 0.0), "completion": completion,
            "turns": sum(1 for m in completion if m["role"] == "assistant"),
            "error": None if state.get("error") is None else f"{type(state['error']).__name__}: {state['error']}"}


def _write_corpus(out: dict, kept: list, recipe) -> dict:
    """The kept rows as the corpus file, keyed by its content, when at least the floor passed."""
    import hashlib
    import os

    out["kept"] = len(kept)
    if len(kept) < out["floor"]:
        return out
    text = "".join(json.dumps(k, sort_keys=True, default=str) + "\n" for k in kept)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = recipe.solver_corpus_path(digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        tmp_path = f"{path}.tmp{os.getpid()}"
        with open(tmp_path, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp_path, path)
    return {**out, "digest": digest, "path": str(path)}


JOBS = {"check": check, "solver_corpus": solver_corpus}
