"""model_router's rows, prompt and reward rule: shared by the classic env and the taskset."""
from __future__ import annotations

import re

from .table import MODELS, load_table, oracle_pick

SYSTEM_PROMPT = (
    "You route software tasks to one of these models: "
    + "; ".join(f"{m} (solves about {int(s * 100)}% of typical tasks, ${c} per attempt)"
                for m, (s, c) in MODELS.items())
    + ". Pick the model most likely to solve the task, preferring the cheaper one when several "
    "would. Answer with exactly <model>NAME</model>."
)
# the first <model>...</model> of the reply, stripped (what verifiers' XMLParser reads)
_MODEL_TAG = re.compile(r"<model>(.*?)</model>", re.S)


def parse_model(text: str | None) -> str | None:
    m = _MODEL_TAG.search(text or "")
    return m.group(1).strip() if m else None


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


def split_rows(table_path: str | None = None, seed: int = 0,
               eval_fraction: float = 0.2) -> tuple[list[dict], list[dict]]:
    """(train, test): the first eval_fraction of the table's rows are the test split."""
    rows = [make_row(t) for t in load_table(table_path, seed)]
    n_eval = max(1, int(len(rows) * eval_fraction))
    return rows[n_eval:], rows[:n_eval]
