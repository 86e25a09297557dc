"""The numeric-only eval aggregator, on constructed files with known answers."""
from __future__ import annotations

import json

import pytest

from driver.errors import DriverError
from driver.analysis.evaluation import aggregate, verdict

CANARY = "CANARY-eval-text-7f3a"


def write(tmp_path, rows):
    p = tmp_path / "eval_rollouts.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def row(eid, reward, **metrics):
    return {"example_id": eid, "reward": reward, "metrics": metrics, "prompt": CANARY,
            "completion": [{"role": "assistant", "content": CANARY}], "answer": CANARY,
            "info": {"secret": CANARY}}


def test_known_aggregates_and_no_text_in_the_result(tmp_path):
    rows = [row(0, 1.0, is_correct=1.0, lenient_correct=1.0), row(1, 0.0, is_correct=0.0, lenient_correct=1.0),
            row(2, 1.0, is_correct=1.0, lenient_correct=1.0), row(3, -1.0, is_correct=0.0, lenient_correct=0.0)]
    s = aggregate(write(tmp_path, rows))
    assert s["eval_acc"] == 0.5 and s["n_eval"] == 4
    assert s["eval_reward_mean"] == pytest.approx(0.25)
    assert s["eval_lenient_acc"] == 0.75
    assert s["correct_by_example"] == {"0": 1, "1": 0, "2": 1, "3": 0}
    assert CANARY not in json.dumps(s)


def test_reward_threshold_without_is_correct_and_majority_per_example(tmp_path):
    rows = [row(7, 1.0), row(7, 1.0), row(7, 0.0), row(8, 0.0), row(8, 1.0)]
    s = aggregate(write(tmp_path, rows))
    assert s["eval_acc"] == pytest.approx(3 / 5)
    assert s["correct_by_example"] == {"7": 1, "8": 0}      # 2 of 3 vs 1 of 2


def test_missing_empty_and_partial_files_are_clear_errors(tmp_path):
    with pytest.raises(DriverError, match="eval file missing"):
        aggregate(tmp_path / "nope.jsonl")
    with pytest.raises(DriverError, match="empty"):
        aggregate(write(tmp_path, []))
    p = write(tmp_path, [row(0, 1.0)])
    p.write_text(p.read_text() + '{"example_id": 1, "rew')
    with pytest.raises(DriverError, match="line 2 is not JSON") as e:
        aggregate(p)
    assert CANARY not in str(e.value)


def test_verdicts():
    assert verdict(0.50, None, 0.4) is None
    assert verdict(0.51, 0.50, 0.4) == "improved"
    assert verdict(0.505, 0.50, 0.4) == "flat"
    assert verdict(0.49, 0.50, 0.4) == "regressed"
    assert verdict(0.19, 0.30, 0.4) == "collapsed"
    # with the examples behind them: resolved drops only
    assert verdict(0.19, 0.30, 0.4, n=200) == "collapsed"
    assert verdict(0.0, 0.01, 0.01, n=100) == "regressed"      # 1 -> 0 of 100
    assert verdict(0.0, 0.0, 0.01, n=100) == "flat"


def test_populations_are_split_by_their_numeric_label_only(tmp_path):
    ID, OOD = {"population_ID50": 1.0, "population_OOD100": 0.0}, {"population_ID50": 0.0, "population_OOD100": 1.0}
    rows = [row(0, 1.0, is_correct=1.0, **ID), row(1, 0.0, is_correct=0.0, **ID),
            row(2, 1.0, is_correct=1.0, **OOD), row(3, 1.0, is_correct=1.0, **OOD),
            row(4, 0.0, is_correct=0.0, **OOD)]
    s = aggregate(write(tmp_path, rows))
    assert s["acc_by_population"] == {"ID50": 0.5, "OOD100": pytest.approx(2 / 3)}
    assert s["n_by_population"] == {"ID50": 2, "OOD100": 3}
    assert s["population_by_example"] == {"0": "ID50", "1": "ID50", "2": "OOD100", "3": "OOD100",
                                          "4": "OOD100"}
    assert CANARY not in json.dumps(s)


def test_any_env_names_its_own_populations_and_an_ambiguous_label_splits_nothing(tmp_path):
    # the naming rule, not a list in the driver: population_<NAME> metrics at 1 for the row's own
    rows = [row(0, 1.0, is_correct=1.0, population_easy=1.0, population_hard=0.0),
            row(1, 0.0, is_correct=0.0, population_easy=0.0, population_hard=1.0)]
    s = aggregate(write(tmp_path, rows))
    assert s["acc_by_population"] == {"easy": 1.0, "hard": 0.0}
    both = [row(0, 1.0, is_correct=1.0, population_easy=1.0, population_hard=1.0),
            row(1, 0.0, is_correct=0.0, population_easy=0.0, population_hard=1.0)]
    assert "acc_by_population" not in aggregate(write(tmp_path, both))
    unlabelled = [row(0, 1.0, is_correct=1.0, population_easy=1.0), row(1, 0.0, is_correct=0.0)]
    assert "acc_by_population" not in aggregate(write(tmp_path, unlabelled))


def test_draws_are_summarised_apart_from_the_greedy_rollout_per_split(tmp_path):
    """Seed 003's two measurements from one file: the greedy rollout of each example, and its k
    stochastic draws (rows of the env named for them, several per example), per split; the
    per-draw success rate counts every draw (not the best of an example's draws)."""
    from driver.dialects.classic import DRAWS_ENVS, SELECTION_ENV

    def named(eid, reward, env, **metrics):
        return {**row(eid, reward, **metrics), "env_name": env}

    rows = [named(0, 1.0, "stock"), named(1, 0.0, "stock"),
            named(0, 1.0, SELECTION_ENV), named(1, 1.0, SELECTION_ENV)]
    # draws: example 0 right 3 of 4, example 1 right 1 of 4; selection's draws all right
    rows += [named(0, float(d < 3), DRAWS_ENVS["eval"]) for d in range(4)]
    rows += [named(1, float(d < 1), DRAWS_ENVS["eval"]) for d in range(4)]
    rows += [named(i, 1.0, DRAWS_ENVS["selection"]) for i in (0, 1) for _ in range(4)]
    s = aggregate(write(tmp_path, rows), selection_env=SELECTION_ENV, selection_expected=True,
                  unique_ids=True, draws_envs=DRAWS_ENVS)
    assert (s["eval_acc"], s["n_eval"], s["selection"]["eval_acc"]) == (0.5, 2, 1.0)
    assert s["draws"]["acc"] == 0.5 and s["draws"]["n"] == 8 and s["draws"]["per_example"] == 4
    assert s["draws"]["mean_by_example"] == {"0": 0.75, "1": 0.25}
    assert s["selection"]["draws"]["acc"] == 1.0 and s["selection"]["draws"]["n"] == 8
    assert CANARY not in json.dumps(s)
    # without the draws' names they are rows of a split with one rollout per example, and the
    # row contract stops them from mixing into the greedy accuracy
    with pytest.raises(DriverError, match="repeat"):
        aggregate(write(tmp_path, rows), selection_env=SELECTION_ENV, selection_expected=True,
                  unique_ids=True)
