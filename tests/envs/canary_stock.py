"""StockArithmetic with a canary string planted in every eval prompt and answer (tests only).

Anything the driver hands a teacher, writes in a report or prints must never contain CANARY;
only the trainer's own eval rollout files may.
"""
import verifiers as vf
from stock_arithmetic import load_environment as load_stock

CANARY = "CANARY-7d1e5b0a-sealed-eval"


def _plant(row: dict) -> dict:
    row = dict(row)
    row["question"] = f"{row['question']} [{CANARY}]"
    row["answer"] = f"{row['answer']} {CANARY}"
    if isinstance(row.get("prompt"), list):
        row["prompt"] = [dict(m, content=f"{m['content']} [{CANARY}]") if m.get("role") == "user"
                         else m for m in row["prompt"]]
    return row


def load_environment(**kwargs) -> vf.Environment:
    env = load_stock(**kwargs)
    env.eval_dataset = env.eval_dataset.map(_plant)
    return env
