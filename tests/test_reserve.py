"""driver.run.reserve: what one more iteration and the controls are estimated to need, from the
phase history and the billed launches, on plain numbers."""
from __future__ import annotations

import pytest

from driver.run.model import PhaseRecord
from driver.run.reserve import (Billed, Measured, Reserve, arm_cost, control_scale, control_seconds,
                                cost_reserve, launch_cost, launch_refusal, measured, time_reserve)


def phases(*spans: tuple[str, int | None, float, float | None]) -> list[PhaseRecord]:
    return [PhaseRecord(phase=p, iteration=n, start_ts=a, end_ts=b) for p, n, a, b in spans]


HISTORY = phases(
    ("introspect", None, 0, 5), ("baseline", None, 5, 105), ("gate", None, 105, 105),
    ("weakness", 1, 105, 115), ("dataset", 1, 115, 125), ("environment", 1, 125, 130),
    ("probe", 1, 130, 135), ("train", 1, 135, 215), ("evaluate", 1, 215, 220), ("gate", None, 220, 220),
    # iteration 2: the teacher twice (a dataset sent back), its train phase twice (a torn eval)
    ("weakness", 2, 220, 230), ("dataset", 2, 230, 235), ("weakness", 2, 235, 245),
    ("dataset", 2, 245, 250), ("environment", 2, 250, 256), ("probe", 2, 256, 260),
    ("train", 2, 260, 300), ("evaluate", 2, 300, 301), ("train", 2, 301, 360), ("evaluate", 2, 360, 362),
    ("gate", None, 362, 362),
    # iteration 3: skipped at the gate (no arm), iteration 4: still training (not ended)
    ("weakness", 3, 362, 370), ("dataset", 3, 370, 380), ("gate", None, 380, 380),
    ("weakness", 4, 380, 390), ("train", 4, 390, None))


def test_the_history_measures_iter_0_and_each_evaluated_iteration_every_attempt_counted():
    arms = measured(HISTORY, iter_0_trained=True)
    assert arms == [Measured(0, 100, 0, 0), Measured(1, 85, 30, 5),
                    Measured(2, 102, 40, 6)]
    assert arms[2].total_s == 142


def test_a_reused_iter_0_is_no_measurement():
    assert [a.iteration for a in measured(HISTORY, iter_0_trained=False)] == [1, 2]
    assert measured(HISTORY[:3], iter_0_trained=False) == []


def test_a_control_is_scaled_by_the_rollouts_it_samples_never_below_one():
    # 30 steps x 64 rollouts; 400 eval rows for both: the local demo's settings
    assert control_scale(1920, 400, 400) == 1.0
    # 3 x 256 train rollouts; 240 eval rows against the whole splits' 400
    assert control_scale(768, 240, 400) == pytest.approx(1168 / 1008)
    assert control_scale(0, 240, 400) == pytest.approx(400 / 240)
    assert control_scale(0, 0, 0) == 1.0 and control_scale(100, 400, 200) == 1.0


def test_time_after_iterations_takes_the_slowest_iteration_and_the_slowest_arm_for_controls():
    r = time_reserve(measured(HISTORY, iter_0_trained=True), controls=3, scale=1.5)
    assert r.iteration == 142 and "iter_2" in r.basis
    # the slowest arm is iter_2's (102 s), scaled, plus the slowest env install (6 s)
    assert r.control == pytest.approx(6 + 102 * 1.5)
    assert r.needed == pytest.approx(142 + 3 * (6 + 153))
    assert r.covered_by(r.needed) and not r.covered_by(r.needed - 1)


def test_time_before_any_iteration_takes_iter_0_and_says_what_is_not_known():
    r = time_reserve(measured(HISTORY[:3], iter_0_trained=True), controls=3, scale=2.0)
    assert (r.iteration, r.control, r.controls) == (100, 200, 3)
    assert r.basis.startswith("iter_0's training and evaluation") and "not known" in r.basis
    assert time_reserve([], controls=3, scale=1.0) is None


BILLED = [Billed("train", 1.0, False), Billed("eval", 0.2, False),            # iter_0
          Billed("probe", 0.3, False), Billed("train", 1.2, False), Billed("eval", 0.25, False),
          Billed("train", 0.1, False)]                                         # a failed attempt


def test_a_launch_is_estimated_at_the_costliest_billed_launch_of_its_kind():
    assert launch_cost(BILLED, "train", control=False) == 1.2
    assert launch_cost(BILLED, "eval", control=False) == 0.25
    assert launch_cost(BILLED, "probe", control=False) == 0.3
    assert launch_cost([], "train", control=False) is None
    assert launch_cost(BILLED[:2], "probe", control=False) is None


def test_a_controls_launch_scales_an_iterations_and_takes_a_controls_as_billed():
    assert launch_cost(BILLED, "eval", control=True, scale=2.0) == 0.5
    with_control = BILLED + [Billed("eval", 0.45, True)]
    assert launch_cost(with_control, "eval", control=True, scale=2.0) == 0.5
    assert launch_cost(with_control + [Billed("eval", 0.7, True)], "eval", control=True, scale=2.0) == 0.7
    # an iteration's launch is never scaled; a control's billed one counts for it as it was
    assert launch_cost(with_control, "eval", control=False, scale=2.0) == 0.45


def test_an_arm_costs_one_launch_of_each_kind_it_makes():
    assert arm_cost(BILLED, ("probe", "train", "eval"), control=False) == pytest.approx(1.75)
    assert arm_cost(BILLED, ("train", "eval"), control=True, scales={"eval": 2.0}) == pytest.approx(1.7)
    assert arm_cost([Billed("eval", 1.0, False)], ("train", "eval"), control=False) is None


def test_money_reserves_one_iteration_and_each_control():
    r = cost_reserve(BILLED, controls=3, scales={"train": 1.0, "eval": 2.0})
    assert (r.iteration, r.control) == (pytest.approx(1.75), pytest.approx(1.7))
    assert r.needed == pytest.approx(1.75 + 3 * 1.7) and "no probe" not in r.basis
    first = cost_reserve(BILLED[:2], controls=3, scales={"train": 1.0, "eval": 2.0})
    assert first.iteration == pytest.approx(1.2) and first.basis.endswith("no probe billed yet")
    assert cost_reserve([], controls=3, scales={}) is None


def test_a_launch_is_refused_once_the_cap_is_spent_or_its_estimate_would_pass_it():
    assert launch_refusal(1.0, 5.0, None, "x") is None
    assert launch_refusal(4.0, 5.0, 1.0, "x") is None              # reaching the cap fits
    why = launch_refusal(4.5, 5.0, 1.0, "its training and eval")
    assert why == ("the run has spent $4.50, and its training and eval (estimated at $1.00) "
                   "would take it past its --max-cost $5.00")
    # before anything of its kind is billed there is no estimate: only a spent cap refuses
    assert launch_refusal(5.0, 5.0, None, "x") == "the run has spent $5.00 of its --max-cost $5.00"


def test_a_reserve_needs_one_iteration_and_every_control():
    r = Reserve(iteration=10, control=4, controls=3, basis="b")
    assert r.needed == 22 and r.covered_by(22) and not r.covered_by(21.9)


def test_controls_measured_before_a_reopened_loop_count_where_they_took_longer():
    ran = phases(("run_a", None, 0, 400), ("run_b", None, 400, 700), ("run_c", None, 700, None))
    assert control_seconds(HISTORY + ran, ("run_a", "run_b", "run_c")) == [400, 300]
    arms = measured(HISTORY, iter_0_trained=True)
    assert time_reserve(arms, 3, 1.0, [400, 300]).control == 400
    assert time_reserve(arms, 3, 1.0, [50]).control == 6 + 102
