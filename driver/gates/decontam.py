"""Blind decontamination: does a generated row reproduce an item of the hub env's eval split?

The eval split is read only inside a subprocess (the interpreter that loads the env), which
returns, per eval row, hashes of its rare word 8-grams and nothing else, so no eval text ever
reaches the driver, its logs or the teacher. N-grams found in many eval rows (template
boilerplate) are dropped there. One of our rows is flagged when it covers at least
COVERAGE of some single eval row's rare 8-grams: on StockArithmetic, distinct train problems
reach at most 0.52 by chance while a reworded copy of an eval problem reaches 0.77. The report
names *our* rows only.
"""
from __future__ import annotations

import json
from pathlib import Path

from driver.envs import worker
from driver.run.files import atomic_write_json

# Shared verbatim by the driver and the eval-side subprocess, so both hash identically.
FINGERPRINT_SRC = r'''
import hashlib, re
N = 8
def grams(text):
    toks = re.sub(r"[^a-z0-9]+", " ", str(text).lower()).split()
    return {hashlib.sha1(" ".join(toks[i:i + N]).encode()).hexdigest()[:16]
            for i in range(max(0, len(toks) - N + 1))}
def row_text(row):
    if row.get("question"):
        return row["question"]
    msgs = [m for m in (row.get("prompt") or []) if isinstance(m, dict) and m.get("role") == "user"]
    return msgs[-1].get("content", "") if msgs else ""
'''

# Appended to any script that holds the eval rows as `ds` (dicts with a question or a prompt);
# prints one "@@FP@@" line.
FINGERPRINT_ROWS_BODY = FINGERPRINT_SRC + r'''
import collections as _collections, json as _json
df = _collections.Counter()
for row in ds:
    df.update(grams(row_text(row)))
limit = max(2, len(ds) // 100)
rows = [sorted(h for h in grams(row_text(row)) if df[h] <= limit) for row in ds]
print("@@FP@@" + _json.dumps({"n": N, "eval_rows": len(ds), "rows": [r for r in rows if r]}))
'''
# ... and to any script that has loaded a classic env as `env`
EVAL_SIDE_BODY = "\nds = env.get_eval_dataset()\n" + FINGERPRINT_ROWS_BODY

_EVAL_SIDE = r'''
import json, sys
import verifiers as vf
env = vf.load_environment(sys.argv[1], **json.loads(sys.argv[2]))
''' + EVAL_SIDE_BODY

_ns: dict = {}
exec(FINGERPRINT_SRC, _ns)
grams, row_text = _ns["grams"], _ns["row_text"]


def eval_fingerprints(python: str, env_id: str, env_args: dict | None = None) -> dict:
    r = worker.run_py(python, _EVAL_SIDE, [env_id, json.dumps(env_args or {})], timeout=600)
    return _parse(r, env_id)


def _parse(r, env_id: str) -> dict:
    line = next((x for x in r.stdout.splitlines() if x.startswith("@@FP@@")), None)
    if r.returncode != 0 or line is None:
        # the error text is the loader's, never eval rows
        raise RuntimeError(f"could not fingerprint the eval split of {env_id}: "
                           f"{(r.stderr.strip().splitlines() or ['no output'])[-1]}")
    return json.loads(line[len("@@FP@@"):])


def cached_fingerprints(run_dir: Path, python: str, hub: dict) -> dict:
    """The run's fingerprints: written at introspection (same env load), else computed now."""
    path = Path(run_dir) / "eval_fingerprints.json"
    if path.exists():
        return json.loads(path.read_text())
    if hub.get("kind") == "taskset":
        from driver.envs import tasksets

        r = worker.run_py(python, tasksets.script("eval_side"),
                          [hub["env_id"], json.dumps(tasksets.eval_fields(hub))], timeout=600)
        fp = _parse(r, hub["env_id"])
    else:
        fp = eval_fingerprints(python, hub["env_id"], hub.get("env_args"))
    atomic_write_json(path, fp)
    return fp


COVERAGE = 0.6


def overlapping_rows(rows: list[dict], fingerprints: dict) -> list[int]:
    """1-based line numbers of our rows that cover >= COVERAGE of one eval row's rare 8-grams."""
    import collections

    eval_rows = [set(r) for r in fingerprints["rows"]]
    where = collections.defaultdict(list)
    for j, hashes in enumerate(eval_rows):
        for h in hashes:
            where[h].append(j)
    hits = []
    for i, r in enumerate(rows):
        shared = collections.Counter(j for h in grams(row_text(r)) for j in where.get(h, ()))
        if any(c / len(eval_rows[j]) >= COVERAGE for j, c in shared.items()):
            hits.append(i + 1)
    return hits
