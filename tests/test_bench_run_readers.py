"""The benches that read finished runs. `bench/lift.py --split selection`: the lifts a candidate
is compared on, read from the arms' selection-split records only (hand-built records whose test
and selection outcomes differ, so a figure read from the wrong split shows). `bench/teacher_rows.py`:
live groups at the trigger, counted per step and example."""
from __future__ import annotations

import importlib.util
import json
import time

from driver.analysis import stats
from driver.run.model import RunState
from driver.run.rundir import RunDir

N = 100


def right(k: int) -> dict[str, int]:
    return {str(i): int(i < k) for i in range(N)}


def draws(k: int) -> dict:
    """Four draws per example, the first k examples right in 3 of them."""
    means = {str(i): (0.75 if i < k else 0.0) for i in range(N)}
    return {"acc": sum(means.values()) / N, "n": 4 * N, "n_examples": N, "per_example": 4,
            "mean_by_example": means}


def write_arm(d, test_k: int, sel_k: int) -> dict:
    d.mkdir(parents=True, exist_ok=True)
    d.joinpath("eval_summary.json").write_text(json.dumps({
        "eval_acc": test_k / N, "n_eval": N, "correct_by_example": right(test_k), "draws": draws(test_k),
        "eval_config": {"temperature": 0.0, "examples": N},
        "selection": {"eval_acc": sel_k / N, "n_eval": N, "correct_by_example": right(sel_k),
                      "draws": draws(sel_k)}}))
    return {"eval_acc": test_k / N, "n_eval": N, "draws_acc": 0.75 * test_k / N,
            "selection_acc": sel_k / N, "selection_draws_acc": 0.75 * sel_k / N, "n_selection": N}


def bench_lift():
    spec = importlib.util.spec_from_file_location("bench_lift", "bench/lift.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_selection_view_pairs_the_selection_split_and_prints_no_test_figure(tmp_path):
    rd = RunDir(tmp_path / "run")
    rd.path.mkdir(parents=True)
    rd.save(RunState(dataset="stock_arithmetic", hub_id="h", model="m", start_ts=time.time(),
                     budget_seconds=60, max_iters=1, batch_size=64, backend="local",
                     teacher="builtin", phase="finalize"))
    rd.hub_env_json.write_text(json.dumps({"rubric_funcs": []}))
    # test: iter_0 20, iter_1 90, C 30 right; selection: iter_0 40, iter_1 60, C 50
    iters = [{"iter": 0, **write_arm(rd.path / "iter_0", 20, 40)},
             {"iter": 1, **write_arm(rd.path / "iter_1", 90, 60)}]
    controls = [{"run": "run_c", **write_arm(rd.path / "run_c_untargeted_from_iter0", 30, 50)}]
    (rd.path / "metrics.json").write_text(json.dumps({"iters": iters, "controls": controls}))
    lift = bench_lift()

    test, sel = lift.summarise(rd.path), lift.summarise(rd.path, "selection")
    assert test["split"] == "test" and sel["split"] == "selection"
    assert test["best_vs_iter0"]["lift"] == stats.paired(right(20), right(90))["lift"]
    assert sel["best_vs_iter0"] == stats.paired(right(40), right(60))
    assert sel["best_vs_run_c"] == stats.paired(right(50), right(60))
    assert sel["best_vs_iter0_draws"] == stats.paired_means(draws(40)["mean_by_example"],
                                                            draws(60)["mean_by_example"])
    assert (sel["iter0_acc"], sel["best_acc"], sel["run_c_acc"]) == (0.4, 0.6, 0.5)
    assert sel["n"] == N and sel["n_draws"] == 4 * N and not sel["replay_noise"]["measured"]

    table = lift.render([sel])
    assert "selection split, n = 100 examples per arm" in table
    assert "+20.0" in table and "+70.0" not in table and "90.0" not in table


def test_teacher_rows_counts_live_groups_at_the_peak_by_step_and_example():
    import sys

    sys.path.insert(0, "bench")
    from teacher_rows import groups_at_peak

    def row(ex, initial, reward, **extra):
        problem = {"initial": initial, "deliveries": [40, 40], "withdrawals": [1, 1]}
        return {"example_id": ex, "info": {"problem": problem}, "reward": reward, **extra}

    rows = {3: [row(1, 45, 0.0), row(1, 45, 1.0), row(1, 45, 0.0), row(1, 45, 0.0),   # peak 125: live
                row(2, 45, 0.0), row(2, 45, 0.0),                                     # all wrong
                row(5, 10, 1.0), row(5, 10, 0.0),                                     # peak 90: out
                row(6, 45, 1.0, errored=True), {"example_id": 7, "reward": 0.0}],
            4: [row(1, 45, 1.0), row(1, 45, 1.0)]}                                    # same id, new step
    got = groups_at_peak(rows, 120)
    assert got == {"groups": 3, "live": 1, "rollouts": 8, "right": 3,
                   "by_step": {3: ["125: 1/4", "125: 0/2"], 4: ["125: 2/2"]},
                   "step_right": {3: [1, 6], 4: [2, 2]}}
    assert groups_at_peak(rows, 126)["groups"] == 0
    below = groups_at_peak(rows, 120, at=False)
    assert below == {"groups": 1, "live": 1, "rollouts": 2, "right": 1, "by_step": {3: ["90: 1/2"]},
                     "step_right": {3: [1, 2]}}
