"""The settings every arm trains with when the hub env has no canonical config of its own, and
LoRA canonical settings on both dialects, through the trainer double and (current) the real
final-weights eval: the closest canonical config of the prime-rl checkout is chosen and named in
the run header, or the run is refused before a run directory exists, listing the candidates and
the flag that picks one; with LoRA in those settings the current generation's final-weights eval
serves the adapter the arm broadcasts, on the inference config the arm's own `rl` resolved."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import tomli_w

from conftest import FAST, current_env, driver, driver_env, launches, run_dir_from

VERSIONS = {"current": "0.8.1.dev67", "classic": "0.5.1.dev209"}
ARMS = ["iter_0", "iter_1", "iter_2", "run_a_best_from_iter0", "run_b_combined_from_base",
        "run_c_untargeted_from_iter0"]


def lora_settings(dialect: str, model: str, env_block: dict) -> dict:
    """A canonical config of another env, trained with LoRA (configs/basic/alphabet-sort@559b447
    and configs/elastic@09e2977 set [trainer.model.lora] this way), in its dialect's schema."""
    cfg = {"max_steps": 200, "seq_len": 2048, "model": {"name": model},
           "trainer": {"model": {"lora": {"rank": 8, "alpha": 16}}, "optim": {"lr": 3e-6}},
           "inference": {}, "ckpt": {}}
    if dialect == "current":
        cfg["orchestrator"] = {"batch_size": 256, "group_size": 8,
                               "train": {"sampling": {"max_completion_tokens": 768},
                                         "source": [{"name": "other", "env": env_block}]}}
    else:
        cfg["orchestrator"] = {"batch_size": 256, "rollouts_per_example": 8,
                               "train": {"sampling": {"max_completion_tokens": 768},
                                         "env": [{"id": "other-env", "name": "other"}]}}
    return cfg


OTHER_TASKSET = {"taskset": {"id": "other-env"}, "agent": {"harness": {"id": "null"},
                                                        "runtime": {"type": "subprocess"}}}


def checkout(tmp: Path, dialect: str, configs: dict[str, dict]) -> Path:
    """A prime-rl checkout as far as the driver reads one before it launches: its version and
    its canonical configs (configs/basic/<env>/rl.toml at the current generation's HEAD,
    configs/<env>/rl.toml in classic ones)."""
    root = tmp / "prime-rl"
    root.mkdir()
    (root / "pyproject.toml").write_text(f'[project]\nname = "prime-rl"\nversion = "{VERSIONS[dialect]}"\n')
    for rel, cfg in configs.items():
        path = root / "configs" / rel / "rl.toml"
        path.parent.mkdir(parents=True)
        path.write_text(tomli_w.dumps(cfg))
    return root


def shell(tmp: Path, dialect: str) -> dict:
    env = current_env(tmp) if dialect == "current" else driver_env(tmp)
    env.pop("DRIVER_PRIME_RL_VERSION", None)   # the checkout's pyproject says which
    return env


# the current twin in the extended command (the main suite's 5 minutes); a current-generation
# LoRA run stays in the main suite below (the env's own canonical config)
@pytest.mark.parametrize("dialect", [pytest.param("current", marks=pytest.mark.extended), "classic"])
def test_no_canonical_config_trains_every_arm_on_the_closest_ones_lora_settings(tmp_path, dialect):
    prefix = "basic/" if dialect == "current" else ""
    root = checkout(tmp_path, dialect, {
        f"{prefix}other-small": lora_settings(dialect, "PrimeIntellect/Qwen3-0.6B-Other-SFT", OTHER_TASKSET),
        f"{prefix}other-large": lora_settings(dialect, "Qwen/Qwen3-4B-Instruct-2507", OTHER_TASKSET)})
    closest = root / "configs" / f"{prefix}other-small" / "rl.toml"
    r = driver(["run", "--max-iters", "3", "--seed", "7", *FAST, "--eval-examples", "40",
                "--prime-rl-dir", str(root), "--runs-dir", str(tmp_path / "runs")], shell(tmp_path, dialect))
    assert r.returncode == 0, r.stderr[-4000:]
    assert (f"settings: {closest}, the closest canonical config (stock_arithmetic has none; it "
            "trains a 0.6B model, as Qwen/Qwen3-0.6B is)") in r.stderr
    run_dir = run_dir_from(r.stdout)
    state = json.loads((run_dir / "run.json").read_text())
    assert state["status"] == "max_iters_reached" and state["settings_from"] == str(closest)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert [m["iter"] for m in metrics["iters"]] == [0, 1, 2]
    assert {c["run"] for c in metrics["controls"]} == {"run_a", "run_b", "run_c"}
    shared = tomllib.loads((run_dir / "canonical_shared.toml").read_text())
    # its settings, never its envs, its length or its model
    assert shared["trainer"]["model"]["lora"] == {"rank": 8, "alpha": 16}
    assert "max_steps" not in shared and "name" not in shared.get("model", {})
    assert "source" not in shared["orchestrator"]["train"] and "env" not in shared["orchestrator"]["train"]
    trains = [launch for launch in launches(tmp_path)
              if "--evals" not in launch["argv"] and "final_eval" not in " ".join(launch["argv"])]
    assert len(trains) >= 6   # iter_0 too: every training launch composes them first
    for launch in trains:
        assert str(run_dir / "canonical_shared.toml") in launch["argv"], launch["argv"]
    for arm in ARMS:
        summary = json.loads((run_dir / arm / "eval_summary.json").read_text())
        assert summary["n_eval"] + summary.get("n_errored", 0) == 40   # every arm, controls too
    if dialect == "current":
        for arm in ARMS:
            out = run_dir / arm / "prime_out"
            served = json.loads((out / "run" / "configs" / "inference.json").read_text())
            assert served["vllm"]["enable_lora"] is True and served["vllm"]["max_lora_rank"] == 8
            final = json.loads((run_dir / arm / "eval_summary.json").read_text())["final_step"]
            assert (out / "run" / "broadcasts" / f"step_{final}" / "adapter_config.json").is_file()
            assert "with LoRA" in (out / "final_eval" / f"step_{final}" / "inference.log").read_text()


@pytest.mark.extended   # a three-iteration LoRA run; the LoRA arm's eval server stays in the main suite (test_final_eval)
def test_the_envs_own_lora_canonical_config_measures_every_arm(tmp_path):
    """configs/basic/alphabet-sort and wiki-search@559b447 train LoRA adapters: with such a
    canonical config for the hub env itself, iter_0 trains on it and every arm's adapter is
    measured (the final-weights eval served it the bare base model before, into which the
    adapter does not load: tests/test_final_eval.py shows that launch failing)."""
    own = {**OTHER_TASKSET, "taskset": {"id": "stock_arithmetic", "split": "train"}}
    cfg = lora_settings("current", "Qwen/Qwen3-0.6B", own)
    cfg["orchestrator"]["train"]["source"] = [{"name": "train", "env": own}]
    root = checkout(tmp_path, "current", {"basic/stock-arithmetic": cfg})
    r = driver(["run", "--max-iters", "3", "--seed", "7", *FAST, "--eval-examples", "40",
                "--prime-rl-dir", str(root), "--runs-dir", str(tmp_path / "runs")], shell(tmp_path, "current"))
    assert r.returncode == 0, r.stderr[-4000:]
    assert f"canonical config: {root / 'configs' / 'basic' / 'stock-arithmetic' / 'rl.toml'}" in r.stdout
    assert "settings: " not in r.stderr       # its own canonical config: nothing else is chosen
    run_dir = run_dir_from(r.stdout)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert [m["iter"] for m in metrics["iters"]] == [0, 1, 2] and len(metrics["controls"]) == 3
    for arm in ARMS:
        out = run_dir / arm / "prime_out"
        final = json.loads((run_dir / arm / "eval_summary.json").read_text())["final_step"]
        assert (out / "run" / "broadcasts" / f"step_{final}" / "adapter_config.json").is_file()
        assert "with LoRA" in (out / "final_eval" / f"step_{final}" / "inference.log").read_text()


def test_several_equally_close_or_none_are_refused_before_a_run_directory(tmp_path):
    root = checkout(tmp_path, "current", {
        "basic/a": lora_settings("current", "Qwen/Qwen3-4B-Instruct-2507", OTHER_TASKSET),
        "basic/b": lora_settings("current", "Qwen/Qwen3-4B-Instruct-2507", OTHER_TASKSET),
        "basic/c": lora_settings("current", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", OTHER_TASKSET)})
    runs = tmp_path / "runs"
    env = shell(tmp_path, "current")
    r = driver(["run", *FAST, "--model", "Qwen/Qwen3-4B-Instruct-2507", "--prime-rl-dir", str(root),
                "--runs-dir", str(runs)], env)
    assert r.returncode == 2 and not runs.exists()
    assert "2 are equally close (it trains Qwen/Qwen3-4B-Instruct-2507 too)" in r.stderr
    assert str(root / "configs" / "basic" / "a" / "rl.toml") in r.stderr and "/c/rl.toml" not in r.stderr
    assert "--settings-from PATH" in r.stderr and "--settings-from none" in r.stderr
    r = driver(["run", *FAST, "--prime-rl-dir", str(root), "--runs-dir", str(runs)], env)
    assert r.returncode == 2 and not runs.exists()
    assert "none trains Qwen/Qwen3-0.6B or a model of its size" in r.stderr and "/c/rl.toml" in r.stderr
    # the user's answer, as the message gives it: a run on prime-rl's defaults, said so
    r = driver(["run", "--dry-run", *FAST, "--settings-from", "none", "--prime-rl-dir", str(root),
                "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "settings: prime-rl's defaults (--settings-from none)" in r.stderr
    assert not (run_dir_from(r.stdout) / "canonical_shared.toml").exists()
    chosen = root / "configs" / "basic" / "b" / "rl.toml"
    r = driver(["run", "--dry-run", *FAST, "--settings-from", str(chosen), "--prime-rl-dir", str(root),
                "--runs-dir", str(runs)], env)
    assert r.returncode == 0 and f"settings: {chosen} (--settings-from)" in r.stderr
    shared = tomllib.loads((run_dir_from(r.stdout) / "canonical_shared.toml").read_text())
    assert shared["trainer"]["model"]["lora"]["rank"] == 8
