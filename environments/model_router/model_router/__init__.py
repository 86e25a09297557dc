"""model_router: choose which model should attempt a task.

Reward 1.0 for the oracle pick, 0.0 for another valid model, -1.0 for an unparseable answer or
an unknown model name. The answer format is `<model>NAME</model>`.
"""
from __future__ import annotations

import verifiers as vf
from datasets import Dataset

from .table import MODELS, load_table, oracle_pick

SYSTEM_PROMPT = (
    "You route software tasks to one of these models: "
    + "; ".join(f"{m} (solves about {int(s * 100)}% of typical tasks, ${c} per attempt)"
                for m, (s, c) in MODELS.items())
    + ". Pick the model most likely to solve the task, preferring the cheaper one when several "
    "would. Answer with exactly <model>NAME</model>."
)


def route_reward_value(choice: str | None, info: dict) -> float:
    names = set(info["per_model"])
    if choice is None or choice.strip() not in names:
        return -1.0
    return 1.0 if choice.strip() == oracle_pick(info["per_model"]) else 0.0


def make_row(task: dict) -> dict:
    return {
        "question": (f"Task {task['task_id']}: {task['description']} "
                     f"Category: {task['category']}. Files touched: {task['files_touched']}."),
        "answer": task["oracle"],
        "info": {"task_id": task["task_id"], "per_model": task["per_model"],
                 "category": task["category"], "difficulty": task["difficulty"],
                 "files_touched": task["files_touched"],
                 "reference_completion": f"<model>{task['oracle']}</model>"},
    }


def load_environment(table_path: str | None = None, seed: int = 0, eval_fraction: float = 0.2,
                     **kwargs) -> vf.Environment:
    rows = [make_row(t) for t in load_table(table_path, seed)]
    n_eval = max(1, int(len(rows) * eval_fraction))
    parser = vf.XMLParser(["model"], answer_field="model")

    async def oracle_route(completion, answer, info=None, state=None, **kw) -> float:
        """1 for the oracle model, 0 for another valid model, -1 for no valid route."""
        return route_reward_value(parser.parse_answer(completion), info or {})

    rubric = vf.Rubric(funcs=[oracle_route], weights=[1.0], parser=parser)
    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(rows[n_eval:]),
        eval_dataset=Dataset.from_list(rows[:n_eval]),
        system_prompt=SYSTEM_PROMPT, parser=parser, rubric=rubric, **kwargs,
    )
