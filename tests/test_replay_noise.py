"""The run's own noise: run A (the best iteration's rows trained again from iter_0, same config)
against the iteration it replays, paired on the eval examples both answered, and the summary's
sentence on whether the best iteration's lift over iter_0 exceeds it. Hand-built records (a run
directory with metrics.json and each arm's eval_summary.json), so every paired count is known."""
from __future__ import annotations

import json
import time

from driver.analysis import stats
from driver.context import Ctx
from driver.phases.finalize import finalize
from driver.reporting.summary import (
    lift_against_noise,
    noise_sentence,
    replay_noise,
    summary_rows,
    summary_text,
)
from driver.run.model import RunState
from driver.run.rundir import RunDir

N = 200


def outcomes(right: range) -> dict[str, int]:
    """N eval examples, those in `right` answered correctly."""
    return {str(i): int(i in right) for i in range(N)}


def write_arm(d, correct: dict[str, int]) -> float:
    d.mkdir(parents=True, exist_ok=True)
    acc = sum(correct.values()) / N
    (d / "eval_summary.json").write_text(json.dumps(
        {"eval_acc": acc, "n_eval": N, "correct_by_example": correct,
         "eval_config": {"temperature": 0.0, "examples": N}}))
    return acc


def make_run(tmp_path, iter0: range, best: range, replay: range | None,
             phase4_errors: list[str] | None = None) -> Ctx:
    """iter_0 and iter_1 (the best), and run A replaying iter_1 unless `replay` is None."""
    rd = RunDir(tmp_path / "run")
    rd.path.mkdir(parents=True)
    state = RunState(dataset="stock_arithmetic", hub_id="h", model="m", start_ts=time.time(),
                     budget_seconds=60, max_iters=2, batch_size=64, backend="local",
                     teacher="builtin", phase="finalize", phase4_errors=phase4_errors or [])
    rd.save(state)
    rd.hub_env_json.write_text(json.dumps({"rubric_funcs": []}))
    iters = [{"iter": k, "eval_acc": write_arm(rd.path / f"iter_{k}", outcomes(right)), "n_eval": N}
             for k, right in ((0, iter0), (1, best))]
    controls = [] if replay is None else [
        {"run": "run_a", "eval_acc": write_arm(rd.path / "run_a_best_from_iter0", outcomes(replay)),
         "n_eval": N, "best_iter": 1}]
    (rd.path / "metrics.json").write_text(json.dumps({"iters": iters, "controls": controls}))
    return Ctx.records(rd, state)


def noise_line(ctx: Ctx) -> str:
    [line] = [l for l in summary_text(ctx).splitlines() if l.startswith("Replay noise: ")]
    return line


def test_a_lift_whose_interval_clears_the_replay_noise_is_said_to_exceed_it(tmp_path):
    # iter_0 right on 0-99; iter_1 gains 40 (+20 points); run A gains 2 more on iter_1 (+1 point)
    ctx = make_run(tmp_path, range(100), range(140), range(142))
    noise = replay_noise(ctx, summary_rows(ctx))
    assert noise["measured"] and (noise["n"], noise["gained"], noise["lost"]) == (N, 2, 0)
    assert abs(noise["difference"] - 0.01) < 1e-12 and noise["lift_vs_noise"] == "beyond"
    line = noise_line(ctx)
    assert "run_a (iter_1's rows trained again from iter_0, same config) differs from iter_1 by +1.0" in line
    assert "one sample of this setting's arm-to-arm noise" in line
    assert "iter_1's lift over iter_0, +20.0" in line
    assert "exceeds it: its 95% interval lies wholly outside +-1.0" in line


def test_a_lift_no_larger_than_the_replay_noise_is_said_not_to_exceed_it(tmp_path):
    # iter_1 gains 4 over iter_0 (+2 points); its replay gains 10 more (+5 points)
    ctx = make_run(tmp_path, range(100), range(104), range(114))
    line = noise_line(ctx)
    assert "differs from iter_1 by +5.0" in line
    assert "iter_1's lift over iter_0, +2.0" in line and "does not exceed it (|+2.0| <= 5.0)" in line
    assert "exceeds it:" not in line


def test_a_lift_above_the_noise_whose_interval_reaches_into_it_is_not_claimed_beyond():
    lift = {"lift": 0.06, "lift_ci": [0.018, 0.102]}
    assert lift_against_noise(lift, 0.045) == "larger"
    assert lift_against_noise(lift, -0.01) == "beyond"
    assert lift_against_noise({"lift": -0.06, "lift_ci": [-0.1, -0.02]}, 0.01) == "beyond"
    assert lift_against_noise(lift, 0.07) == "within"
    sentence = noise_sentence({"measured": True, "replay": "run_a", "replayed": "iter_3", "n": N,
                               "difference": 0.045, "difference_ci": [0.01, 0.08], "p_value": 0.02,
                               "best": "iter_3", "best_lift": 0.06, "best_lift_ci": [0.018, 0.102],
                               "lift_vs_noise": "larger"})
    assert "is larger than it (|+6.0| > 4.5) but its 95% interval reaches into +-4.5, so it does " \
           "not clearly exceed it." in sentence


def test_without_run_a_the_noise_is_unmeasured_and_the_summary_says_why(tmp_path):
    ctx = make_run(tmp_path, range(100), range(140), None,
                   phase4_errors=["run_a: skipped, --max-cost leaves $0.10, short of its launches"])
    noise = replay_noise(ctx, summary_rows(ctx))
    assert noise == {"measured": False,
                     "why": "run_a was skipped: --max-cost leaves $0.10, short of its launches"}
    line = noise_line(ctx)
    assert line.startswith("Replay noise: unmeasured (run_a was skipped: --max-cost leaves $0.10")
    assert "whether the best iteration's lift over iter_0 exceeds this setting's arm-to-arm noise " \
           "is unknown" in line
    failed = make_run(tmp_path / "f", range(100), range(140), None,
                      phase4_errors=["run_a: trainer exited 1"])
    assert replay_noise(failed, summary_rows(failed))["why"] == "run_a failed: trainer exited 1"


def test_finalize_writes_the_replay_noise_into_metrics_json(tmp_path):
    ctx = make_run(tmp_path, range(100), range(104), range(114))
    finalize(ctx)
    figure = json.loads((ctx.rd.path / "metrics.json").read_text())["replay_noise"]
    paired = stats.paired(outcomes(range(104)), outcomes(range(114)))
    assert figure["measured"] and (figure["replay"], figure["replayed"], figure["n"]) == ("run_a", "iter_1", N)
    assert figure["difference"] == paired["lift"] and figure["difference_ci"] == paired["lift_ci"]
    assert figure["p_value"] == paired["p_value"] and figure["lift_vs_noise"] == "within"
    assert figure["best"] == "iter_1" and abs(figure["best_lift"] - 0.02) < 1e-12
    assert "Replay noise: run_a" in (ctx.rd.path / "scratchpad.md").read_text()


def test_report_md_and_bench_lift_show_the_replay_noise(tmp_path):
    import importlib.util

    from driver.reporting import report

    ctx = make_run(tmp_path, range(100), range(140), range(142))
    text = report.write(ctx).read_text()
    assert "## Replay noise" in text and "exceeds it: its 95% interval lies wholly outside +-1.0" in text
    spec = importlib.util.spec_from_file_location("bench_lift", "bench/lift.py")
    lift = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lift)
    rec = lift.summarise(ctx.rd.path)
    table = lift.render([rec, {**rec, "replay_noise": {"measured": False, "why": "run_a failed"}}])
    head, measured, unmeasured = table.splitlines()[:3]
    assert "replay noise: A - replayed [95% CI] p" in head
    v = stats.paired(outcomes(range(140)), outcomes(range(142)))   # run A against iter_1
    lo, hi = v["lift_ci"]
    assert measured.endswith(f"+1.0 [{100 * lo:+.1f}, {100 * hi:+.1f}] p={v['p_value']:.3g}")
    assert unmeasured.endswith("unmeasured")
