"""`driver run --backend prime_rl` on prime-rl's current generation (559b447), its own `rl`
launcher, orchestrator, env servers, verifiers' null harness and `evals` running: iter_0, two
iterations each with its gradient probe, and the three controls, every arm's final weights
measured by a launch of prime-rl's `evals`. Only the vLLM engine and the trainer are stood in
(tests/prime_rl_real/driver_run.py says what the user's side holds).

The stand-in's router does not forward admin calls (PRL_STANDIN_ROUTER=data-only): whether the
pinned vllm-router forwards /pause, /update_weights and /resume is not settled by prime-rl's
source, and prime-rl's own launchers never rely on it (configs/rl.py:816-824@559b447). A run
passes only where every launch sends them to the engine, as rl's launcher does."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "prime_rl_real"))

import driver_run  # noqa: E402

pytestmark = pytest.mark.prime_rl_real


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return driver_run.loop(tmp_path_factory.mktemp("real_current"), "current", PRL_STANDIN_ROUTER="data-only")


def test_the_loop_trains_two_iterations_and_three_controls_on_prime_rl_itself(run):
    """Every arm trained by prime-rl's launcher and measured: metrics.json holds iter_0, two
    iterations and the three controls, each with its eval rows, and the run finished at its
    iteration cap."""
    s, run_dir, r = run
    driver_run.assert_every_arm_measured(run_dir, "current", "0.8.1.dev67")
    # prime-rl's own launcher ran each arm to its end, and its own `evals` measured it
    for arm in driver_run.ARMS:
        log = (run_dir / arm / "train.log").read_text(errors="replace")
        assert "Orchestrator finished." in log and "Training finished!" in log, arm
        assert "Evals finished!" in (run_dir / arm / "final_eval.log").read_text(errors="replace"), arm


def test_every_fork_resumes_iter0s_checkpoint_in_prime_rl(run):
    """An iteration and runs A and C fork iter_0's last checkpoint: prime-rl's orchestrator
    resumed from step F and shipped steps F+1 .. F+steps only (max_steps absolute)."""
    s, run_dir, r = run
    for arm in ("iter_1", "iter_2", "run_a_best_from_iter0", "run_c_untargeted_from_iter0"):
        logs = "\n".join(p.read_text(errors="replace")
                         for p in (run_dir / arm / "prime_out" / "run" / "logs").rglob("orchestrator.log"))
        assert "Resuming" in logs and "step 2" in logs, arm
        steps = sorted(int(p.name.split("_")[1])
                       for p in (run_dir / arm / "prime_out" / "run" / "rollouts").glob("step_*"))
        assert steps and steps[0] == 3 and max(steps) >= 4, (arm, steps)


def test_the_final_weights_evals_send_admin_calls_to_the_engine(run):
    """Every `evals` launch loaded its arm's final broadcast through the engine port (the
    router port refuses admin calls here): one /update_weights per arm naming that arm's
    broadcast, none on the router port."""
    s, run_dir, r = run
    reqs = driver_run.requests(s)
    updates = [q for q in reqs if q.get("path") == "/update_weights"]
    assert updates and all(q["role"] == "backend" for q in updates), updates[:3]
    loaded = {str(q.get("weight_dir") or (q.get("body") or {}).get("weight_dir")) for q in updates}
    for arm in driver_run.ARMS:
        assert any(f"/{arm}/prime_out/run/broadcasts/" in w for w in loaded), (arm, sorted(loaded)[:6])
    refused = [q for q in reqs if q.get("role") == "server" and q.get("status") == 404]
    assert not refused, refused[:3]


def test_no_eval_problem_is_left_in_any_file_of_prime_rl_under_the_run_directory(run):
    """The eval seal on prime-rl's own files (its orchestrator's, `evals`' and env servers' logs, its rollouts and eval traces):
    once every arm is evaluated, no eval or selection problem is in any file under the run
    directory, and every eval file holds numbers only."""
    from tests_support import assert_every_eval_file_is_sealed, files_holding, stock_arithmetic_eval_prompts

    s, run_dir, r = run
    assert files_holding(run_dir, stock_arithmetic_eval_prompts()) == []
    assert len(assert_every_eval_file_is_sealed(run_dir, "current")) >= len(driver_run.ARMS)


def test_the_probe_is_one_step_of_prime_rl_with_the_filter_off(run):
    """Each iteration's gradient probe was a one-step `rl` launch from iter_0's checkpoint with
    prime-rl's zero-advantage filter off (its overlay composed after the arm's files; what the
    overlay does to flat groups in prime-rl's orchestrator: test_prime_rl_real_current), which
    prime-rl ran to its end; the probe read the rows it wrote."""
    s, run_dir, r = run
    for it in ("iter_1", "iter_2"):
        probe = run_dir / it / "probe"
        assert "filter_zero_advantages = false" in (probe / "probe_overlay.toml").read_text()
        log = (probe / "train.log").read_text(errors="replace")
        assert "Resuming" in log and "Orchestrator finished." in log, log[-2000:]
        assert (run_dir / it / "probe_rollouts.jsonl").stat().st_size > 0


def test_without_the_engine_admin_url_evals_fails_behind_a_router_that_keeps_admin_calls(run, tmp_path):
    """The router question, answered as prime-rl's own launcher answers it: iter_0's rendered
    `evals` config with its admin_base_url taken out sends /pause and /update_weights to the
    router port, which (here) keeps them: prime-rl's `evals` then fails to load the arm's
    weights. With the engine's admin URL, as rendered, the same launch measured iter_0 above."""
    import subprocess
    import tomllib

    import tomli_w

    s, run_dir, r = run
    cfg = tomllib.loads((run_dir / "iter_0" / "evals.toml").read_text())
    # the engine behind the router of the server iter_0's own launch resolved (its inference.json)
    served = json.loads((run_dir / "iter_0" / "prime_out" / "run" / "configs" / "inference.json").read_text())
    host = served["server"].get("host") or "localhost"
    assert cfg["eval"]["client"] == {"base_url": f"http://{host}:{served['server']['port']}/v1",
                                     "admin_base_url": [f"http://{host}:{served['backend_port']}/v1"]}
    del cfg["eval"]["client"]["admin_base_url"]
    bare = tmp_path / "evals.toml"
    bare.write_text(tomli_w.dumps(cfg))
    log = tmp_path / "standin.jsonl"
    env = driver_run.shell(s, PRL_STANDIN_ROUTER="data-only", PRL_STANDIN_LOG=str(log))
    p = subprocess.run([sys.executable, "-m", "rl_contract.final_eval", "--prime-rl-dir", str(s.checkout),
                        "@", str(bare), "--output-dir", str(tmp_path / "out")],
                       env=env, capture_output=True, text=True, timeout=600, cwd=str(driver_run.ROOT))
    assert p.returncode != 0, p.stdout[-2000:]
    refused = [json.loads(line) for line in log.read_text().splitlines()
               if json.loads(line).get("status") == 404]
    assert refused and {q["path"] for q in refused} <= {"/pause", "/update_weights", "/resume", "/metrics"}, refused
    assert all(q["role"] == "server" for q in refused)
