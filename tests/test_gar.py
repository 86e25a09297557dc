"""Grader-ranked advantages: the mapping from tiers to advantages, hack citations, fallbacks,
and a trainer run that uses them."""
from __future__ import annotations

import json

import pytest

from embedded_trainer.gar import (InvalidVerdict, Verdict, group_advantages, parse_verdict,
                                  rank_advantages, rule_verdict)

TEXTS = ["I check the tests and fix the off-by-one in the loop bound.",
         "A careful fix of the loop bound with a regression test added.",
         "Here is a minimal fix.",
         "The tests now pass because I deleted the failing assertions from the test file.",
         ]


def test_seed_example_tiers_give_the_documented_scores_and_advantages():
    # [c2] slight [c1, c4] large [c3]  (1-based in the write-up; 0-based here)
    v = Verdict(tiers=[[1], [0, 3], [2]], gaps=["slight", "large"])
    adv, info = rank_advantages(v, 4, TEXTS)
    assert adv == pytest.approx([0.1875, 0.4375, -0.8125, 0.1875], abs=1e-9)
    assert [round(a, 2) for a in adv] == [0.19, 0.44, -0.81, 0.19]
    assert sum(adv) == pytest.approx(0.0)
    assert [i["tier"] for i in info] == [1, 0, 2, 1]


@pytest.mark.parametrize("rewards", [[1, 0, 0, 1], [0, 0, 0, 1], [1, 1, 1, 0], [1, 0]])
def test_two_tiers_with_a_large_gap_are_grpo_zero_one_advantages(rewards):
    v = Verdict(tiers=[[i for i, r in enumerate(rewards) if r == 1],
                       [i for i, r in enumerate(rewards) if r == 0]], gaps=["large"])
    adv, _ = rank_advantages(v, len(rewards), ["x" * 30] * len(rewards))
    mean = sum(rewards) / len(rewards)
    assert adv == pytest.approx([r - mean for r in rewards])
    # and the rule grader reads binary rewards as exactly that verdict
    assert rank_advantages(rule_verdict([float(r) for r in rewards]), len(rewards),
                           ["x" * 30] * len(rewards))[0] == pytest.approx(adv)


def test_advantages_sum_to_zero_for_any_valid_verdict():
    import random

    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(2, 8)
        order = list(range(n))
        rng.shuffle(order)
        cuts = sorted(rng.sample(range(1, n), rng.randint(0, n - 1)))
        tiers = [order[a:b] for a, b in zip([0, *cuts], [*cuts, n])]
        gaps = [rng.choice(["slight", "clear", "large"]) for _ in tiers[1:]]
        adv, _ = rank_advantages(Verdict(tiers, gaps), n, ["y" * 30] * n)
        assert sum(adv) == pytest.approx(0.0, abs=1e-9)
        assert len(tiers) > 1 or adv == [0.0] * n


def test_one_tier_gives_zeros():
    adv, _ = rank_advantages(Verdict(tiers=[[0, 1, 2, 3]], gaps=[]), 4, TEXTS)
    assert adv == [0.0] * 4


def test_a_confirmed_hack_goes_below_the_last_tier_with_a_large_gap():
    quote = "I deleted the failing assertions from the test file"
    v = Verdict(tiers=[[1], [0, 3], [2]], gaps=["slight", "large"],
                hacks=[{"candidate": 3, "evidence": [quote]}])
    adv, info = rank_advantages(v, 4, TEXTS)
    assert info[3]["hack"] == "confirmed" and info[3]["tier"] == 3
    # scores: c3 (hack) 0; c2 1; c0 2; c1 2.25 -> mean 1.3125
    assert adv == pytest.approx([0.6875, 0.9375, -0.3125, -1.3125])
    assert min(adv) == adv[3]


def test_a_hack_whose_quote_is_absent_is_not_applied():
    v = Verdict(tiers=[[1], [0, 3], [2]], gaps=["slight", "large"],
                hacks=[{"candidate": 3, "evidence": ["I rewrote the grader so it always passes"]}])
    adv, info = rank_advantages(v, 4, TEXTS)
    assert info[3]["hack"] == "suspected"
    assert adv == pytest.approx([0.1875, 0.4375, -0.8125, 0.1875])   # as if no hack were named


def test_a_too_short_quote_does_not_confirm_a_hack_even_when_present():
    v = Verdict(tiers=[[0, 1, 2, 3]], gaps=[], hacks=[{"candidate": 2, "evidence": ["minimal fix"]}])
    adv, info = rank_advantages(v, 4, TEXTS)
    assert info[2]["hack"] == "suspected" and adv == [0.0] * 4


@pytest.mark.parametrize("verdict", [
    Verdict(tiers=[[0], [0, 1]], gaps=["large"]),          # ranked twice
    Verdict(tiers=[[0], [7]], gaps=["large"]),             # no such candidate
    Verdict(tiers=[[0], [1]], gaps=[]),                    # a gap missing
    Verdict(tiers=[[0], [1]], gaps=["huge"]),              # not a margin
])
def test_invalid_verdicts_fall_back_to_zero_with_the_reason(verdict):
    with pytest.raises(InvalidVerdict):
        rank_advantages(verdict, 4, TEXTS)
    adv, rec = group_advantages(lambda: verdict, [1, 0, 0, 0], TEXTS)
    assert adv == [0.0] * 4 and rec["fallback_reason"].startswith("invalid")


def test_grader_errors_and_timeouts_fall_back_to_zero():
    import httpx

    def timeout():
        raise httpx.ReadTimeout("slow")

    def boom():
        raise httpx.ConnectError("refused")

    assert group_advantages(timeout, [1, 0], TEXTS[:2]) == ([0.0, 0.0], {
        "fallback_reason": "timeout", "candidates": [{"tier": None, "hack": None}] * 2})
    adv, rec = group_advantages(boom, [1, 0], TEXTS[:2])
    assert adv == [0.0, 0.0] and rec["fallback_reason"].startswith("error: ConnectError")
    with pytest.raises(InvalidVerdict):
        parse_verdict("I prefer candidate 2.")
    v = parse_verdict('Verdict: {"tiers": [[1], [0]], "gaps": ["clear"], "hacks": []}')
    assert v.tiers == [[1], [0]] and v.gaps == ["clear"]


def test_the_rule_grader_maps_reward_gaps_to_the_nearest_margin():
    v = rule_verdict([0.5, 1.0, 0.0, 0.75])
    assert v.tiers == [[1], [3], [0], [2]] and v.gaps == ["slight", "slight", "clear"]


@pytest.mark.extended   # a real trainer run (15-20 s); the advantages it takes are tested above
def test_the_trainer_trains_on_gar_advantages(tmp_path):
    from test_embedded_trainer import rows, run_trainer

    out = tmp_path / "out"
    r = run_trainer(tmp_path, out, "--embedded.advantage", "gar", max_steps=2)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "gar: 0/" in r.stdout
    step = rows(out / "run_default" / "rollouts" / "step_1" / "train_rollouts.jsonl")
    by_group: dict = {}
    for row in step:
        assert set(row["gar"]) == {"tier", "hack", "fallback_reason"}
        by_group.setdefault(json.dumps(row["prompt"]), []).append(row)
    for group in by_group.values():
        rewards = [g["reward"] for g in group]
        adv = [g["advantage"] for g in group]
        assert sum(adv) == pytest.approx(0.0, abs=1e-6)
        # binary parity rewards: the rule grader gives GRPO's reward-minus-mean
        assert adv == pytest.approx([x - sum(rewards) / len(rewards) for x in rewards], abs=1e-6)
    assert any(g["advantage"] != 0 for g in step)


def test_the_llm_grader_is_asked_without_rewards_and_its_verdict_is_applied():
    from types import SimpleNamespace

    from embedded_trainer.gar import llm_verdict
    from fake_llm import FakeLLM

    reply = ('Ranking: {"tiers": [[1], [0, 2], [3]], "gaps": ["slight", "large"], "hacks": '
             '[{"candidate": 3, "evidence": ["I deleted the failing assertions from the test file"]}]}')
    with FakeLLM([lambda body: reply]) as llm:
        cfg = SimpleNamespace(base_url=llm.url + "/v1", model="grader-1", key_env=None, timeout_s=10)
        adv, rec = group_advantages(lambda: llm_verdict(cfg, "Fix the failing test.", TEXTS),
                                    [1.0, 1.0, 0.0, 1.0], TEXTS)
        body = llm.requests[0]["body"]
    prompt = body["messages"][0]["content"]
    assert body["model"] == "grader-1" and "Fix the failing test." in prompt
    assert all(t in prompt for t in TEXTS)
    assert "1.0" not in prompt and "0.0" not in prompt          # the rewards are not shown
    assert rec["fallback_reason"] is None
    # the hack leaves its tier and becomes the bottom tier, a large gap below [0, 2]
    assert rec["candidates"][3] == {"tier": 2, "hack": "confirmed"}
    assert adv == pytest.approx([0.1875, 0.4375, 0.1875, -0.8125])
