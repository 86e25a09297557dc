"""A test double of `python -m embedded_trainer.probe` (same flags, same output rows) for runs
that train with the trainer double. The model directory must exist, as for the real probe; the
rewards come from PROBE_DOUBLE_SOLVE_RATE: 1 = the student solves every row, 0 = none,
unset = a deterministic half, so most groups are live."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser()
    for flag in ("--model", "--env-id", "--output"):
        p.add_argument(flag, required=True)
    p.add_argument("--env-args", default="{}")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--min-live", type=float, default=None)
    for flag in ("--prompts", "--k", "--max-tokens", "--seed"):
        p.add_argument(flag, type=int, default=0)
    a = p.parse_args()
    print(f"probe double: {a.prompts} prompts x {a.k} at temperature {a.temperature}")
    if not Path(a.model).is_dir():
        print(f"error: model directory {a.model} does not exist", file=sys.stderr)
        return 1
    # the env's train rows as the real probe reads them (vf.load_environment(...).get_dataset():
    # embedded_trainer/probe.py:76-77),
    # loaded as the trainer double loads them: through the suite's warm row server when one
    # answers, else through verifiers here
    from trainer_double import load_rows

    rows = load_rows({"id": a.env_id, "args": json.loads(a.env_args)}, "train")
    picks = random.Random(a.seed).sample(range(len(rows)), min(a.prompts, len(rows)))
    rate = os.environ.get("PROBE_DOUBLE_SOLVE_RATE")
    out = []
    for i in picks:
        for k in range(a.k):
            h = int(hashlib.sha256(f"{i}|{k}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
            ok = h < (float(rate) if rate is not None else 0.5)
            out.append({"example_id": rows[i].get("example_id", i), "prompt": rows[i]["prompt"],
                        "completion": [{"role": "assistant", "content": "(probe double)"}],
                        "answer": rows[i].get("answer"), "reward": float(ok),
                        "metrics": {}, "is_truncated": False})
    Path(a.output).write_text("".join(json.dumps(r) + "\n" for r in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
