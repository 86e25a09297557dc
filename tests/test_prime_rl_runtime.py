"""The prime_rl backend against prime-rl's run-time behaviour, as rl_contract/ states it and the
trainer double copies it: the zero-advantage filter's abort (classic's control/evicted.txt, the
current generation's ten empty batches), W&B without credentials, the GPUs a deployment asks
for, a canonical config's train-source name, --init-from on real output directories of both
generations, and errored eval episodes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import DOUBLE, FAST, current_env, driver, driver_env, launches, run_dir_from
from tests_support import assert_every_eval_file_is_sealed
from driver.dialects import get
from driver.run.model import Knobs


def _state(rd: Path) -> dict:
    return json.loads((rd / "run.json").read_text())


def _metrics(rd: Path) -> dict:
    return json.loads((rd / "metrics.json").read_text())


def _arm_launches(tmp: Path, arm: str) -> list[dict]:
    return [x for x in launches(tmp) if Path(x["output_dir"]).parent.name == arm]


# ---- the zero-advantage filter ------------------------------------------------------------------

# the current twin is a whole run in CI's extended command; the classic one stays in the main suite
@pytest.mark.parametrize("dialect", ["classic", pytest.param("current", marks=pytest.mark.extended)])
def test_an_arm_prime_rl_aborts_on_its_filter_is_recorded_with_its_reason_and_never_retrained(
        tmp_path, runs, dialect):
    """iter_1's student solves every row of its dataset (the probe saw live groups; training
    saturated them): prime-rl's zero-advantage filter finds nothing to train on and aborts the
    arm. The iteration is recorded as skipped with prime-rl's reason, its attempt set aside (a
    classic launch into a dir holding control/evicted.txt aborts at once), and neither the loop
    nor a resume trains it again."""
    make_env = driver_env if dialect == "classic" else current_env
    env = make_env(tmp_path, DOUBLE_SHAPE_ARM="iter_1", DOUBLE_TRAIN_SKILL="1")
    r = driver(["run", "--max-iters", "2", *FAST, "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    skipped = json.loads((rd / "iter_1" / "skipped.json").read_text())
    assert skipped["reason"].startswith("prime-rl aborted the arm")
    why = skipped["failures"][0]
    assert ("filtered out on 3 consecutive attempts" in why if dialect == "classic"
            else "10 consecutive empty train batches" in why), why
    [entry] = [m for m in _metrics(rd)["iters"] if m["iter"] == 1]
    assert entry["skipped"] and "prime-rl" in entry["failures"][0]
    assert len(_arm_launches(tmp_path, "iter_1")) == 1
    aside = rd / "iter_1" / "prime_out.failed-1"
    assert aside.is_dir() and not (rd / "iter_1" / "prime_out").exists()
    if dialect == "classic":
        assert (aside / "run_default" / "control" / "evicted.txt").read_text().startswith("All ")
    assert _state(rd)["status"] == "max_iters_reached"
    # no iteration was evaluated, so no control could answer its question: skipped, and said so
    assert "[run_c] skipped: no iteration produced an evaluated model" in r.stderr
    assert "run_c (untargeted @iter0) was not run: no iteration produced an evaluated model." in r.stdout
    # resuming the finished run trains nothing again
    before = len(launches(tmp_path))
    r = driver(["resume", str(rd)], make_env(tmp_path, DOUBLE_SHAPE_ARM="iter_1", DOUBLE_TRAIN_SKILL="1"))
    assert r.returncode == 0 and len(launches(tmp_path)) == before


def test_an_arm_whose_every_episode_errors_is_recorded_with_prime_rls_second_abort_reason(tmp_path, runs):
    """Current prime-rl has a second abort rule: ten batch equivalents of groups with no
    trainable survivor (every episode errored: train_sink.py:28,309-338@559b447, seen against its
    own orchestrator in test_prime_rl_real_current). iter_1's every request fails: the iteration
    is recorded as skipped with that reason, its attempt set aside, never retrained."""
    env = current_env(tmp_path, DOUBLE_SHAPE_ARM="iter_1", DOUBLE_TRAIN_ERRORED="1")
    r = driver(["run", "--max-iters", "2", *FAST, "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    skipped = json.loads((rd / "iter_1" / "skipped.json").read_text())
    assert skipped["reason"].startswith("prime-rl aborted the arm")
    assert "10 consecutive zero-output batch equivalents" in skipped["failures"][0], skipped
    assert len(_arm_launches(tmp_path, "iter_1")) == 1
    assert (rd / "iter_1" / "prime_out.failed-1").is_dir()


# each reading waits out the window in real time (about 19 s): CI's extended command keeps the
# main suite in its budget; a growing `all` file counted as work stays in the main suite
# (test_launch_lifecycle)
@pytest.mark.extended
@pytest.mark.parametrize("rule, knob, needle", [
    ("empty batches", {"DOUBLE_TRAIN_SKILL": "1"}, "10 consecutive empty train batches"),
    # the same window by its other count
    ("zero-output batches", {"DOUBLE_TRAIN_ERRORED": "1"}, "10 consecutive zero-output batch equivalents"),
])
def test_prime_rls_abort_window_longer_than_the_stall_timeout_is_not_stopped_as_stalled(
        tmp_path, runs, fast_clock, rule, knob, needle):
    """Current prime-rl spends its ten empty (or zero-output) batches on one step, appending
    every arriving episode to that step's `all` file (orchestrator.py:591-592,640-652,
    train_sink.py:28,240-252,309-338@559b447). With each batch taking 1 s, the window (10 s) is
    over three times --stall-timeout (15 s on the driver's clock, 3 s here): the growing file is
    work, so the arm reaches prime-rl's own abort and is recorded with its reason, never stopped
    as stalled and retrained."""
    env = current_env(tmp_path, DOUBLE_SHAPE_ARM="iter_1", DOUBLE_STEP_SECONDS="1", **knob)
    r = driver(["run", "--max-iters", "2", *FAST, "--stall-timeout", "15s", "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "--stall-timeout" not in r.stderr, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    skipped = json.loads((rd / "iter_1" / "skipped.json").read_text())
    assert skipped["reason"].startswith("prime-rl aborted the arm")
    assert needle in skipped["failures"][0], skipped
    assert len(_arm_launches(tmp_path, "iter_1")) == 1


def test_the_probe_turns_the_filter_off_in_its_one_step_and_reads_an_abort_as_a_verdict(tmp_path):
    """The probe's launch overlays the filter's off-switch (its rows are measured, not
    aborted); and where a launch aborts all the same, the dialect reads prime-rl's reason."""
    for name in ("classic", "current"):
        d = get(name)
        flat = json.dumps(d.probe_overlay)
        assert "zero_advantage" in flat or "filter_zero_advantages" in flat
        assert "false" in flat.lower()
    classic = get("classic")
    out = tmp_path / "out"
    classic.evicted_file(out).parent.mkdir(parents=True)
    classic.evicted_file(out).write_text("All 512 rollouts were filtered out on 3 consecutive attempts at step 3")
    assert classic.abort_reason(out, 3, 4, 32).startswith("All 512 rollouts")
    assert classic.abort_reason(tmp_path / "elsewhere", 3, 4, 32) is None


# ---- launch prerequisites, refused before a run directory -----------------------------------------

def test_fewer_gpus_than_the_deployment_asks_for_is_refused_before_a_run_directory(tmp_path, runs):
    r = driver(["run", *FAST, "--runs-dir", str(runs)], driver_env(tmp_path, CUDA_VISIBLE_DEVICES="0"))
    assert r.returncode == 2, r.stderr
    assert "asks for 2 GPUs (inference + trainer) and 1 are visible" in r.stderr
    assert list(runs.iterdir()) == [] and launches(tmp_path) == []


def test_visible_gpus_are_cuda_visible_devices_else_nvidia_smi(tmp_path):
    from rl_contract import launch

    assert launch.visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3", "PATH": ""}) == 2
    assert launch.visible_gpus({"CUDA_VISIBLE_DEVICES": "", "PATH": ""}) == 0
    assert launch.visible_gpus({"PATH": str(tmp_path)}) is None        # no driver here
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: a)'\necho 'GPU 1: NVIDIA H200 (UUID: b)'\n")
    smi.chmod(0o755)
    assert launch.visible_gpus({"PATH": str(tmp_path)}) == 2
    assert launch.gpus_requested({"inference": {}}) == 2
    assert launch.gpus_requested({"inference": {}, "deployment": {"num_train_gpus": 6, "num_infer_gpus": 2}}) == 8
    assert launch.gpus_requested({}) == 1     # no [inference]: the trainer alone


@pytest.mark.parametrize("without_key", ["fail", "run"])
def test_without_wandb_credentials_no_arm_turns_wandb_on(tmp_path, runs, without_key, monkeypatch):
    """Whether `wandb.init` fails in a detached process with no key is wandb's behaviour, not
    settled by prime-rl's source: the double does either. The driver decides before the run
    directory exists: no credentials, no W&B in any arm (said in the header)."""
    env = driver_env(tmp_path, DOUBLE_WANDB_WITHOUT_KEY=without_key)
    r = driver(["run", "--dry-run", "--max-iters", "2", *FAST, "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr
    assert "W&B: off (no credentials found" in r.stderr
    rd = run_dir_from(r.stdout)
    rendered = [p for p in rd.rglob("*.toml")]
    assert rendered and not any("wandb" in tomllib.loads(p.read_text()) for p in rendered)
    # the double's launcher, given a config that turns W&B on with no key, does as the knob says
    import double_launcher

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for k in [k for k in os.environ if k.startswith("WANDB_")]:
        monkeypatch.delenv(k)
    refused = double_launcher.refusal({"wandb": {"project": "p"}, "inference": {}}, "classic")
    assert (refused is not None and "api_key not configured" in refused) == (without_key == "fail")


def test_wandb_on_without_credentials_is_refused_and_with_a_key_every_arm_logs(tmp_path, runs):
    r = driver(["run", "--wandb", "on", *FAST, "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 2 and "--wandb on, but no W&B credentials" in r.stderr
    assert list(runs.iterdir()) == []
    r = driver(["run", "--dry-run", *FAST, "--runs-dir", str(runs)],
               driver_env(tmp_path, WANDB_API_KEY="k" * 40))
    assert r.returncode == 0 and "W&B: on (credentials: WANDB_API_KEY)" in r.stderr
    rd = run_dir_from(r.stdout)
    arms = [p for p in (rd / "dry_run").rglob("rl.toml")]
    assert arms and all(tomllib.loads(p.read_text())["wandb"]["name"] == p.parent.name for p in arms)


@pytest.mark.extended   # a whole current run (about 17 s): CI's extended command keeps the main suite in its budget
def test_a_canonical_configs_train_source_name_is_kept_by_every_fork(tmp_path, runs):
    """The current generation: iter_0 trained from a canonical config keeps that config's
    train-source name in its checkpoint, and prime-rl refuses a fork whose names differ. Every
    arm forking iter_0 (the probe, the iterations, runs A and C) names its source as iter_0's."""
    d = get("current")
    knobs = Knobs.for_backend("prime_rl", steps_per_run=3, batch_size=256)
    hub = {"env_id": "stock_arithmetic", "train_args": {"split": "train"}}
    base = tomllib.loads(d.render_base(hub, knobs))
    base["orchestrator"]["train"]["source"][0]["name"] = "stock-arith"
    import tomli_w

    (tmp_path / "canon.toml").write_text(tomli_w.dumps(base))
    env = current_env(tmp_path)
    r = driver(["run", "--max-iters", "2", *FAST, "--base-config", str(tmp_path / "canon.toml"),
                "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    assert _state(rd)["iter_0_train_source"] == "stock-arith"
    forks = [rd / "iter_1" / "rl.toml", rd / "iter_1" / "probe" / "rl.toml",
             rd / "run_a_best_from_iter0" / "rl.toml", rd / "run_c_untargeted_from_iter0" / "rl.toml"]
    for cfg in forks:
        names = [s["name"] for s in tomllib.loads(cfg.read_text())["orchestrator"]["train"]["source"]]
        assert names == ["stock-arith"], cfg
    assert {c["run"] for c in _metrics(rd)["controls"]} == {"run_a", "run_b", "run_c"}
    # a canonical config with two train sources cannot be forked with one: refused up front
    base["orchestrator"]["train"]["source"].append({**base["orchestrator"]["train"]["source"][0], "name": "x"})
    (tmp_path / "two.toml").write_text(tomli_w.dumps(base))
    r = driver(["run", *FAST, "--base-config", str(tmp_path / "two.toml"), "--runs-dir",
                str(tmp_path / "runs2")], env)
    assert r.returncode == 2 and "trains iter_0 on 2 train sources" in r.stderr
    assert not (tmp_path / "runs2").exists()


# ---- --init-from a real output directory ------------------------------------------------------------

def _prior(tmp_path: Path, env: dict, configs: list[str], shards: int = 1) -> Path:
    """A prime-rl output directory, as the double writes one (no driver involved), beside the
    procedure's run.json and metrics.json."""
    prior = tmp_path / "prior"
    prior.mkdir()
    args = []
    for i, text in enumerate(configs):
        (prior / f"c{i}.toml").write_text(text)
        args += ["@", str(prior / f"c{i}.toml")]
    got = subprocess.run([sys.executable, str(DOUBLE), *args, "--output-dir", str(prior / "prime_out")],
                         env={**env, "DOUBLE_WEIGHT_SHARDS": str(shards)}, capture_output=True,
                         text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    (prior / "run.json").write_text(json.dumps({"dataset": "stock_arithmetic", "model": "Qwen/Qwen3-0.6B"}))
    (prior / "metrics.json").write_text(json.dumps({"iters": [], "controls": []}))
    return prior


def test_init_from_a_real_classic_output_dir_with_sharded_weights(tmp_path, runs):
    """Classic prime-rl shards HF weights above 5 GB and files the last step's batch one step
    below the final eval's: such a directory is accepted as iter_0."""
    d = get("classic")
    # greedy only: what the driver renders for classic prime-rl (arm.eval_knobs)
    knobs = Knobs.for_backend("prime_rl", steps_per_run=3, batch_size=256, eval_examples=50, eval_draws=0)
    hub = {"env_id": "stock_arithmetic", "eval_size": 200}
    env = driver_env(tmp_path)
    prior = _prior(tmp_path, env, [d.render_base(hub, knobs), d.render_eval_overlay(hub, knobs)], shards=3)
    out = prior / "prime_out"
    assert sorted(p.name for p in (out / "weights" / "step_3").glob("model-*")) == [
        f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    assert not (out / "weights" / "step_3" / "model.safetensors").exists()
    assert not d.train_file(out, 3).exists() and d.train_file(out, 2).exists()
    r = driver(["run", "--init-from", str(prior), "--max-iters", "1", *FAST, "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    st = _state(rd)
    assert (st["iter_0_source"], st["iter_0_step"]) == ("init-from", 3)
    it0 = _metrics(rd)["iters"][0]
    assert it0["source"] == "init-from" and it0["n_eval"] == 50
    assert it0["checkpoint"] == str(out / "weights" / "step_3")
    assert launches(tmp_path)[1:] == []      # only the double's own run: nothing trained
    # the reused eval is sealed here, in a copy of its own: the prior directory's file, which
    # holds the prompts, is left as it was; the train rows are still the prior run's, linked
    mine = d.eval_file(rd / "iter_0" / "prime_out", 3)
    assert not mine.is_symlink() and '"prompt"' not in mine.read_text()
    assert '"prompt"' in d.eval_file(out, 3).read_text()
    assert d.train_file(rd / "iter_0" / "prime_out", 2).resolve() == d.train_file(out, 2).resolve()
    assert_every_eval_file_is_sealed(rd, "classic")


def test_an_inherited_classic_iter_0_is_compared_under_the_setting_its_run_recorded(tmp_path, runs):
    """A classic prime-rl output records how its final eval was sampled in the orchestrator's
    control/orch.toml (orchestrator.py:106-110@09e2977): reused as iter_0 under that setting,
    every later arm gets a lift against it (the setting was 'unknown' before, and no lift was
    computed). Under another setting it is refused before a run directory, with the flags that
    measure every arm as it was measured."""
    from driver.reporting.summary import comparable

    d = get("classic")
    # greedy only: what the driver renders for classic prime-rl (arm.eval_knobs)
    knobs = Knobs.for_backend("prime_rl", steps_per_run=3, batch_size=256, eval_examples=50, eval_draws=0)
    hub = {"env_id": "stock_arithmetic", "eval_size": 200}
    env = driver_env(tmp_path)
    prior = _prior(tmp_path, env, [d.render_base(hub, knobs), d.render_eval_overlay(hub, knobs)])
    # another setting: refused, naming the flags
    refused = tmp_path / "refused_runs"
    r = driver(["run", "--init-from", str(prior), "--max-iters", "2", *FAST, "--eval-temperature", "0.7",
                "--runs-dir", str(refused)], env)
    assert r.returncode == 2 and not refused.exists(), r.stderr[-2000:]
    assert f"--max-completion-tokens {knobs.max_completion_tokens} --eval-temperature {knobs.eval_temperature}" in r.stderr
    r = driver(["run", "--init-from", str(prior), "--max-iters", "2", *FAST, "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    it0 = json.loads((rd / "iter_0" / "eval_summary.json").read_text())
    it1 = json.loads((rd / "iter_1" / "eval_summary.json").read_text())
    assert it0["eval_config"]["max_completion_tokens"] == knobs.max_completion_tokens
    assert it0["eval_config"]["temperature"] == knobs.eval_temperature
    assert comparable(it0, it1)
    assert "lift vs iter_0" in (rd / "scratchpad.md").read_text()


@pytest.mark.extended   # a prior run, then a whole run from it; the classic twin above stays in the main suite
def test_init_from_a_real_current_output_dir_measures_its_final_weights_then_forks_it(tmp_path, runs):
    """The current generation writes no weights/ dir and never evaluates its final weights:
    the broadcast is measured by the final-weights eval, and iterations fork the checkpoint."""
    d = get("current")
    knobs = Knobs.for_backend("prime_rl", steps_per_run=3, batch_size=256)
    hub = {"env_id": "stock_arithmetic", "train_args": {"split": "train"}}
    env = current_env(tmp_path)
    prior = _prior(tmp_path, env, [d.render_base(hub, knobs), d.render_eval_overlay(hub, knobs)])
    out = prior / "prime_out"
    assert not (out / "weights").exists() and d.resumable_step(out) == 3
    r = driver(["run", "--init-from", str(prior), "--max-iters", "2", *FAST, "--eval-examples", "60",
                "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    it0 = _metrics(rd)["iters"][0]
    assert (it0["source"], it0["n_eval"]) == ("init-from", 60)
    assert (rd / "iter_0" / "final_eval.log").exists()      # its final weights were measured
    cfg = tomllib.loads((rd / "iter_1" / "rl.toml").read_text())
    assert cfg["resume"]["dir"] == str(d.checkpoint_dir(rd / "iter_0" / "prime_out", 3))
    assert any(m["iter"] == 1 and m.get("eval_acc") is not None for m in _metrics(rd)["iters"])


@pytest.mark.extended   # two whole runs; the classic twin above stays in the main suite
def test_an_inherited_current_iter_0_measured_under_another_setting_is_measured_again(tmp_path, runs):
    """A prior driver run measured its iter_0 at eval temperature 0.0; this run measures every
    arm at 0.5. The current generation can measure any broadcast on its own, so the inherited
    weights are measured again under this run's setting (the prior run's eval was reused
    before, and no lift against it was computed); the prior run's files are left as they were."""
    from driver.reporting.summary import comparable

    env = current_env(tmp_path)
    r = driver(["run", "--max-iters", "1", *FAST, "--eval-examples", "40", "--runs-dir", str(runs / "a")], env)
    assert r.returncode == 0, r.stderr[-3000:]
    first = run_dir_from(r.stdout)
    theirs = first / "iter_0" / "prime_out" / "final_eval"
    before = sorted((p.relative_to(theirs), p.stat().st_mtime_ns) for p in theirs.rglob("*") if p.is_file())
    r = driver(["run", "--init-from", str(first), "--max-iters", "2", *FAST, "--eval-examples", "40",
                "--eval-temperature", "0.5", "--runs-dir", str(runs / "b")], env)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    it0 = json.loads((rd / "iter_0" / "eval_summary.json").read_text())
    it1 = json.loads((rd / "iter_1" / "eval_summary.json").read_text())
    assert it0["eval_config"]["temperature"] == 0.5 and comparable(it0, it1)
    assert (rd / "iter_0" / "final_eval.log").exists()
    ours = rd / "iter_0" / "prime_out" / "final_eval"
    assert ours.is_dir() and not ours.is_symlink()
    assert sorted((p.relative_to(theirs), p.stat().st_mtime_ns) for p in theirs.rglob("*") if p.is_file()) == before


# ---- errored episodes ------------------------------------------------------------------------------

@pytest.mark.parametrize("dialect", ["classic", "current"])
def test_errored_eval_episodes_are_counted_apart_never_as_wrong_answers(tmp_path, dialect):
    from driver.analysis import evaluation

    d = get(dialect)
    path = tmp_path / "eval.jsonl"
    lines = []
    for i in range(10):
        errored = i < 3
        if dialect == "classic":
            lines.append({"example_id": i, "reward": 0.0 if errored else 1.0, "metrics": {"is_correct": 0.0 if errored else 1.0},
                          "error": "ModelError" if errored else None})
        else:
            lines.append({"task": {"key": f"test:{i}"}, "env": {"name": "hub-eval"}, "ok": not errored,
                          "traces": [] if errored else [{"rewards": {"correct": {"score": 1.0, "weight": 1.0}}}]})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    s = evaluation.aggregate(path, view=d.eval_view)
    assert (s["n_eval"], s["n_errored"], s["eval_acc"]) == (7, 3, 1.0)
    assert len(s["correct_by_example"]) == 7      # the paired tests see scored examples only


@pytest.mark.parametrize("dialect", ["classic", "current"])
def test_a_client_port_other_than_the_servers_is_refused_before_a_run_directory(tmp_path, runs, dialect):
    """prime-rl's `rl` refuses to start when the orchestrator's client port is not the inference
    server's (entrypoints/rl.py:163-173@559b447, :127-139@09e2977; seen against the real launcher
    in test_prime_rl_real_driver_*): a canonical config that moves the server alone is refused
    before anything is created, naming the key to set."""
    from rl_contract import launch

    key = launch.CLIENT_URL[dialect][0]
    base = tmp_path / "rl.toml"
    train = ('[[orchestrator.train.env]]\nid = "stock_arithmetic"\n' if dialect == "classic" else
             '[run]\nname = "run"\n[weight_broadcast]\ntype = "filesystem"\n[orchestrator.renderer]\nname = "default"\n'
             '[[orchestrator.train.source]]\nname = "train"\nenv = { taskset = { id = "stock-arithmetic" }, '
             'agent = { harness = { id = "null" }, runtime = { type = "subprocess" } } }\n')
    base.write_text(f"max_steps = 3\n[model]\nname = \"Qwen/Qwen3-0.6B\"\n[trainer]\n[inference.server]\nport = 18123\n{train}")
    env = current_env(tmp_path) if dialect == "current" else driver_env(tmp_path)
    r = driver(["run", "--dry-run", "--runs-dir", str(runs), "--base-config", str(base), *FAST], env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{key} port (8000) does not match inference.server.port (18123)" in r.stderr
    assert not list(runs.iterdir())
    # the same config with the client moved too composes
    sep = "student" if dialect == "classic" else "model"
    url = '["http://127.0.0.1:18123/v1"]' if dialect == "classic" else '"http://127.0.0.1:18123/v1"'
    base.write_text(base.read_text() + f"[orchestrator.{sep}.client]\nbase_url = {url}\n")
    assert launch.client_port_mismatch(tomllib.loads(base.read_text()), dialect) is None


def test_the_engine_port_follows_the_server_port_unless_set():
    """configs/inference.py:511-515@559b447: the engine behind the router listens on
    server.port + 100 unless backend_port is set; without a router there is no engine port."""
    from rl_contract import launch

    assert launch.server_ports({"inference": {"server": {"port": 18600}}}, "current") == [18600, 18700]
    assert launch.server_ports({"inference": {"backend_port": 9001}}, "current") == [8000, 9001]
    assert launch.server_ports({"inference": {"server": {"port": 18600}}}, "classic") == [18600]
