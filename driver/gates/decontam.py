"""Blind decontamination: does a generated row reproduce an item of the hub env's eval split?

The eval split is read only inside a subprocess (the interpreter that loads the env: the
env-side job `eval_fingerprints`), which returns, per eval row, hashes of its rare word 8-grams
and nothing else, so no eval text ever reaches the driver, its logs or the teacher. Both sides
hash with one copy of the code, driver/envside/fingerprint.py. N-grams found in many eval rows
(template boilerplate) are dropped there. One of our rows is flagged when it covers at least
COVERAGE of some single eval row's rare 8-grams: on StockArithmetic, distinct train problems
reach at most 0.52 by chance while a reworded copy of an eval problem reaches 0.77. The report
names *our* rows only.
"""
from __future__ import annotations

import json
from pathlib import Path

from driver.envs import envside, tasksets
from driver.envside.fingerprint import grams, row_text
from driver.run.files import atomic_write_json

__all__ = ["COVERAGE", "cached_fingerprints", "eval_fingerprints", "grams", "overlapping_rows", "row_text"]


def eval_fingerprints(python: str, env_id: str, env_args: dict | None = None) -> dict:
    """The classic env's eval split fingerprints: {"n", "eval_rows", "rows"}, hashes only."""
    return _fingerprints(python, envside.CLASSIC, env_id, env_args or {})


def _fingerprints(python: str, kind: str, env_id: str, env_args: dict) -> dict:
    try:
        got = envside.call(python, envside.JOBS[kind].eval_fingerprints,
                           envside.EnvRequest(env_id=env_id, env_args=env_args))
    except envside.EnvsideError as e:
        # the error's type and first line are the loader's, never eval rows
        first = (str(e).splitlines() or ["no output"])[0][:500]
        raise RuntimeError(f"could not fingerprint the eval split of {env_id}: {first}") from None
    return got.model_dump()


def cached_fingerprints(run_dir: Path, python: str, hub: dict) -> dict:
    """The run's fingerprints: written at introspection (same env load), else computed now."""
    path = Path(run_dir) / "eval_fingerprints.json"
    if path.exists():
        return json.loads(path.read_text())
    if hub.get("kind") == tasksets.KIND:
        fp = _fingerprints(python, tasksets.KIND, hub["env_id"], tasksets.eval_fields(hub))
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
