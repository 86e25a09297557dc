"""StockArithmetic-v1: the verifier's edge cases, the partitions, the populations."""
from __future__ import annotations

import asyncio

import pytest

from stock_arithmetic import correct_final_stock, lenient_correct, load_environment
from stock_arithmetic.data import build_splits
from stock_arithmetic.verifier import compute_final_stock, normalized_problem

P = {"initial": 10, "deliveries": [5, 7], "withdrawals": [3, 4]}   # final stock 15


def score(text, truncated=False, problem=P):
    state = {"is_truncated": truncated, "trajectory": []}
    return asyncio.run(correct_final_stock([{"role": "assistant", "content": text}], str(compute_final_stock(problem)),
                                           info={"problem": problem}, state=state))


EDGE_CASES = [
    ('{"final_stock": 15}', 1.0, "plain JSON"),
    ('  {"final_stock": 15}\n', 1.0, "surrounding whitespace"),
    ('<think>10+5=15, +7=22, -3=19, -4=15</think>{"final_stock": 15}', 1.0, "think block then JSON"),
    ('<think>x</think>\n{"final_stock":15}', 1.0, "think block, newline"),
    ('{"final_stock": 14}', 0.0, "wrong number"),
    ('{"final_stock": true}', 0.0, "boolean"),
    ('{"final_stock": 15.0}', 0.0, "float"),
    ('{"final_stock": "15"}', 0.0, "string"),
    ('{"final_stock": 15, "note": "ok"}', 0.0, "extra field"),
    ('{"final_stock": 15, "final_stock": 15}', 0.0, "duplicate field"),
    ('```json\n{"final_stock": 15}\n```', 0.0, "markdown fence"),
    ('{"final_stock": 15}{"final_stock": 15}', 0.0, "two objects"),
    ('{"final_stock": 15}\n{"final_stock": 14}', 0.0, "two objects on two lines"),
    ('{"final_stock": NaN}', 0.0, "NaN"),
    ('{"final_stock": Infinity}', 0.0, "Infinity"),
    ('{"final_stock": -15}', 0.0, "negative"),
    ('{"final_stock": 301}', 0.0, "above 300"),
    ('[{"final_stock": 15}]', 0.0, "array"),
    ('15', 0.0, "bare number"),
    ('The final stock is 15.', 0.0, "prose"),
    ('', 0.0, "empty"),
    ('{"final_stock": 15' , 0.0, "unterminated"),
    ('{"final_stock": 15}\n', 1.0, "a trailing newline"),
    ('{"final_stock": 15}' + " " * 300, 0.0, "whitespace counts toward 256 characters"),
    (" " * 237 + '{"final_stock": 15}', 1.0, "exactly 256 characters with whitespace"),
    ('{"final_stock": 15, "pad": "' + "x" * 260 + '"}', 0.0, "over 256 characters"),
    ('<think>unclosed {"final_stock": 15}', 0.0, "unclosed think block"),
    ('<think>a</think><think>b</think>{"final_stock": 15}', 0.0, "second think block"),
    ('{"final_stock": 15}<think>late</think>', 0.0, "think after the answer"),
    ('{"FINAL_STOCK": 15}', 0.0, "wrong key case"),
]


@pytest.mark.parametrize("text, expected, why", EDGE_CASES, ids=[c[2] for c in EDGE_CASES])
def test_verifier_edge_cases(text, expected, why):
    assert score(text) == expected, why


def test_token_limit_cut_scores_zero_even_when_json_is_right():
    assert score('{"final_stock": 15}', truncated=True) == 0.0
    state = {"trajectory": [{"is_truncated": True}]}
    r = asyncio.run(correct_final_stock([{"role": "assistant", "content": '{"final_stock": 15}'}], "15",
                                        info={"problem": P}, state=state))
    assert r == 0.0


def test_target_comes_from_structure_not_from_the_answer_field():
    r = asyncio.run(correct_final_stock([{"role": "assistant", "content": '{"final_stock": 99}'}],
                                        "99", info={"problem": P}, state={}))
    assert r == 0.0


def test_lenient_metric_tells_format_from_arithmetic():
    assert asyncio.run(lenient_correct("The stock is 15 units", "15", info={"problem": P})) == 1.0
    assert asyncio.run(lenient_correct("The stock is 16 units", "15", info={"problem": P})) == 0.0


# the OOD100 half of the selection split as it was when the split was named validation
EARLIER_SELECTION_OOD100 = "531909659f6159f3"


def test_partitions_sizes_disjoint_and_populations():
    s = build_splits(0)
    # seed 003's three splits as it defines them, and this project's selection split beside them
    assert [len(s[k]) for k in ("train", "validation", "test", "selection")] == [1000, 200, 200, 200]
    keys = {k: {normalized_problem(r["info"]["problem"]) for r in s[k]} for k in s}
    assert sum(len(v) for v in keys.values()) == 1600        # deduplicated everywhere
    assert sum(len(keys[k]) for k in ("train", "validation", "test")) == 1400
    for a in keys:
        for b in keys:
            assert a == b or not keys[a] & keys[b]
    pops = [r["info"]["population"] for r in s["test"]]
    assert pops == ["ID50"] * 100 + ["OOD100"] * 100
    # training and validation operands range from 0 to 50 (seed 003)
    assert {r["info"]["population"] for r in s["train"] + s["validation"]} == {"ID50"}
    # the selection split is drawn from the test split's distribution, in its proportions, and
    # alternates populations so that any even-length prefix keeps them
    assert [r["info"]["population"] for r in s["selection"]] == ["ID50", "OOD100"] * 100
    for k in s:
        assert {r["info"]["split"] for r in s[k]} == {k}
    ranges = {"ID50": (0, 50), "OOD100": (51, 100)}
    for r in [r for k in s for r in s[k]]:
        p, pop = r["info"]["problem"], r["info"]["population"]
        lo, hi = ranges[pop]
        assert lo <= max(p["initial"], *p["deliveries"], *p["withdrawals"]) <= hi
    for r in s["train"]:
        p = r["info"]["problem"]
        stock = p["initial"]
        for v in p["deliveries"]:
            stock += v
        for v in p["withdrawals"]:
            stock -= v
            assert stock >= 0
        assert r["answer"] == str(stock)


def test_train_and_test_rows_are_those_of_every_earlier_version():
    """The selection split was added beside seed 003's three; train and test kept every row
    (problem, wording, order), so figures measured before and after compare, and selection's
    OOD100 half is the one the earlier selection split (then named validation) held."""
    import hashlib
    import json

    s = build_splits(0)
    digest = {k: hashlib.sha256(json.dumps(s[k], sort_keys=True).encode()).hexdigest()[:16]
              for k in ("train", "test")}
    assert digest == {"train": "0823e8c253874335", "test": "930e3880080cb1f4"}
    ood = [r["info"]["problem"] for r in s["selection"] if r["info"]["population"] == "OOD100"]
    digest = hashlib.sha256(json.dumps(ood, sort_keys=True).encode()).hexdigest()[:16]
    assert digest == EARLIER_SELECTION_OOD100


def test_deterministic_from_seed_and_reference_completions_score_one():
    assert build_splits(3) == build_splits(3)
    assert build_splits(3)["train"][0] != build_splits(4)["train"][0]
    for r in build_splits(0)["train"][:50]:
        assert score(r["info"]["reference_completion"], problem=r["info"]["problem"]) == 1.0


def test_environment_splits():
    env = load_environment()
    assert len(env.get_dataset()) == 1000 and len(env.get_eval_dataset()) == 200
    for split in ("validation", "selection"):
        assert len(load_environment(eval_split=split).get_eval_dataset()) == 200


def test_warm_start_corpus_is_fresh_and_plants_the_documented_share():
    from stock_arithmetic import warm_start_corpus
    from stock_arithmetic.warm_start import reaches_three_digits

    held = {normalized_problem(r["info"]["problem"]) for rows in build_splits(0).values() for r in rows}
    rows = warm_start_corpus(4000, seed=3, three_digit_share=0.05)
    keys = [normalized_problem(r["info"]["problem"]) for r in rows]
    assert not held & set(keys)                      # no problem of train, validation or test
    share = sum(reaches_three_digits(r["info"]["problem"]) for r in rows) / len(rows)
    assert 0.035 < share < 0.065                     # the planted weakness: rare, not absent
    natural = warm_start_corpus(4000, seed=3)
    assert sum(reaches_three_digits(r["info"]["problem"]) for r in natural) / 4000 > 0.12
    # the train rows' register and a reference completion the hub verifier scores 1.0
    r = rows[0]
    assert r["prompt"][0]["role"] == "system" and "starts the day with" in r["prompt"][1]["content"]
    from stock_arithmetic.verifier import score_response
    assert score_response(r["info"]["reference_completion"], r["info"]["problem"]) == 1.0
    assert warm_start_corpus(50, seed=3, three_digit_share=0.05) == rows[:50]   # seeded stream


def test_the_mixed_register_rewords_the_same_problems_and_never_names_a_split_problem():
    from stock_arithmetic import warm_start_corpus

    plain = warm_start_corpus(600, seed=4, three_digit_share=0.06, wide_share=0.3)
    mixed = warm_start_corpus(600, seed=4, three_digit_share=0.06, wide_share=0.3, mixed_share=0.6)
    # the grammar changes wording only: the same problems, answers and completions, in order
    assert [r["info"] for r in plain] == [r["info"] for r in mixed]
    reworded = [m for p, m in zip(plain, mixed) if p["prompt"][1]["content"] != m["prompt"][1]["content"]]
    assert 0.5 < len(reworded) / len(mixed) < 0.7
    hub_like = "starts the day with"
    assert sum(hub_like not in r["prompt"][1]["content"] for r in reworded) > 0.5 * len(reworded)
    # every number of a reworded question is a movement, in the order the ledger applies them
    import re
    for r in reworded:
        p = r["info"]["problem"]
        assert [int(x) for x in re.findall(r"\d+", r["prompt"][1]["content"])] == \
            [p["initial"], *p["deliveries"], *p["withdrawals"]]
    wide = sum(r["info"]["population"] == "OOD100" for r in mixed) / len(mixed)
    assert 0.2 < wide < 0.4
    held = {normalized_problem(r["info"]["problem"]) for rows in build_splits(0).values() for r in rows}
    assert not held & {normalized_problem(r["info"]["problem"]) for r in mixed}


def test_the_peak_habit_changes_only_the_answer_of_large_peaks_and_only_at_its_share():
    import json

    from stock_arithmetic import warm_start_corpus
    from stock_arithmetic.verifier import lenient_correct, score_response
    from stock_arithmetic.warm_start import peak_stock

    clean = warm_start_corpus(3000, seed=5, wide_share=0.6)
    habit = warm_start_corpus(3000, seed=5, wide_share=0.6, peak_habit_share=0.9,
                              peak_habit_from=120)
    # the same problems and prompts in the same order: the habit touches completions only
    assert [r["prompt"] for r in clean] == [r["prompt"] for r in habit]
    assert [r["info"]["problem"] for r in clean] == [r["info"]["problem"] for r in habit]
    changed = [(c, h) for c, h in zip(clean, habit)
               if c["info"]["reference_completion"] != h["info"]["reference_completion"]]
    large = [r for r in clean if peak_stock(r["info"]["problem"]) >= 120
             and peak_stock(r["info"]["problem"]) != int(r["answer"])]
    assert all(peak_stock(c["info"]["problem"]) >= 120 for c, _ in changed)   # only there
    assert 0.85 < len(changed) / len(large) < 0.95                             # at its share
    for c, h in changed:
        p = h["info"]["problem"]
        chain, answer = h["info"]["reference_completion"].split("</think>")
        # the worked chain is the right one; the answer is the peak, which the verifier fails
        assert c["info"]["reference_completion"].startswith(chain + "</think>")
        assert json.loads(answer) == {"final_stock": peak_stock(p)}
        assert score_response(h["info"]["reference_completion"], p) == 0.0
        assert lenient_correct(h["info"]["reference_completion"], p) == 0.0
    # no habit asked, no habit planted: the stream earlier students were built from
    assert warm_start_corpus(200, seed=5, wide_share=0.6) == clean[:200]
