"""A user's own tool-using env (verifiers' ToolEnv), written as verifiers' own `tool-test` example
is: each row names the tools the model must call (`info["tool_names"]`), and the reward reads
the model's messages as verifiers hands them to a reward, objects (`completion[-1].role`,
`message.tool_calls`, `call.name`), before it reads `info`. The model then answers the code the
tool returned, so a winning episode is a tool call, the tool's result and a final reply.

`style="dicts"` gives the same reward written over dicts (`m["role"]`, `m.get("tool_calls")`,
`call["name"]`), which verifiers' message objects answer too.
"""
import verifiers as vf
from datasets import Dataset

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime"]


def tool_a(word: str) -> str:
    """The A-code of a word."""
    return f"A{len(word) * 7}"


def tool_b(word: str) -> str:
    """The B-code of a word."""
    return f"B{len(word) * 11}"


def tool_c(word: str) -> str:
    """The C-code of a word."""
    return f"C{len(word) * 13}"


def tool_d(word: str) -> str:
    """The D-code of a word."""
    return f"D{len(word) * 17}"


TOOLS = [tool_a, tool_b, tool_c, tool_d]


def tool_call_reward(completion, answer, info) -> float:
    """1 where the last reply says the answer and the tools called are exactly info's."""
    last = completion[-1]
    said = last.role == "assistant" and answer in (last.content or "")
    called = sorted(c.name for m in completion if m.role == "assistant" for c in (m.tool_calls or []))
    return 1.0 if said and called == sorted(info["tool_names"]) else 0.0


def tool_call_reward_dicts(completion, answer, info) -> float:
    last = completion[-1]
    said = last["role"] == "assistant" and answer in (last.get("content") or "")
    called = sorted(c["name"] for m in completion if m["role"] == "assistant" for c in (m.get("tool_calls") or []))
    return 1.0 if said and called == sorted(info["tool_names"]) else 0.0


def _rows():
    rows = []
    for i, word in enumerate(WORDS * 3):
        tool = TOOLS[i % len(TOOLS)]
        rows.append({"question": f"Call {tool.__name__} on '{word}' and answer the code it returns.",
                     "answer": tool(word), "info": {"tool_names": [tool.__name__], "word": word}})
    return rows


def load_environment(style: str = "objects", **kwargs) -> vf.Environment:
    rows = _rows()
    reward = tool_call_reward if style == "objects" else tool_call_reward_dicts
    return vf.ToolEnv(tools=list(TOOLS), dataset=Dataset.from_list(rows), eval_dataset=Dataset.from_list(rows[:6]),
                      rubric=vf.Rubric(funcs=[reward]), max_turns=3, **kwargs)
