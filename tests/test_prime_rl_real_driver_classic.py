"""`driver run --backend prime_rl` on prime-rl's classic generation (09e2977), its own `rl`
launcher, orchestrator and env servers running the hub env (StockArithmetic-v1's classic form,
verifiers 58b119f): iter_0, two iterations each with its gradient probe, and the three controls.
Only the vLLM engine and the trainer are stood in (tests/prime_rl_real/driver_run.py says what
the user's side holds)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "prime_rl_real"))

import driver_run  # noqa: E402

pytestmark = pytest.mark.prime_rl_real


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return driver_run.loop(tmp_path_factory.mktemp("real_classic"), "classic")


def test_the_loop_trains_two_iterations_and_three_controls_on_prime_rl_itself(run):
    """Every arm trained by prime-rl's classic launcher ("RL training finished!") and measured
    from the eval rows its orchestrator wrote: metrics.json holds iter_0, two iterations and the
    three controls."""
    s, run_dir, r = run
    driver_run.assert_every_arm_measured(run_dir, "classic", "0.5.1.dev209")
    for arm in driver_run.ARMS:
        assert "RL training finished!" in (run_dir / arm / "train.log").read_text(errors="replace"), arm


def test_every_fork_resumes_iter0s_checkpoint_in_prime_rl(run):
    """An iteration and runs A and C start from iter_0's step-2 checkpoint: prime-rl's launcher
    resolved the resume, its orchestrator skipped the online eval on resume, trained steps 2 and
    3 (0-indexed, max_steps absolute) and wrote the final eval alone in step_4."""
    s, run_dir, r = run
    for arm in ("iter_1", "iter_2", "run_a_best_from_iter0", "run_c_untargeted_from_iter0"):
        out = run_dir / arm / "prime_out"
        logs = "\n".join(p.read_text(errors="replace") for p in out.rglob("orchestrator*.log"))
        assert "Resuming training from checkpoint step 2" in logs, arm
        rollouts = out / "run_default" / "rollouts"
        trained = sorted(int(p.parent.name.split("_")[1]) for p in rollouts.glob("step_*/train_rollouts.jsonl"))
        assert trained == [2, 3], (arm, trained)
        assert [p.name for p in (rollouts / "step_4").iterdir()] == ["eval_rollouts.jsonl"], arm


def test_no_eval_problem_is_left_in_any_file_of_prime_rl_under_the_run_directory(run):
    """The eval seal on prime-rl's own files (its orchestrator's and env servers' logs, its rollouts):
    once every arm is evaluated, no eval or selection problem is in any file under the run
    directory, and every eval file holds numbers only."""
    from tests_support import assert_every_eval_file_is_sealed, files_holding, stock_arithmetic_eval_prompts

    s, run_dir, r = run
    assert files_holding(run_dir, stock_arithmetic_eval_prompts()) == []
    assert len(assert_every_eval_file_is_sealed(run_dir, "classic")) >= len(driver_run.ARMS)


def test_the_probe_is_one_step_of_prime_rl_with_the_filter_off(run):
    """Each iteration's gradient probe was a one-step `rl` launch from iter_0's checkpoint whose
    orchestrator, as prime-rl itself reports, only monitored the zero-advantage filter, so its
    rows exist even where every group is flat."""
    s, run_dir, r = run
    for it in ("iter_1", "iter_2"):
        log = (run_dir / it / "probe" / "train.log").read_text(errors="replace")
        assert "Monitoring zero_advantage filter (type=zero_advantage, enforce=False" in log, log[-2000:]
        assert "RL training finished!" in log
        assert (run_dir / it / "probe_rollouts.jsonl").stat().st_size > 0
