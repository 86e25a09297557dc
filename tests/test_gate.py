"""The dataset gate: the built-in generator passes honestly; crafted datasets fail the named line."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from driver.gates import dataset as gate
from generators import clone_key
from stock_arithmetic.data import build_splits
from generators.stock_arithmetic import BUCKETS, FEATURE_DEFINITIONS, generate

WEAKNESS = {
    "domains": [{"name": d, "severity": "high", "evidence": "e",
                 "sub_domains": [{"name": s} for (d2, s) in BUCKETS if d2 == d]}
                for d in dict.fromkeys(d for d, _ in BUCKETS)],
    "allocations": {f"{d} / {s}": 100 for d, s in BUCKETS},
    "structural_features": [{"name": k, "definition": v} for k, v in FEATURE_DEFINITIONS.items()],
}
SKELETONS = [{"source": f"train_step_3_idx_{i}", "problem": r["info"]["problem"]}
             for i, r in enumerate(build_splits(0)["train"][:200])]


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("gate") / "dataset.jsonl"
    generate(WEAKNESS, SKELETONS, out=str(path), seed=1)
    return path


def lines(rep):
    return {n: ok for n, ok, _ in rep.lines}


def test_builtin_generator_passes_every_line(good):
    rep = gate.check(good, WEAKNESS)
    assert rep.passed, rep.render()
    assert rep.rows == 600


def _mutate(good, tmp_path, fn):
    rows = [json.loads(l) for l in good.read_text().splitlines()]
    rows = fn(rows)
    p = tmp_path / "bad.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return gate.check(p, WEAKNESS)


@pytest.mark.parametrize("line, fn", [
    ("row count in [500, 1000]", lambda rows: rows[:450]),
    ("hard >=40%", lambda rows: [dict(r, info=dict(r["info"], difficulty="medium")) for r in rows]),
    ("easy <=20%", lambda rows: [dict(r, info=dict(r["info"], difficulty="easy")) if i % 4 == 0 else r for i, r in enumerate(rows)]),
    ("skeleton-source (>=30%)", lambda rows: [dict(r, info=dict(r["info"], source="template:x")) for r in rows]),
    (">=3 domains", lambda rows: [r for r in rows if r["info"]["domain"] != "long running totals"] + rows[:100]),
    ("no duplicate rows", lambda rows: rows[:-1] + [rows[0]]),
    ("every bucket is in the weakness report", lambda rows: [dict(r, info=dict(r["info"], sub_domain="new label")) if i < 30 else r for i, r in enumerate(rows)]),
])
def test_crafted_datasets_fail_their_line(good, tmp_path, line, fn):
    rep = _mutate(good, tmp_path, fn)
    assert lines(rep)[line] is False
    assert not rep.passed


def test_clones_are_caught_within_and_across_iterations(good, tmp_path):
    assert clone_key("Sally has 5 apples and gives Sarah 7.") == clone_key("Sally has 9 apples and gives Mira 2.")
    rows = [json.loads(l) for l in good.read_text().splitlines()]
    source = next(r for r in rows if "1" in r["question"] or "2" in r["question"])
    renumbered = source["question"].replace("1", "4").replace("2", "8")
    assert renumbered != source["question"]
    for name in ("Amara", "Bruno", "Chen", "Dalia", "Emeka", "Farah"):
        renumbered = renumbered.replace(name, "Zora")          # and renamed
    renamed = dict(source, question=renumbered)
    rep = _mutate(good, tmp_path, lambda rs: rs[:-1] + [renamed])
    assert lines(rep)["no clone pairs"] is False
    rep = gate.check(good, WEAKNESS, prior=[good])
    assert lines(rep)["no clone of a prior iteration's row"] is False


def test_validate_cli_prints_each_line_and_exit_code(good, tmp_path):
    w = tmp_path / "weakness.json"
    w.write_text(json.dumps(WEAKNESS))
    r = subprocess.run([sys.executable, "-m", "driver.cli", "validate", str(good), "--weakness", str(w)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.count(": True") == len(r.stdout.strip().splitlines())
    r = subprocess.run([sys.executable, "-m", "driver.cli", "validate", str(good), "--weakness", str(w),
                        "--prior", str(good), "--json"], capture_output=True, text=True)
    assert r.returncode == 1 and json.loads(r.stdout)["passed"] is False
