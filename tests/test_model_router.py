"""model_router: the oracle rule and the -1/0/1 rewards."""
from __future__ import annotations

import asyncio

from model_router import load_environment, route_reward_value
from model_router.table import build_table, oracle_pick


def test_oracle_prefers_resolved_then_cheapest():
    per = {"a": {"resolved": False, "cost": 0.01}, "b": {"resolved": True, "cost": 0.5},
           "c": {"resolved": True, "cost": 0.2}}
    assert oracle_pick(per) == "c"                         # tie among resolved: cheapest


def test_oracle_when_all_fail_is_the_cheapest_failure():
    per = {"a": {"resolved": False, "cost": 0.3}, "b": {"resolved": False, "cost": 0.1},
           "c": {"resolved": False, "cost": 0.2}}
    assert oracle_pick(per) == "b"


def test_rewards_minus_one_zero_one():
    info = {"per_model": {"a": {"resolved": True, "cost": 1.0}, "b": {"resolved": False, "cost": 0.1}}}
    assert route_reward_value("a", info) == 1.0
    assert route_reward_value("b", info) == 0.0
    assert route_reward_value("zzz", info) == -1.0
    assert route_reward_value(None, info) == -1.0


def test_rubric_scores_through_the_env_parser():
    env = load_environment()
    row = env.get_eval_dataset()[0]
    rubric = env.rubric
    from verifiers.types import State

    def reward(text):
        st = State(input={"prompt": row["prompt"], "answer": row["answer"], "info": row["info"],
                          "example_id": row["example_id"]})
        st["completion"] = [{"role": "assistant", "content": text}]
        st["trajectory"] = []
        asyncio.run(rubric.score_rollout(st))
        return st["reward"]

    other = next(m for m in row["info"]["per_model"] if m != row["answer"])
    assert reward(f"<model>{row['answer']}</model>") == 1.0
    assert reward(f"<model>{other}</model>") == 0.0
    assert reward("I pick the big one") == -1.0


def test_table_is_generated_deterministically_and_has_ties():
    t = build_table(0)
    assert t == build_table(0) and len(t) == 300
    assert any(sum(m["resolved"] for m in task["per_model"].values()) >= 2 for task in t)
    assert any(not any(m["resolved"] for m in task["per_model"].values()) for task in t)
