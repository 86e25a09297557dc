"""Helpers shared by the classic and the taskset jobs: the generated rows the gate scores, the
seeded picks of a train resample, and writing rows. Standard library only."""
from __future__ import annotations

import json
import os
import random


def reply_problem(reply) -> str:
    """'' for one reply of a multi-turn row's info.reasoning, else what is wrong: a string (the
    reply's text), or an assistant message that calls tools, in OpenAI's shape (the one verifiers
    reads): {"role": "assistant", "content": text or null, "tool_calls": [{"id": "call_0",
    "type": "function", "function": {"name": TOOL, "arguments": JSON object or its text}}]}."""
    if isinstance(reply, str):
        return ""
    if not isinstance(reply, dict) or reply.get("role", "assistant") != "assistant":
        return "a reply is a string, or an assistant message with tool_calls"
    if not isinstance(reply.get("content") or "", str):
        return "a reply message's content must be a string or null"
    calls = reply.get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return "a reply message needs a non-empty tool_calls list (a reply without tool calls is a string)"
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            return ('each tool call is {"id": "call_0", "type": "function", "function": {"name": TOOL, '
                    '"arguments": {...}}}')
        args = fn.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return f"tool call {fn['name']}: arguments is not JSON"
        if not isinstance(args, dict):
            return f"tool call {fn['name']}: arguments must be a JSON object"
    return ""


def tool_exchanges(completion) -> list[dict]:
    """An episode's tool calls in order, each with the result the env gave it:
    [{"turn": the reply's number (1 first), "name", "arguments", "result"}]. Reads a message's
    tool calls in OpenAI's shape or verifiers' (`{"id", "name", "arguments"}`), and a tool
    message's `tool_call_id` (a call the env never answered has result None)."""
    out, by_id, turn = [], {}, 0
    for m in completion if isinstance(completion, list) else []:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "assistant":
            turn += 1
            for c in m.get("tool_calls") or []:
                if not isinstance(c, dict):
                    continue
                fn = c.get("function") if isinstance(c.get("function"), dict) else c
                args = fn.get("arguments")
                try:
                    args = json.loads(args) if isinstance(args, str) else args
                except ValueError:
                    pass
                out.append({"turn": turn, "name": fn.get("name"), "arguments": args, "result": None})
                if c.get("id") is not None:
                    by_id[c["id"]] = out[-1]
        elif m.get("role") == "tool" and m.get("tool_call_id") in by_id:
            content = m.get("content")
            by_id[m["tool_call_id"]]["result"] = content if isinstance(content, str) else json.dumps(content)
    return out


def read_reasoned_rows(dataset: str) -> list[tuple[int, dict]]:
    """(line, row) of every row of `dataset` (a JSONL file) that carries an info.reasoning
    string, or a list of replies (a multi-turn env's, each a string or a tool-calling message:
    reply_problem); lines that are not JSON objects are skipped (the gate's other lines report
    them)."""
    rows = []
    with open(dataset, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                row = json.loads(line)
            except ValueError:
                continue
            reasoning = row.get("info", {}).get("reasoning") if isinstance(row, dict) \
                and isinstance(row.get("info"), dict) else None
            if isinstance(reasoning, str) or (isinstance(reasoning, list) and reasoning
                                              and not any(reply_problem(x) for x in reasoning)):
                rows.append((n, row))
    return rows


def info_of(row: dict) -> dict:
    """A row's info as a dict: some writers keep it as a JSON string; anything else is {}."""
    info = row.get("info")
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            return {}
    return info if isinstance(info, dict) else {}


def seeded_picks(size: int, n: int, seed: str) -> list[int]:
    """`n` indices into a split of `size` rows, seeded by `seed`, without replacement until the
    split runs out."""
    rng = random.Random(seed)
    order = list(range(size))
    rng.shuffle(order)
    return [order[i % len(order)] for i in range(n)]


def write_jsonl(dest: str, rows) -> int:
    """Write `rows` as JSON lines to `dest` (values JSON cannot encode as text); returns the
    count."""
    n = 0
    with open(dest, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, default=str) + "\n")
            n += 1
    return n


def write_json_atomic(path: str, value) -> None:
    """Write `value` as JSON beside `path`, then rename it into place: a reader never sees half."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f, default=str)
    os.replace(tmp, path)


def distribution_of(module: str) -> dict | None:
    """The installed distribution that provides `module`'s top-level package ({"name",
    "version"}), or None (a module on sys.path with no metadata): what a generated env that
    loads this env by id requires. An editable install maps no file to its package, so the
    distribution named as the package is tried too."""
    from importlib import metadata

    top = module.split(".")[0]
    owner = next((d for d in metadata.distributions() if _provides(d, top)), None)
    if owner is None:
        try:
            owner = metadata.distribution(top)
        except metadata.PackageNotFoundError:
            return None
    return {"name": owner.metadata["Name"], "version": owner.version}


def _provides(dist, top: str) -> bool:
    """Whether `dist` provides the top-level package `top`, as importlib.metadata's
    packages_distributions decides it (its top_level.txt, else the first part of each .py file
    it lists), without parsing every installed distribution's metadata and file list (a second
    per job in an environment of a few thousand): a distribution whose file list does not
    mention `top` at all is passed over unparsed."""
    declared = (dist.read_text("top_level.txt") or "").split()
    if declared:
        return top in declared
    listed = "".join(dist.read_text(n) or "" for n in ("RECORD", "installed-files.txt", "SOURCES.txt"))
    if top not in listed:
        return False
    return any((f.parts[0] if len(f.parts) > 1 else f.with_suffix("").name) == top
               for f in dist.files or () if f.suffix == ".py")
