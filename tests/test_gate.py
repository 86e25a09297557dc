"""The dataset gate: the built-in generator passes honestly; crafted datasets fail the named line."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import driver
from driver.gates import accuracy, decontam, rules
from driver.gates import dataset
from generators import clone_key
from stock_arithmetic.data import build_splits
from generators.stock_arithmetic import BUCKETS, FEATURE_DEFINITIONS, generate

WEAKNESS = {
    "prev_eval_acc": 0.3,
    "reward_by_length_quartile": [0.4, 0.3, 0.2, 0.1],
    "domains": [{"name": d, "severity": "high", "evidence": "e",
                 "sub_domains": [{"name": s} for (d2, s) in BUCKETS if d2 == d]}
                for d in dict.fromkeys(d for d, _ in BUCKETS)],
    "allocations": {f"{d} / {s}": 100 for d, s in BUCKETS},
    "structural_features": [{"name": k, "definition": v} for k, v in FEATURE_DEFINITIONS.items()],
}
SKELETONS = [{"source": f"train_step_3_idx_{i}", "problem": r["info"]["problem"]}
             for i, r in enumerate(build_splits(0)["train"][:200])]


@pytest.fixture(scope="module")
def fingerprints():
    return decontam.eval_fingerprints(sys.executable, "stock_arithmetic")


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    path = tmp_path_factory.mktemp("gate") / "dataset.jsonl"
    generate(WEAKNESS, SKELETONS, out=str(path), seed=1)
    return path


ACCURATE = rules.LINE["accurate"].name


def lines(rep):
    return {n: ok for n, ok, _ in rep.lines}


def failed(rep, scored=False):
    """The False lines; unless the rows were scored, the accuracy line ("not scored") aside."""
    return [n for n, ok, _ in rep.lines if not ok and (scored or n != ACCURATE)]


def details(rep):
    return {n: d for n, _, d in rep.lines}


def test_builtin_generator_passes_every_line(good, fingerprints):
    scored = accuracy.score_rows(sys.executable, "stock_arithmetic", None, good)
    rep = dataset.check(good, WEAKNESS, eval_fingerprints=fingerprints, scored=scored)
    assert rep.passed, rep.render()
    assert rep.rows == 600 and len(scored["rows"]) == 600 and scored["ceiling"] == 1.0
    # every line the gate prints is defined once in rules, in the same order
    assert [n for n, _, _ in rep.lines] == [g.name for g in rules.LINES]


def test_unscored_rows_fail_the_accuracy_line_and_say_how_to_score_them(good, fingerprints):
    rep = dataset.check(good, WEAKNESS, eval_fingerprints=fingerprints)
    assert failed(rep, scored=True) == [ACCURATE] and "--env" in details(rep)[ACCURATE]


def _write(tmp_path, good, fn):
    rows = fn([json.loads(l) for l in good.read_text().splitlines()])
    p = tmp_path / "bad.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def _mutate(good, tmp_path, fn, fingerprints=None, weakness=WEAKNESS, score=False):
    p = _write(tmp_path, good, fn)
    scored = accuracy.score_rows(sys.executable, "stock_arithmetic", None, p) if score else None
    return dataset.check(p, weakness, eval_fingerprints=fingerprints, scored=scored)


def _info(r, **kw):
    return dict(r, info=dict(r["info"], **kw))


FIRST_BUCKET = BUCKETS and next(iter(BUCKETS))


def _two(features, i):
    """Two of a row's features, rotating which two so that every feature keeps its coverage."""
    if len(features) < 3:
        return features
    k = i % len(features)
    return [features[k], features[(k + 1) % len(features)]]


@pytest.mark.parametrize("line, fn", [
    ("rows well-formed", lambda rows: rows[:-1] + [{"question": "q", "answer": "1"}]),
    ("row count in [500, 1000]", lambda rows: [r for i, r in enumerate(rows) if i % 4]),
    ("every domain >=2 sub-domains", lambda rows: [
        _info(r, sub_domain=[s for d, s in BUCKETS if d == r["info"]["domain"]][0])
        if r["info"]["domain"] == "long running totals" else r for r in rows]),
    ("smallest (domain, sub_domain) >=3%", lambda rows: [
        r for r in rows if (r["info"]["domain"], r["info"]["sub_domain"]) != FIRST_BUCKET]
        + [r for r in rows if (r["info"]["domain"], r["info"]["sub_domain"]) == FIRST_BUCKET][:12]),
    ("hard >=40%", lambda rows: [_info(r, difficulty="medium") for r in rows]),
    ("easy <=20%", lambda rows: [_info(r, difficulty="easy") if i % 4 == 0 else r for i, r in enumerate(rows)]),
    (">=2 features (>=80%)", lambda rows: [_info(r, structural_features=r["info"]["structural_features"][:1])
                                           if i % 4 == 0 else r for i, r in enumerate(rows)]),
    (">=3 features (>=40%)", lambda rows: [_info(r, structural_features=_two(r["info"]["structural_features"], i))
                                           for i, r in enumerate(rows)]),
    ("per-feature coverage (each >=10%)", lambda rows: [
        _info(r, structural_features=[f for f in r["info"]["structural_features"] if f != "distractor_numbers"]
              + (["interleaved_order"] if "interleaved_order" not in r["info"]["structural_features"] else []))
        for r in rows]),
    ("features defined in weakness report", lambda rows: [
        _info(r, structural_features=r["info"]["structural_features"] + ["made_up_feature"]) for r in rows]),
    ("skeleton-source (>=30%)", lambda rows: [_info(r, source="template:x") for r in rows]),
    ("every bucket is in the weakness report", lambda rows: [_info(r, sub_domain="new label") if i < 30 else r
                                                             for i, r in enumerate(rows)]),
    ("no duplicate rows", lambda rows: rows[:-1] + [rows[0]]),
    ("no reasoning depth >70% within a bucket", lambda rows: [_info(r, reasoning_depth=4) for r in rows]),
])
def test_each_crafted_dataset_fails_exactly_its_line(good, tmp_path, fingerprints, line, fn):
    rep = _mutate(good, tmp_path, fn, fingerprints)
    assert failed(rep) == [line], rep.render()


def test_two_domains_fail_only_the_domain_count(good, tmp_path, fingerprints):
    merged = "carry-heavy deliveries"
    weakness = json.loads(json.dumps(WEAKNESS))
    lrt = next(d for d in weakness["domains"] if d["name"] == "long running totals")
    next(d for d in weakness["domains"] if d["name"] == merged)["sub_domains"] += lrt["sub_domains"]
    weakness["allocations"].update({f"{merged} / {s['name']}": 100 for s in lrt["sub_domains"]})
    rep = _mutate(good, tmp_path, lambda rows: [_info(r, domain=merged) if r["info"]["domain"] ==
                                                "long running totals" else r for r in rows],
                  fingerprints, weakness=weakness)
    assert failed(rep) == [">=3 domains"], rep.render()


def test_weakness_json_problems_are_named_field_by_field(good, tmp_path, fingerprints):
    bad = json.loads(json.dumps(WEAKNESS))
    bad["domains"][0]["severity"] = "urgent"
    bad["domains"][1]["sub_domains"] = bad["domains"][1]["sub_domains"][:1]
    bad["structural_features"] = bad["structural_features"][:2]
    del bad["prev_eval_acc"]
    rep = _mutate(good, tmp_path, lambda rows: rows, fingerprints, weakness=bad)
    detail = dict((n, d) for n, _, d in rep.lines)["weakness.json valid"]
    for field in ("domains.0.severity", "domains.1.sub_domains", "structural_features", "prev_eval_acc"):
        assert field in detail, detail
    allocs = json.loads(json.dumps(WEAKNESS))
    allocs["allocations"] = {k: 20 for k in allocs["allocations"]}        # sums to 120
    from driver.gates import weakness
    assert any("sum to 120" in p for p in weakness.problems(allocs))


def test_decontamination_finds_planted_eval_items_and_prints_none_of_them(good, tmp_path, fingerprints):
    import verifiers as vf

    evals = list(vf.load_environment("stock_arithmetic").get_eval_dataset())
    planted = [evals[3], evals[50]]
    texts = [decontam.row_text(e) for e in planted]
    reworded = texts[1].replace("starts the day with", "begins with").replace("How many", "What number")

    def plant(rows):
        rows = list(rows)
        rows[10] = dict(rows[10], question=texts[0])
        rows[20] = dict(rows[20], question=reworded)
        return rows

    rep = _mutate(good, tmp_path, plant, fingerprints)
    assert failed(rep) == ["no overlap with the eval split (blind)"]
    detail = dict((n, d) for n, _, d in rep.lines)["no overlap with the eval split (blind)"]
    assert "2 of our rows" in detail and "lines 11, 21" in detail
    out = rep.render() + json.dumps(rep.to_json())
    for t in texts:
        assert t not in out and t[:40] not in out
    # the fingerprints themselves are hashes: no eval text in them either
    assert not any(" " in h for row in fingerprints["rows"] for h in row)


def test_round_trip_fails_loudly_on_a_template_that_disagrees_with_its_answer(good):
    from generators import round_trip

    rows = [json.loads(l) for l in good.read_text().splitlines()][:40]
    round_trip("stock_arithmetic", rows)                      # the real templates agree
    key = (rows[0]["info"]["domain"], rows[0]["info"]["sub_domain"])
    def corrupt(r):  # the template's reasoning now ends in another number than its answer
        return _info(r, reasoning=r["info"]["reasoning"].replace('"final_stock": ', '"final_stock": 1'))

    broken = [corrupt(r) if (r["info"]["domain"], r["info"]["sub_domain"]) == key else r
              for r in rows]
    with pytest.raises(AssertionError, match=f"round-trip failed for template {key[0]} / {key[1]}"):
        round_trip("stock_arithmetic", broken)


def test_clones_are_caught_within_and_across_iterations(good, tmp_path, fingerprints):
    assert clone_key("Sally has 5 apples and gives Sarah 7.") == clone_key("Sally has 9 apples and gives Mira 2.")
    rows = [json.loads(l) for l in good.read_text().splitlines()]
    source = next(r for r in rows if "1" in r["question"] or "2" in r["question"])
    renumbered = source["question"].replace("1", "4").replace("2", "8")
    assert renumbered != source["question"]
    for name in ("Amara", "Bruno", "Chen", "Dalia", "Emeka", "Farah"):
        renumbered = renumbered.replace(name, "Zora")          # and renamed
    renamed = dict(source, question=renumbered)
    rep = _mutate(good, tmp_path, lambda rs: rs[:-1] + [renamed], fingerprints)
    assert failed(rep) == ["no clone pairs"]
    rep = dataset.check(good, WEAKNESS, prior=[good], eval_fingerprints=fingerprints)
    assert lines(rep)["no clone of a prior iteration's row"] is False


def test_validate_cli_prints_each_line_and_exit_code(good, tmp_path):
    w = tmp_path / "weakness.json"
    w.write_text(json.dumps(WEAKNESS))
    r = driver(["validate", good, "--weakness", w, "--env", "stock_arithmetic"], dict(os.environ))
    assert r.returncode == 0 and r.stdout.count(": True") == len(r.stdout.strip().splitlines())
    r = driver(["validate", good, "--weakness", w, "--prior", good, "--json", "--env", "stock_arithmetic"],
               dict(os.environ))
    assert r.returncode == 1 and json.loads(r.stdout)["passed"] is False


def test_a_failing_line_names_its_field_every_failing_bucket_and_row_lines(good, tmp_path, fingerprints):
    rows = [json.loads(l) for l in good.read_text().splitlines()]
    two = list(dict.fromkeys((r["info"]["domain"], r["info"]["sub_domain"]) for r in rows))[:2]

    def strip_depth(rs):   # two buckets lose their reasoning_depth: one value (null) in each
        return [dict(r, info={k: v for k, v in r["info"].items() if k != "reasoning_depth"})
                if (r["info"]["domain"], r["info"]["sub_domain"]) in two else r for r in rs]

    rep = _mutate(good, tmp_path, strip_depth, fingerprints)
    assert failed(rep) == [rules.LINE["depth"].name]
    d = details(rep)[rules.LINE["depth"].name]
    assert "reads info.reasoning_depth" in d and "no info.reasoning_depth" in d
    for dom, sub in two:
        assert f"{dom}/{sub}" in d
    first = next(i for i, r in enumerate(rows, 1) if (r["info"]["domain"], r["info"]["sub_domain"]) in two)
    assert f"lines {first}," in d
    rep = _mutate(good, tmp_path, lambda rs: [_info(r, difficulty="medium") for r in rs], fingerprints)
    d = details(rep)["hard >=40%"]
    assert "reads info.difficulty" in d and "0.000 hard" in d and "lines 1, 2, 3, 4, 5 ..." in d


def test_med_counts_as_medium(good, tmp_path, fingerprints):
    rep = _mutate(good, tmp_path, lambda rs: [_info(r, difficulty="med") if r["info"]["difficulty"] == "medium"
                                              else r for r in rs], fingerprints)
    assert failed(rep) == [], rep.render()
    rep = _mutate(good, tmp_path, lambda rs: [_info(rs[0], difficulty="mid")] + rs[1:], fingerprints)
    assert failed(rep) == ["rows well-formed"] and "line 1: info.difficulty 'mid'" in details(rep)["rows well-formed"]


def test_wrong_answers_in_reasoning_fail_the_accuracy_line_by_template_and_line(good, tmp_path, fingerprints):
    rows = [json.loads(l) for l in good.read_text().splitlines()]
    key = (rows[0]["info"]["domain"], rows[0]["info"]["sub_domain"])

    def corrupt(rs):   # one template's reasoning ends in another number than its answer
        return [_info(r, reasoning=r["info"]["reasoning"].replace('"final_stock": ', '"final_stock": 1'))
                if (r["info"]["domain"], r["info"]["sub_domain"]) == key else r for r in rs]

    rep = _mutate(good, tmp_path, corrupt, fingerprints, score=True)
    assert failed(rep, scored=True) == [ACCURATE], rep.render()
    d = details(rep)[ACCURATE]
    n_bad = sum((r["info"]["domain"], r["info"]["sub_domain"]) == key for r in rows)
    assert d.startswith(f"{n_bad} of 600 rows below full reward: {key[0]}/{key[1]}: {n_bad} rows, reward 0 of 1")
    assert "lines 1," in d


def test_rows_without_an_info_key_the_rubric_reads_fail_with_the_rubrics_own_words(good, tmp_path, fingerprints):
    from driver.envs.introspect import introspect

    hub = introspect(sys.executable, "stock_arithmetic")
    assert "problem" in hub["info_keys_read"]     # listed for the teacher (hub_env.json, TEACHER.md)
    rep = _mutate(good, tmp_path, lambda rs: [dict(r, info={k: v for k, v in r["info"].items() if k != "problem"})
                                              for r in rs], fingerprints, score=True)
    assert failed(rep, scored=True) == [ACCURATE], rep.render()
    assert "'problem'" in details(rep)[ACCURATE]


def test_validate_help_states_the_row_schema_and_every_line():
    out = subprocess.run([sys.executable, "-m", "driver.cli", "validate", "--help"], capture_output=True,
                         text=True).stdout
    for f in rules.ROW_FIELDS:
        assert f"`{f.name}`" in out
    for g in rules.LINES:
        assert f"**{g.name}**" in out


def test_the_generators_library_requires_the_schema_the_gate_checks():
    from generators.core import REQUIRED_INFO

    assert set(REQUIRED_INFO) == set(rules.REQUIRED_INFO)
    assert {f.name for f in rules.ROW_FIELDS} >= {f"info.{k}" for k in REQUIRED_INFO}


def test_buckets_no_failed_skeleton_fits_leave_the_skeleton_share_to_those_it_fits(tmp_path, fingerprints):
    """Every failure a peak of 140 or more (the habit whole, nothing else failing) and half the
    plan in a bucket those can never be paraphrased into (a closing stock of 9 or less: the
    skeletons' peaks minus two withdrawals of at most 50 stay above it): that bucket takes no
    skeleton rows, so at 40% a bucket the dataset fell under the gate's skeleton line on every
    retry, and the loop trained nothing (a seed of the demo did). The other buckets carry the
    share instead, and the gate passes the rows."""
    from generators import core
    from generators.stock_arithmetic import solve

    assert core.SKELETON_FLOOR == rules.MIN_SKELETON
    near_zero = "borrow-heavy withdrawals / withdrawal to near zero"
    weakness = {**WEAKNESS, "allocations": {k: (300 if k == near_zero else 60) for k in WEAKNESS["allocations"]}}
    peaks = [{"source": f"train_step_3_idx_{i}", "problem": {"initial": 50 - i % 3, "deliveries": [48, 47 - i % 5],
                                                              "withdrawals": [10 + i % 7, 20 + i % 11]}}
             for i in range(40)]
    out = tmp_path / "dataset.jsonl"
    rows = generate(weakness, peaks, out=str(out), seed=3)
    by_bucket: dict = {}
    for r in rows:
        n = by_bucket.setdefault(r["info"]["sub_domain"], [0, 0])
        n[0] += 1
        n[1] += r["info"]["source"].startswith("skeleton:")
    assert by_bucket["withdrawal to near zero"] == [300, 0]
    assert all(solve(r["info"]["problem"]) <= 9 for r in rows if r["info"]["sub_domain"] == "withdrawal to near zero")
    assert sum(k for _, k in by_bucket.values()) >= rules.MIN_SKELETON * len(rows) == 0.3 * 600
    rep = dataset.check(out, weakness, eval_fingerprints=fingerprints)
    assert lines(rep)[rules.LINE["skeleton"].name], details(rep)[rules.LINE["skeleton"].name]
    # a second pass only under the line: a dataset that cleared it is kept as it was made
    assert core.spread_skeleton_share(0.4, {"a": 300, "b": 300}, {"a": 0, "b": 120}) == {"a": 0.4, "b": 0.8}
    assert core.spread_skeleton_share(0.4, {"a": 300, "b": 300}, {"a": 0, "b": 180}) is None
    assert core.spread_skeleton_share(0.4, {"a": 100, "b": 500}, {"a": 0, "b": 10}) == {"a": 0.4, "b": 0.48}
    assert core.spread_skeleton_share(0.4, {"a": 300, "b": 300}, {"a": 0, "b": 0}) is None


def _plan(family, heavy: str, heavy_rows: int, other_rows: int) -> dict:
    """A weakness report over every bucket of `family`, those whose domain or sub-domain is
    `heavy` given `heavy_rows` and every other bucket `other_rows`."""
    return {"domains": [{"name": d, "severity": "high", "evidence": "e",
                         "sub_domains": [{"name": s} for d2, s in family.BUCKETS if d2 == d]}
                        for d in dict.fromkeys(d for d, _ in family.BUCKETS)],
            "allocations": {f"{d} / {s}": (heavy_rows if heavy in (s, d) else other_rows) for d, s in family.BUCKETS},
            "structural_features": [{"name": k, "definition": v} for k, v in family.FEATURE_DEFINITIONS.items()]}


@pytest.mark.parametrize("family, plan, failures, unfit", [
    # every failure an addition: no multiplication bucket takes a skeleton, and they hold 65% of the plan
    ("tool_calculator", ("multiplication", 130, 70),
     [{"source": f"train_step_2_idx_{i}", "info": {"op": "add", "a_digits": 1 + i % 3, "b_digits": 1 + (i // 3) % 3}}
      for i in range(27)], lambda r: r["info"]["op"] == "multiply"),
    # every failed game a narrow range: the wide and middling buckets take none
    ("hidden_number", ("", 0, 100),   # 100 rows in every bucket
     [{"source": f"train_step_2_idx_{i}", "info": {"width": 5 + i % 4, "spare": i % 2}} for i in range(20)],
     lambda r: not r["info"]["domain"].startswith("narrow")),
    # every failed task touched one or two files: the many-files bucket, half the plan, takes none
    ("model_router", ("many files all fail", 300, 60),
     [{"source": f"train_step_2_idx_{i}", "info": {"difficulty": ["easy", "medium", "hard"][i % 3],
                                                   "files_touched": 1 + i % 2}}
      for i in range(20)], lambda r: r["info"]["sub_domain"] == "many files all fail"),
])
def test_every_family_generator_leaves_the_skeleton_share_to_the_buckets_a_failure_fits(tmp_path, family, plan,
                                                                                        failures, unfit):
    """The other family generators, as StockArithmetic above: where buckets that no failure
    fits hold much of the plan, a 40% share in every bucket fell under the gate's skeleton line
    on every retry (24.5%, 29.7% and 28.5% of the rows here); the buckets that take failures carry
    the share instead, and the dataset clears the line."""
    import importlib

    fam = importlib.import_module(f"generators.{family}")
    weakness = _plan(fam, *plan)
    rows = fam.generate(weakness, failures, out=str(tmp_path / "dataset.jsonl"), seed=3)
    from_skeletons = [r["info"]["source"].startswith("skeleton:") for r in rows]
    assert rows and not any(k for r, k in zip(rows, from_skeletons) if unfit(r))
    assert sum(from_skeletons) >= rules.MIN_SKELETON * len(rows), (sum(from_skeletons), len(rows))


def test_problems_drawn_in_an_aim_are_valid_inside_it_and_spread_over_it():
    """The teacher's failing range is drawn evenly over the range, not as the train split
    spreads it (where a peak thins out fast above 100), and every problem is a valid one."""
    import random

    from generators.stock_arithmetic import MAGNITUDES, in_aim, sample_in_aim, valid

    rng = random.Random(0)
    for aim in ({"magnitude": "peak stock", "at_least": 120}, {"magnitude": "peak stock", "at_most": 40},
                {"magnitude": "closing stock", "at_least": 60}):
        drawn = [sample_in_aim(rng, aim) for _ in range(600)]
        assert all(valid(p) and in_aim(p, aim) for p in drawn), aim
        values = [MAGNITUDES[aim["magnitude"]](p) for p in drawn]
        if aim["magnitude"] == "peak stock":
            lo, hi = (120, 150) if "at_least" in aim else (0, 40)
            # each third of the range holds about a third of the draws
            thirds = [sum(lo + k * (hi - lo) / 3 <= v <= lo + (k + 1) * (hi - lo) / 3 for v in values)
                      for k in range(3)]
            assert min(thirds) > 0.25 * len(values), thirds
