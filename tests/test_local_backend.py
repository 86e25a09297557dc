"""The driver with --backend local: the whole loop runs through the embedded trainer, launched
exactly as prime-rl is (same rendered configs, same polling, same output layout)."""
from __future__ import annotations

import json
import sys
import tomllib

import pytest

from conftest import driver, driver_env, run_dir_from

pytest.importorskip("torch")

# Small enough for CI (a few seconds of SFT), still the real model class, sampler and update.
MODEL = "builtin:tiny-char-qwen2?sft_steps=20&hidden_size=32&ffn=64&layers=1&heads=2"


def test_full_loop_through_the_embedded_trainer(tmp_path, runs):
    env = driver_env(tmp_path, EMBEDDED_TRAINER_CACHE=tmp_path / "cache")
    env.pop("DRIVER_RL_COMMAND")
    r = driver(["run", "--backend", "local", "--model", MODEL, "--max-iters", "2",
                "--steps-per-run", "2", "--eval-examples", "24", "--runs-dir", str(runs),
                # this model writes to the limit; a short one keeps the controls' whole-split
                # evals (2 x 200 greedy rollouts each) from dominating the suite
                "--max-completion-tokens", "24",
                # this 20-step model rarely solves anything: the probe runs for real, but
                # must not send the dataset back
                "--probe-prompts", "8", "--probe-min-live", "0", "--seed", "5"], env)
    assert r.returncode == 0, r.stderr[-4000:]
    run_dir = run_dir_from(r.stdout)
    assert f"backend: local ({sys.executable} -m embedded_trainer.rl)" in r.stderr
    state = json.loads((run_dir / "run.json").read_text())
    assert state["status"] == "max_iters_reached" and state["backend"] == "local"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert [m["iter"] for m in metrics["iters"]] == [0, 1]
    assert all(m["n_eval"] == 24 for m in metrics["iters"]), metrics
    # the probe sampled iter_0's weights on 8 generated rows x 4
    probe = metrics["iters"][1]["probe"]
    assert probe["prompts"] == 8 and probe["k"] == 4 and probe["passed"] is True
    assert "probe: 8 of 8 prompts x 4" in (run_dir / "iter_1" / "probe.log").read_text()
    assert {c["run"] for c in metrics["controls"]} == {"run_a", "run_b", "run_c"}
    # iter_1 resumed from iter_0's pre-staged step and trained to the absolute max_steps
    log1 = (run_dir / "iter_1" / "train.log").read_text()
    assert "resumed from step 2" in log1 and "step 4/4" in log1 and "RL training finished!" in log1
    cfg1 = tomllib.loads((run_dir / "iter_1" / "rl.toml").read_text())
    assert cfg1["ckpt"]["resume_step"] == 2 and cfg1["max_steps"] == 4
    assert "embedded" not in cfg1   # the same file prime-rl would receive
    # the run's --seed reached the trainer (a launch flag, not a key of the checked config)
    progress = run_dir / "iter_1" / "prime_out" / "run_default" / "checkpoints" / "step_4" / "orchestrator" / "progress.json"
    assert json.loads(progress.read_text())["seed"] == 5
    # control run B trains on two envs at once, from the base model
    logb = (run_dir / "run_b_combined_from_base" / "train.log").read_text()
    assert "resumed" not in logb and "RL training finished!" in logb
    rows = [json.loads(x) for x in (run_dir / "run_b_combined_from_base" / "prime_out" / "run_default"
                                    / "rollouts" / "step_1" / "train_rollouts.jsonl").read_text().splitlines()]
    assert len({row["env_name"] for row in rows}) == 2
    for sub in ("checkpoints/step_4", "weights/step_4/model.safetensors",
                "run_default/checkpoints/step_4", "run_default/broadcasts/step_4"):
        assert (run_dir / "iter_1" / "prime_out" / sub).exists(), sub


def test_local_backend_without_torch_is_refused_before_anything_is_created(tmp_path, runs):
    env = driver_env(tmp_path)
    env.pop("DRIVER_RL_COMMAND")
    # find_spec reports torch missing, as in an install without the [embedded] extra
    code = ("import importlib.util, sys; real = importlib.util.find_spec; "
            "importlib.util.find_spec = lambda n, *a: None if n == 'torch' else real(n, *a); "
            "from driver.cli import main; sys.exit(main())")
    import subprocess
    r = subprocess.run([sys.executable, "-c", code, "run", "--backend", "local", "--runs-dir", str(runs)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "torch" in r.stderr and "[embedded]" in r.stderr
    assert list(runs.iterdir()) == []


def test_without_a_prime_rl_checkout_the_first_line_names_the_embedded_default(tmp_path, runs):
    env = driver_env(tmp_path)
    env.pop("DRIVER_RL_COMMAND")
    env.pop("PRIME_RL_DIR", None)
    # the dry run: the same start as a run (choice, header, run directory), without the training
    r = driver(["run", "--dry-run", "--max-iters", "1", "--steps-per-run", "1", "--eval-examples", "8",
                "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    first = r.stdout.splitlines()[0]
    assert first.startswith("using the embedded default (no prime-rl checkout is set)")
    # it ends on its iteration count (here --max-iters 1), its budget a ceiling far above it
    assert "builtin:tiny-char-qwen2 student" in first and "1 iterations including iter_0" in first
    assert "2-hour budget as a ceiling" in first
    state = json.loads((run_dir_from(r.stdout) / "run.json").read_text())
    assert state["backend"] == "local" and state["budget_seconds"] == 7200
    assert driver(["run", "--dry-run", "--runs-dir", str(runs)], env).stdout.splitlines()[0].count(
        "4 iterations including iter_0") == 1    # the quick start's own count
    # naming a checkout is a choice: it is never swapped for the embedded default
    r = driver(["run", "--prime-rl-dir", str(tmp_path), "--runs-dir", str(tmp_path / "other")], env)
    assert r.returncode == 2 and "is not a prime-rl checkout" in r.stderr
