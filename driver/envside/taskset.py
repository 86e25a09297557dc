"""The env-side jobs on a verifiers v1 taskset (verifiers >= 0.3.1's `verifiers.v1`, prime-rl
>= v0.8.1): the same jobs as classic.py, done on a `vf.Taskset` and its Task class.

A taskset selects its split with a config field (`split`, or `dataset_split`); the driver trains
on "train", reports on "test" and selects on "selection" (else "validation") when the taskset has one. Eval tasks
are only counted and fingerprinted, never returned. Only this module imports verifiers.v1.

A taskset's tools are its toolsets (MCP servers: the Task class's, one per rollout, and the
Taskset's, shared). The gate plays a row's tool calls with the same tool methods in this
process, as prime-rl's null-harness agent would call them over MCP (`play_tools`).
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


def _prompted(task):
    """A trace of `task` holding its prompt as one user turn, before any reply."""
    from verifiers.v1.trace import TraceTask

    t = vf.Trace(task=TraceTask(type=type(task).__name__, data=task.data.model_dump(mode="json"),
                                key=task.key), agent=vf.AgentInfo(config={}))
    t.nodes.append(vf.MessageNode(message=vf.UserMessage(content=text_of(task.data.prompt))))
    return t


def trace_for(task, reply: str):
    """A trace of one user turn (the task's prompt) and `reply` as the sampled assistant turn."""
    t = _prompted(task)
    t.nodes.append(vf.MessageNode(message=vf.AssistantMessage(content=reply), sampled=True, parent=0))
    return t


def row_of(task) -> dict:
    d = task.data
    return {"question": text_of(d.prompt), "answer": str(getattr(d, "answer", "") or ""),
            "info": getattr(d, "info", None) or {}}


def _weight(fn) -> float:
    return float(getattr(fn, "_vf_weight", 1.0))


# ---- tools ------------------------------------------------------------------------------------
def toolsets(taskset_id: str, config) -> list:
    """The tool servers a rollout of the taskset reaches: its Task class's (per rollout) and its
    Taskset's (shared), each built from its config as verifiers builds them (env.py:391-399,
    rollout.py:248@a60a606)."""
    cls = taskset_class(taskset_id)
    return [*cls.task_type().toolsets(config.task), *cls.toolsets(config)]


def advertised(servers: list) -> dict:
    """{the name the model calls: (server, the tool method)}: `<server>_<tool>`, bare where the
    server's name is "" (TOOL_PREFIX None) (harnesses/null/program.py:74-107, mcp/server.py:256-261
    and its `tool` methods, mcp/toolset.py:28-34@a60a606)."""
    from verifiers.v1.utils.decorators import discover_decorated

    out = {}
    for server in servers:
        for fn in discover_decorated(server, "tool"):
            raw = getattr(fn, "tool_name", None) or fn.__name__
            out[f"{server.server_name}_{raw}" if server.server_name else raw] = (server, fn)
    return out


async def served(servers: list, task=None) -> dict:
    """{the name the model calls: (FastMCP app, the tool's own name)}: each server set up (and,
    given the rollout's `task`, set up for it) and registered on a FastMCP app, as verifiers
    serves a tool server (mcp/server.py:302-315@a60a606); only the HTTP transport is left out."""
    if not servers:
        return {}      # a taskset without tools never imports mcp
    from mcp.server.fastmcp import FastMCP

    out = {}
    for server in servers:
        await server.setup()
        if task is not None:
            await server.setup_task(task)
        app = FastMCP(server.server_name, log_level="WARNING")
        server.register(app)
        out.update({name: (app, getattr(fn, "tool_name", None) or fn.__name__)
                    for name, (_, fn) in advertised([server]).items()})
    return out


def _call_parts(call: dict, default_id: str) -> tuple[str, str, str]:
    """(id, name, arguments as a JSON string) of a tool call in OpenAI's shape; arguments given
    as an object are written as JSON."""
    fn = call.get("function") or {}
    args = fn.get("arguments", call.get("arguments"))
    return (str(call.get("id") or default_id), str(fn.get("name", call.get("name", ""))),
            args if isinstance(args, str) else json.dumps(args if args is not None else {}))


async def run_tool(tools: dict, name: str, arguments: str) -> str:
    """One tool call as the null harness makes it (program.py:188-218@a60a606): its own error
    texts for arguments that are not a JSON object and for a tool no server offers, else the
    server's answer, through the MCP server's own call handler (mcp/server/lowlevel/server.py:
    521-584@1.27.1: a tool that raises or arguments its signature refuses answer as an error
    result), read as the harness reads it (program.py:110-139)."""
    from mcp import types
    from verifiers.v1.harnesses.null.program import mcp_content_to_chat_content

    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as e:
        return f"error: invalid JSON in tool arguments ({e}); resend the call with valid JSON"
    if not isinstance(args, dict):
        return (f"error: tool arguments must be a JSON object, got {type(args).__name__}; "
                "resend as an object")
    if name not in tools:
        return f"error: unknown tool {name!r}"
    app, raw = tools[name]
    handler = app._mcp_server.request_handlers[types.CallToolRequest]
    result = await handler(types.CallToolRequest(
        method="tools/call", params=types.CallToolRequestParams(name=raw, arguments=args)))
    return mcp_content_to_chat_content(result.root.content)


def _reply_message(reply, k: int):
    """A row's reply as verifiers v1's assistant message: a string is its text; a dict is the
    message (`content`, `tool_calls` in OpenAI's shape)."""
    if isinstance(reply, str):
        return vf.AssistantMessage(content=reply)
    calls = [vf.ToolCall(id=i, name=n, arguments=a)
             for i, n, a in (_call_parts(c, f"call_{k}_{j}") for j, c in enumerate(reply.get("tool_calls") or []))]
    return vf.AssistantMessage(content=reply.get("content"), tool_calls=calls or None)


async def play_replies(task, replies: list, tools: dict):
    """A trace of `task` with `replies` as the model's turns: each reply's tool calls run and
    answered as tool messages, the episode ending at the first reply that calls no tool, as the
    null harness's loop ends it (program.py:183-218@a60a606)."""
    t = _prompted(task)
    for k, reply in enumerate(replies):
        msg = _reply_message(reply, k)
        t.nodes.append(vf.MessageNode(message=msg, sampled=True, parent=len(t.nodes) - 1))
        if not msg.tool_calls:
            break
        for call in msg.tool_calls:
            content = await run_tool(tools, call.name, call.arguments)
            t.nodes.append(vf.MessageNode(message=vf.ToolMessage(tool_call_id=call.id, content=content),
                                          parent=len(t.nodes) - 1))
    return t


def interaction(taskset_id: str, config, task) -> dict:
    """hub_env.json's `interaction` for a taskset: tool-using where a rollout reaches a tool
    server, else single-turn (the driver's agent is the null harness, one model call per turn,
    and sets no turn limit: AgentConfig.max_turns None, configs/agent.py:40@a60a606)."""
    servers = toolsets(taskset_id, config)
    return {"kind": "tools" if servers else "single_turn", "max_turns": None, "settings": {},
            "stop_conditions": [fn.__name__ for fn in task.hooks("stop")], "env_response": None,
            "tools": sorted(advertised(servers)), "env_info_keys_read": []}


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
        "interaction": interaction(taskset_id, cfg_type(id=taskset_id, **{**env_args, split_field: train_split}),
                                   task),
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
    config = taskset_config_type(req["env_id"])(id=req["env_id"], **(req.get("env_args") or {}))

    async def score(n, row, shared):
        errors = []
        try:
            values = {"idx": n, "prompt": str(row.get("question", "")), "system_prompt": system or None,
                      "answer": str(row.get("answer", "")), "info": row["info"]}
            task = task_cls(data_cls(**{k: v for k, v in values.items() if k in known}))
            reasoning = row["info"]["reasoning"]
            if isinstance(reasoning, list):
                # the taskset's shared servers live across rollouts; a task's own, one rollout
                tools = {**shared, **await served(task_cls.toolsets(config.task), task)}
                trace = await play_replies(task, reasoning, tools)
            else:
                trace = trace_for(task, reasoning)
            await task.score(trace)
            reward = float(trace.reward)
        except Exception as e:  # noqa: BLE001 - a row's failure is its own, not the job's
            cause = e.__cause__ or e
            reward, errors = 0.0, [f"{type(cause).__name__}: {cause}"[:300]]
        return {"line": n, "template": [row["info"].get("domain"), row["info"].get("sub_domain")],
                "reward": reward, "errors": errors}

    async def run():
        shared = await served(taskset_class(req["env_id"]).toolsets(config))
        return [await score(n, r, shared) for n, r in rows.read_reasoned_rows(req["dataset"])]

    return {"ceiling": ceiling, "rows": asyncio.run(run())}


def eval_fingerprints(req: dict) -> dict:
    """The eval split's fingerprints (`env_args`: the config fields that select it)."""
    return fingerprint.fingerprint_rows([row_of(t) for t in load(req["env_id"], req.get("env_args") or {})])


JOBS = {"introspect": introspect, "count": count, "sample_train": sample_train,
        "score_rows": score_rows, "eval_fingerprints": eval_fingerprints}
