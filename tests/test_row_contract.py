"""The rollout-row contract (rl_contract/rows.py) against rows prime-rl's own code writes
(tests/fixtures/prime_rl_rows/: each produced through the writer's code path at prime-rl
v0.5.1.dev209 = 09e2977 with verifiers 58b119f, or v0.8.1.dev67 = 559b447 with verifiers
a60a606; each .md beside it names the file, function and lines), and the trainer double held to
the same keys. A classic eval row has no env name and its example ids restart per env: the
selection split is told apart by the label its env adds, or the run stops instead of mixing."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from driver.analysis.evaluation import aggregate
from driver.errors import DriverError
from rl_contract.current import eval_view, train_row
from rl_contract.rows import SELECTION_METRIC

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "prime_rl_rows"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def eval_file(tmp_path, rows: list[dict]) -> Path:
    p = tmp_path / "eval_rollouts.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def classic_rows(n: int, first_ok: int, selection: bool = False) -> list[dict]:
    rows = []
    for i in range(n):   # ids from 0, as every classic eval env's are
        r = copy.deepcopy(fixture("classic_eval_row"))
        ok = float(i < first_ok)
        r.update(example_id=i, reward=ok, is_correct=ok)
        r["metrics"] = {"is_correct": ok, "num_turns": 1.0,
                        **({SELECTION_METRIC: 1.0} if selection else {})}
        rows.append(r)
    return rows


def test_a_classic_eval_row_carries_no_env_name_but_ids_reward_and_metrics():
    row = fixture("classic_eval_row")
    assert "env_name" not in row and "env_name" in fixture("classic_train_row")
    assert isinstance(row["example_id"], int) and isinstance(row["reward"], float)
    assert isinstance(row["metrics"], dict)


def test_unlabelled_selection_rows_stop_the_run_instead_of_mixing_into_the_eval_split(tmp_path):
    """Both splits' rows as prime-rl writes them, no label: ids 0..9 twice, nothing to split on."""
    rows = classic_rows(10, 6) + classic_rows(10, 2)
    with pytest.raises(DriverError, match="no row is labelled as the selection split's"):
        aggregate(eval_file(tmp_path, rows), "hub-selection", selection_expected=True, unique_ids=True)
    with pytest.raises(DriverError, match="10 example ids repeat within the eval split"):
        aggregate(eval_file(tmp_path, rows), "hub-selection", unique_ids=True)


def test_the_selection_label_metric_splits_the_rows_with_their_own_ids(tmp_path):
    rows = classic_rows(10, 6) + classic_rows(10, 2, selection=True)
    s = aggregate(eval_file(tmp_path, rows), "hub-selection", selection_expected=True, unique_ids=True)
    assert (s["n_eval"], s["eval_acc"]) == (10, 0.6)
    assert (s["selection"]["n_eval"], s["selection"]["eval_acc"]) == (10, 0.2)
    assert set(s["correct_by_example"]) == set(s["selection"]["correct_by_example"]) == {str(i) for i in range(10)}


def test_a_row_without_an_example_id_stops_the_run(tmp_path):
    rows = classic_rows(4, 2)
    del rows[1]["example_id"]
    with pytest.raises(DriverError, match="1 of 4 rows have no example_id"):
        aggregate(eval_file(tmp_path, rows))


def test_a_current_episode_reads_its_source_name_key_and_weighted_reward():
    ep = fixture("current_eval_episode")
    v = eval_view(ep)
    assert v["env_name"] == ep["env"]["name"] and v["example_id"] == ep["task"]["key"]
    expected = sum(float(r["score"] or 0) * float(r.get("weight", 1.0))
                   for r in ep["traces"][0]["rewards"].values() if isinstance(r, dict))
    assert v["reward"] == pytest.approx(expected)
    assert set(v) == {"example_id", "env_name", "errored", "reward", "metrics"}   # numbers and labels only
    t = train_row(fixture("current_train_episode"))
    assert t["example_id"] == fixture("current_train_episode")["task"]["key"]


def test_the_trainer_doubles_eval_rows_have_prime_rls_keys_and_no_env_name(tmp_path, runs):
    from conftest import FAST, driver, driver_env, run_dir_from

    r = driver(["run", "--max-iters", "1", *FAST, "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    rd = run_dir_from(r.stdout)
    # the final eval alone, in step_max: the base model's eval at step 0 a fresh run would add
    # is turned off (eval_base_model = false: nothing reads it)
    files = sorted((rd / "iter_0" / "prime_out").rglob("eval_rollouts.jsonl"))
    assert [f.parent.name for f in files] == ["step_3"]
    allowed = set(fixture("classic_eval_row")) | {"info"}   # info: written when non-empty
    for f in files:
        rows = [json.loads(line) for line in f.read_text().splitlines()]
        assert all(set(row) <= allowed and "env_name" not in row for row in rows)
        labelled = [row for row in rows if row["metrics"].get(SELECTION_METRIC) == 1.0]
        assert len(labelled) == 200 and len(rows) == 400      # the selection env labels its rows
