"""Score hand-written replies with a v1 taskset's own Task.score, no model and no server.

Run as a script in any interpreter with verifiers.v1 (0.3.1 or 0.4.0): `python
tests/taskset_scoring.py TASKSET_ID SPLIT N` prints one JSON list of [key, reply kind, reward,
metrics] for the first N tasks of the split, each scored on the replies in REPLIES.
"""
from __future__ import annotations

import asyncio
import json
import sys

REPLIES = {
    "strict": lambda answer: '{"final_stock": %s}' % answer,
    "think_then_strict": lambda answer: '<think>add, then subtract</think>{"final_stock": %s}' % answer,
    "wrong": lambda answer: '{"final_stock": %d}' % (int(answer) + 1),
    "loose": lambda answer: f"The final stock is {answer}.",
    "empty": lambda answer: "",
}
ROUTER_REPLIES = {
    "oracle": lambda answer: f"<model>{answer}</model>",
    "spaced": lambda answer: f"I pick <model> {answer} </model> for this.",
    "other_valid": lambda answer: "<model>swift-small</model>" if answer != "swift-small" else "<model>deep-large</model>",
    "two_tags": lambda answer: f"<model>nonsense</model><model>{answer}</model>",
    "unknown": lambda answer: "<model>my-own-model</model>",
    "untagged": lambda answer: answer,
    "empty": lambda answer: "",
}


def replies_for(taskset_id: str) -> dict:
    return ROUTER_REPLIES if "router" in taskset_id else REPLIES


def trace_for(vf, task, reply: str):
    from verifiers.v1.trace import TraceTask

    trace = vf.Trace(task=TraceTask(type=type(task).__name__, data=task.data.model_dump(mode="json"),
                                    key=task.key), agent=vf.AgentInfo(config={}))
    trace.nodes.append(vf.MessageNode(message=vf.UserMessage(content=str(task.data.prompt))))
    trace.nodes.append(vf.MessageNode(message=vf.AssistantMessage(content=reply), sampled=True, parent=0))
    return trace


async def score(taskset_id: str, split: str, n: int) -> list:
    import verifiers.v1 as vf
    from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

    cls = taskset_class(taskset_id)
    config = taskset_config_type(taskset_id)(id=taskset_id, split=split, num_examples=n)
    out = []
    for task in cls(config):
        for kind, make in replies_for(taskset_id).items():
            trace = trace_for(vf, task, make(task.data.answer))
            await task.score(trace)
            out.append([task.key, kind, trace.reward, dict(sorted(trace.metrics.items()))])
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(score(sys.argv[1], sys.argv[2], int(sys.argv[3])))))
