"""Tool calls in a model's text: the one format the built-in student writes, parsed as vLLM's
`hermes` tool parser parses it (the parser vLLM and prime-rl use for Qwen2/Qwen2.5/Qwen3
models, the family the built-in student imitates). Standard library only: the embedded trainer
(embedded_trainer/episodes.py) and the env-side solver route (driver/envside/student.py) both
read it.

The format (Hermes 2 Pro, as Qwen's chat template writes it): any text, then one or more

    <tool_call>{"name": "multiply", "arguments": {"a": 12, "b": 7}}</tool_call>

How vLLM reads it (`Hermes2ProToolParser.extract_tool_calls`, vllm/tool_parsers/
hermes_tool_parser.py, lines 70-120 at vllm-project/vllm@02bb669bf661; before the move, the
same method in vllm/entrypoints/openai/tool_parsers/hermes_tool_parser.py):

- no `<tool_call>` in the text: no tool calls, the whole text is the content;
- else every match of `<tool_call>(.*?)</tool_call>|<tool_call>(.*)` (DOTALL: a call left open
  runs to the end of the text) is `json.loads`-ed, and each object's `name` and `arguments`
  make a call whose arguments are `json.dumps(arguments, ensure_ascii=False)`; the content is
  the text before the first `<tool_call>` (None when empty), and text after the calls is
  dropped;
- if any of that raises (JSON that does not parse, a call without `name` or `arguments`, a
  JSON value that is not an object), no call is made at all and the whole text is the content.

vLLM parses only a request that offers tools (with `--enable-auto-tool-choice`); so does the
embedded trainer: an env without tools gets the text as it is.
"""
from __future__ import annotations

import json
import re

START, END = "<tool_call>", "</tool_call>"
CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def parse(text: str) -> tuple[str | None, list[dict]]:
    """(content, calls) of a model's text, as vLLM's hermes parser returns them: each call
    {"name": str, "arguments": str (JSON)}. A malformed call: ([text], []), as there."""
    if START not in text:
        return text, []
    try:
        raw = [json.loads(a if a else b) for a, b in CALL.findall(text)]
        calls = [{"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)}
                 for c in raw]
    except Exception:  # noqa: BLE001 - vLLM's own catch-all: the text stays content
        return text, []
    content = text[:text.find(START)]
    return (content if content else None), calls


def arguments_text(arguments) -> str:
    """A call's arguments as the JSON text vLLM hands on (a dict is dumped as vLLM dumps it; a
    string is taken as JSON text already)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def render(name: str, arguments) -> str:
    """One call as the student's chat template writes it (embedded_trainer/recipe.py's
    CHAT_TEMPLATE renders an assistant message's tool_calls this way): what `parse` reads back
    as the same call."""
    return f'{START}{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": {arguments_text(arguments)}}}{END}'


def openai_call(call_id: str, name: str, arguments) -> dict:
    """A call in the OpenAI message shape (`tool_calls` of an assistant message, as a chat
    template reads it)."""
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": arguments_text(arguments)}}


def message_calls(message) -> list[dict]:
    """An assistant message's tool calls as [{"id", "name", "arguments"}], whether the message is
    a dict (OpenAI's shape, `{"function": {...}}`, or verifiers' flat one) or a verifiers message
    object (`.tool_calls` of ToolCall objects)."""
    calls = message.get("tool_calls") if isinstance(message, dict) else getattr(message, "tool_calls", None)
    out = []
    for k, c in enumerate(calls or []):
        c = c if isinstance(c, dict) else {"id": getattr(c, "id", None), "name": getattr(c, "name", None),
                                           "arguments": getattr(c, "arguments", None)}
        f = c.get("function") if isinstance(c.get("function"), dict) else c
        out.append({"id": c.get("id") or f"call_{k}", "name": f.get("name"),
                    "arguments": arguments_text(f.get("arguments") if f.get("arguments") is not None else {})})
    return out


def as_dict(message) -> dict:
    """A message as a plain dict a chat template renders: role and content (text; None where an
    assistant message holds tool calls only), an assistant's `tool_calls` in OpenAI's shape and a
    tool message's `tool_call_id`, each only where present."""
    get = (message.get if isinstance(message, dict) else lambda k, d=None: getattr(message, k, d))
    content = get("content")
    out: dict = {"role": get("role"), "content": content if isinstance(content, str) else ""}
    calls = message_calls(message)
    if calls:
        out["tool_calls"] = [openai_call(c["id"], c["name"], c["arguments"]) for c in calls]
        if not content:
            out["content"] = None
    if get("tool_call_id"):
        out["tool_call_id"] = get("tool_call_id")
    return out
