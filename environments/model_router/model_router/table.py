"""The oracle table: synthetic tasks with a resolved flag and a cost per model, and the rule
that picks the oracle model. Generated here, deterministic from a seed."""
from __future__ import annotations

import json
import random
from pathlib import Path

MODELS = {  # name -> (skill, cost per attempt in dollars)
    "swift-small": (0.35, 0.02),
    "steady-medium": (0.60, 0.10),
    "deep-large": (0.80, 0.45),
}
CATEGORIES = ["string parsing", "date arithmetic", "concurrency bug", "api migration",
              "numeric precision", "config loading", "regex edge case", "cache invalidation"]


def oracle_pick(per_model: dict[str, dict]) -> str:
    """Best-performing model wins; ties go to the cheapest. Applied uniformly, so when every
    model fails the cheapest failure is still the oracle pick."""
    return min(per_model, key=lambda m: (-int(bool(per_model[m]["resolved"])),
                                         per_model[m]["cost"], m))


def build_table(seed: int = 0, n_tasks: int = 300) -> list[dict]:
    rng = random.Random(seed)
    tasks = []
    for i in range(n_tasks):
        category = rng.choice(CATEGORIES)
        difficulty = rng.choice(["easy", "medium", "hard"])
        files = {"easy": 1, "medium": rng.randint(2, 3), "hard": rng.randint(3, 6)}[difficulty]
        hardness = {"easy": 0.0, "medium": 0.25, "hard": 0.5}[difficulty] + 0.03 * files
        per_model = {}
        for name, (skill, cost) in MODELS.items():
            resolved = rng.random() < max(0.02, min(0.98, skill + 0.35 - hardness))
            per_model[name] = {"resolved": resolved, "cost": round(cost * (1 + files / 4), 4)}
        tasks.append({
            "task_id": f"task-{i:04d}",
            "category": category,
            "difficulty": difficulty,
            "files_touched": files,
            "description": f"Fix a {difficulty} {category} issue that touches {files} file(s).",
            "per_model": per_model,
            "oracle": oracle_pick(per_model),
        })
    return tasks


def load_table(table_path: str | Path | None, seed: int = 0) -> list[dict]:
    if table_path is None:
        return build_table(seed)
    rows = json.loads(Path(table_path).read_text())
    for row in rows:
        row["oracle"] = oracle_pick(row["per_model"])
    return rows
