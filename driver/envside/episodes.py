"""Episodes of a classic verifiers environment, played by the env's own rollout loop with
scripted replies instead of a model: what the env-side jobs need to know about an env's turns.

- `interaction(env, train)`: hub_env.json's `interaction`: the env's kind (single-turn,
  multi-turn, tools), its turn limit and other constructor settings, its stop conditions, and
  the `info` keys its episode logic (setup_state, env_response, stop conditions) reads.
- `play(env, row, reply)`: one episode of a row, each reply asked of `reply(messages, info)`
  (the conversation so far), scored by the env's rubric: the gate plays a generated row's moves
  (info.reasoning) this way, the --student-solver route a solver's.

`MultiTurnEnv.rollout` runs unchanged (its setup_state, stop conditions, env_response,
max_turns, final_env_response); only the model is replaced, by a verifiers Client that asks
`reply`. Run in the training interpreter by path, importing no driver module.
"""
from __future__ import annotations

import asyncio
import copy
import inspect
import json
import re

import verifiers as vf
from hub_parts import settings

MAX_SCRIPTED_TURNS = 3   # introspection plays at most this many turns of a sample row


def kind(env) -> str:
    """single_turn, multi_turn or tools: who decides the episode, the model alone or the env."""
    if getattr(env, "tool_defs", None):
        return "tools"
    if isinstance(env, vf.SingleTurnEnv) or not isinstance(env, vf.MultiTurnEnv):
        return "single_turn"
    return "multi_turn"


def _owner(env, method: str) -> str | None:
    """The class whose `method` the env runs (its own class, or verifiers' default)."""
    for klass in type(env).__mro__:
        if method in klass.__dict__:
            return klass.__name__
    return None


class _Recorder(dict):
    """An info dict that records every key looked up in it into `seen` (its copies too: a
    rollout deep-copies its input)."""

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

    def __deepcopy__(self, memo):
        return _Recorder(copy.deepcopy(dict(self), memo), self.seen)


# verifiers ends an episode on its own Error (has_error); 0.4.0, whose classic API is gone, has
# none and plays no classic episodes here, so only the import must not fail there
class _NoReply(getattr(vf, "Error", Exception)):
    """The script has no reply for this turn: the episode ends (verifiers' has_error)."""


def _client(reply):
    """A verifiers Client whose every response is `reply(messages)`: a reply's text, or an
    assistant message whose `tool_calls` (OpenAI's shape) the env runs (None: no reply)."""
    from verifiers.types import Response, ResponseMessage

    class ScriptedClient(vf.Client):
        def setup_client(self, config):
            return None

        async def to_native_tool(self, tool):
            return tool

        async def to_native_prompt(self, messages):
            return [as_dict(m) for m in messages], {}

        async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
            got = reply(prompt)
            if got is None:
                raise _NoReply("no reply for this turn (the script, or the solver, gave None)")
            return as_messages([assistant(got)])[0]

        async def raise_from_native_response(self, response):
            return None

        async def from_native_response(self, message):
            calls = message.tool_calls or None
            return Response(id="scripted", created=0, model="scripted", message=ResponseMessage(
                content=message.content, tool_calls=calls, finish_reason="tool_calls" if calls else "stop",
                is_truncated=False))

        async def close(self):
            return None

    return ScriptedClient(None)


def as_messages(raw: list) -> list:
    """Messages as verifiers hands them to an env and to a reward function: its message objects
    (which answer `m.role` and `m["role"]`, `m.tool_calls` and `m.get("tool_calls")` alike),
    a tool call in OpenAI's shape made verifiers' ToolCall (`normalize_messages`,
    verifiers/utils/message_utils.py)."""
    from verifiers.utils.message_utils import normalize_messages

    return normalize_messages(list(raw))


def assistant(reply) -> dict:
    """A reply as an assistant message: a string is its text; a dict is the message itself
    (`content` and `tool_calls`, each call `{"id", "type": "function", "function": {"name",
    "arguments"}}`), each call without an id given one."""
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}
    msg = {"role": "assistant", "content": reply.get("content"), "tool_calls": None}
    calls = reply.get("tool_calls") or []
    if calls:
        msg["tool_calls"] = [{**c, "id": c.get("id") or f"call_{k}"} if isinstance(c, dict) else c
                             for k, c in enumerate(calls)]
    return msg


def _call_dict(call) -> dict:
    """A tool call in OpenAI's shape, from verifiers' ToolCall (id, name, arguments) or a dict of
    either shape."""
    get = call.get if isinstance(call, dict) else (lambda k, d=None: getattr(call, k, d))
    fn = get("function") or {}
    fget = fn.get if isinstance(fn, dict) else (lambda k, d=None: getattr(fn, k, d))
    name, args = get("name") or fget("name"), get("arguments") or fget("arguments")
    return {"id": get("id"), "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}


def as_dict(message) -> dict:
    """A message as a plain dict: role and text, with a reply's tool calls (OpenAI's shape) and a
    tool result's `tool_call_id` where it has them."""
    get = message.get if isinstance(message, dict) else (lambda k, d=None: getattr(message, k, d))
    content = get("content")
    out = {"role": get("role"), "content": content if isinstance(content, str) else ""}
    if get("tool_calls"):
        out["tool_calls"] = [_call_dict(c) for c in get("tool_calls")]
    if get("tool_call_id"):
        out["tool_call_id"] = get("tool_call_id")
    return out


def _input(row: dict, k: int, info: dict) -> dict:
    return {"prompt": row["prompt"], "example_id": int(row.get("example_id", k)),
            "answer": str(row.get("answer", "")), "info": info}


async def _play(env, row: dict, reply, k: int = 0, info: dict | None = None):
    if info is None:
        info = row.get("info") or {}
    return await env.rollout(_input(row, k, info), _client(reply), "scripted", {})


def play(env, row: dict, reply, k: int = 0) -> dict:
    """One episode of `row` (a dataset row with its prompt) played by the env's own rollout
    loop, each reply from `reply(messages, info)` (the conversation so far, plain dicts; a
    reply is a string, or an assistant message with tool calls (`assistant`) that a tool env
    runs; None ends the episode), scored by the env's rubric: {"reward", "metrics",
    "completion", "stop_condition", "turns", "error"}."""
    info = dict(row.get("info") or {})

    async def go():
        state = await _play(env, row, lambda prompt: reply(prompt, dict(info)), k, info)
        await env.rubric.score_rollout(state)
        return state

    state = asyncio.run(go())
    completion = [as_dict(m) for m in state.get("completion") or []]
    return {"reward": float(state.get("reward") or 0.0), "metrics": dict(state.get("metrics") or {}),
            "completion": completion, "stop_condition": state.get("stop_condition"),
            "turns": sum(1 for m in completion if m["role"] == "assistant"),
            "error": None if state.get("error") is None else f"{type(state['error']).__name__}: {state['error']}"}


def moves_reply(moves: list):
    """A reply function that plays `moves` in order, one per turn, then has none."""
    it = iter(moves)
    return lambda messages, info: next(it, None)


def _probe_replies(env, row: dict) -> list[str]:
    """Replies that walk an episode's paths: the row's answer as it is, and in each tag the
    system prompt shows (`<guess>N</guess>` -> `<guess>ANSWER</guess>`), with numbers off by one
    and far outside too."""
    answer = str(row.get("answer", ""))
    tags = re.findall(r"<(\w+)>[^<]{0,20}</\1>", env.system_prompt or "")
    values = [answer]
    if re.fullmatch(r"-?\d+", answer):
        values += [str(int(answer) - 1), str(int(answer) + 1), str(int(answer) + 10 ** 6)]
    return [answer] + [f"<{t}>{v}</{t}>" for t in dict.fromkeys(tags) for v in values]


def _keys_in_source(env, keys: set) -> set:
    """The info keys whose quoted names appear in the env's own methods (its classes up to
    verifiers'): what env_response, setup_state and stop conditions may look up on paths a few
    scripted episodes do not take."""
    found: set = set()
    for klass in type(env).__mro__:
        if klass.__module__.startswith("verifiers") or klass is object:
            break
        for member in klass.__dict__.values():
            func = getattr(member, "__func__", member)
            if not inspect.isfunction(func):
                continue
            try:
                src = inspect.getsource(func)
            except (OSError, TypeError):
                continue
            found |= {k for k in keys if re.search(rf"""["']{re.escape(str(k))}["']""", src)}
    return found


def info_keys_read(env, train) -> list[str] | None:
    """The info keys the env's episode logic reads (setup_state, env_response, stop conditions):
    a few train rows played with scripted replies (_probe_replies, at most MAX_SCRIPTED_TURNS
    turns each), less the keys verifiers itself looks up when it starts a rollout, and the
    row keys the env's own methods name; None where the episodes cannot be played this way."""
    seen: set = set()
    internal: set = set()
    keys: set = set()
    try:
        for i in range(min(3, len(train))):
            row = dict(train[i])
            keys |= set(row.get("info") or {})
            asyncio.run(env.init_state(_input(row, i, _Recorder(row.get("info") or {}, internal)),
                                       _client(lambda p: None), "scripted", {}))
            for reply in _probe_replies(env, row):
                turns = iter(range(MAX_SCRIPTED_TURNS))
                asyncio.run(_play(env, row, lambda p, r=reply: r if next(turns, None) is not None else None,
                                  i, _Recorder(row.get("info") or {}, seen)))
    except Exception:  # noqa: BLE001 - an env whose episodes cannot be played this way: unknown
        return None
    return sorted(map(str, (seen - internal) | _keys_in_source(env, keys)))


def interaction(env, train) -> dict:
    """hub_env.json's `interaction`: how the env's episodes go, and what its logic reads."""
    k = kind(env)
    out = {"kind": k, "max_turns": getattr(env, "max_turns", None), "settings": settings(env),
           "stop_conditions": [getattr(c, "__name__", str(c)) for c in getattr(env, "_stop_conditions", [])],
           "env_response": _owner(env, "env_response"),
           "tools": [getattr(t, "name", str(t)) for t in (getattr(env, "tool_defs", None) or [])],
           "env_info_keys_read": []}
    if k != "single_turn":
        out["env_info_keys_read"] = info_keys_read(env, train)
    return out
