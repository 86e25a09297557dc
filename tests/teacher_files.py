"""What a capable teacher (a coding agent or an LLM) writes for a StockArithmetic iteration:
the four files, from failed train rows it was shown. Shared by the fake LLM server and the
scripted agent, so both hand the driver files they derived from their own inputs only."""
from __future__ import annotations

import json

from generators.stock_arithmetic import BUCKETS, FEATURE_DEFINITIONS, valid


def weakness(prev_eval_acc: float | None) -> dict:
    domains = list(dict.fromkeys(d for d, _ in BUCKETS))
    return {
        "prev_eval_acc": prev_eval_acc, "reward_by_length_quartile": [0.4, 0.3, 0.3, 0.2],
        "domains": [{"name": d, "severity": "high", "evidence": "failed train stories share it",
                     "sub_domains": [{"name": s} for d2, s in BUCKETS if d2 == d]} for d in domains],
        "allocations": {f"{d} / {s}": 100 for d, s in BUCKETS},
        "structural_features": [{"name": k, "definition": v} for k, v in FEATURE_DEFINITIONS.items()],
    }


def passing(skeletons: list[dict], iteration: int, env_id: str, prev_eval_acc=None,
            prior: list[str] = ()) -> dict:
    skeletons = [s for s in skeletons if isinstance(s.get("problem"), dict) and valid(s["problem"])]
    script = f'''import json
from generators import round_trip
from generators.stock_arithmetic import generate

weakness = json.load(open("weakness.json"))
skeletons = json.loads({json.dumps(json.dumps(skeletons))})
rows = generate(weakness, skeletons, out="dataset.jsonl", seed={iteration}, prior={list(prior)!r})
round_trip({env_id!r}, rows)
print(len(rows), "rows")
'''
    return {
        "weakness_report.md": "# Weakness report\n\nCarries and borrows fail most often.\n",
        "weakness.json": json.dumps(weakness(prev_eval_acc), indent=1),
        "gen_dataset.py": script,
        "scratchpad_entry.md": (f"## Iteration {iteration}\n### (1) Understanding from traces\n"
                                "carries\n### (2) Buckets and target counts\n6 x 100\n"
                                "### (3) Plan for the data\nfamily generator\n### (4) Hyperparameter"
                                " / reward changes\nnone\n### (5) Results\npending\n"),
    }


def failing(iteration: int) -> dict:
    """Too few rows, all from one template: the gate must refuse it."""
    files = passing([], iteration, "stock_arithmetic")
    files["gen_dataset.py"] = '''import json
rows = [{"question": f"A shop starts with {i} jars and sells {i // 2}. How many are left?",
         "answer": str(i - i // 2),
         "info": {"domain": "x", "sub_domain": "y", "difficulty": "easy",
                  "structural_features": [], "source": "template:t", "reasoning": ""}}
        for i in range(10, 50)]
with open("dataset.jsonl", "w") as f:
    f.writelines(json.dumps(r) + "\\n" for r in rows)
'''
    return files


def as_reply(files: dict) -> str:
    return "Here are the files.\n\n" + "\n\n".join(
        f"<<<FILE {name}>>>\n{text}\n<<<END FILE>>>" for name, text in files.items())
