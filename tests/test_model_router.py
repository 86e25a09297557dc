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


def test_family_generator_passes_the_gate_honestly_and_its_answers_are_the_oracle(tmp_path):
    import sys

    import verifiers as vf

    from driver.gates import dataset
    from driver.gates import accuracy, decontam
    from generators import round_trip
    from generators.model_router import BUCKETS, FEATURE_DEFINITIONS, generate
    from model_router.table import oracle_pick

    weakness = {
        "prev_eval_acc": 0.4, "reward_by_length_quartile": [0.5, 0.4, 0.3, 0.2],
        "domains": [{"name": d, "severity": "high", "evidence": "failed train routes",
                     "sub_domains": [{"name": s} for (d2, s) in BUCKETS if d2 == d]}
                    for d in dict.fromkeys(d for d, _ in BUCKETS)],
        "allocations": {f"{d} / {s}": 100 for d, s in BUCKETS},
        "structural_features": [{"name": k, "definition": v} for k, v in FEATURE_DEFINITIONS.items()],
    }
    train = list(vf.load_environment("model_router").get_dataset())
    skeletons = [{"source": f"train_step_2_idx_{i}", "info": r["info"]} for i, r in enumerate(train[:120])]
    out = tmp_path / "dataset.jsonl"
    rows = generate(weakness, skeletons, out=str(out), seed=3)
    assert len(rows) == 600
    assert all(r["answer"] == oracle_pick(r["info"]["per_model"]) for r in rows)
    assert all(BUCKETS[(r["info"]["domain"], r["info"]["sub_domain"])](r["info"]) for r in rows)
    round_trip("model_router", rows)          # the hub rubric gives every template's reasoning 1.0
    fp = decontam.eval_fingerprints(sys.executable, "model_router")
    rep = dataset.check(out, weakness, eval_fingerprints=fp,
                        scored=accuracy.score_rows(sys.executable, "model_router", None, out))
    assert rep.passed, rep.render()
