"""Every arm measured under one configuration: with a canonical config, every arm's launch
composes to the same optimizer, trainer, inference and sampling settings as iter_0's, key by
key (only what an arm sets itself differs); every arm is evaluated with the run's completion
limit, recorded in metrics.json; a control replays the best iteration's rows, aux rewards and
hyperparameters."""
from __future__ import annotations

import json
import tomllib

import pytest
import tomli_w

from conftest import FAST, driver, driver_env, launches, run_dir_from
from rl_contract.composition import compose

EXTRA = """
[trainer.optim]
lr = 3e-6
weight_decay = 0.01
max_norm = 0.5

[trainer.loss]
ratio_type = "sequence"

[inference]
gpu_memory_utilization = 0.85

[orchestrator.buffer]
online_difficulty_filtering = true

[orchestrator.eval.sampling]
temperature = 0.6

[[orchestrator.eval.env]]
id = "stock_arithmetic"
"""


def merged(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def leaves(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        p = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(leaves(v, p))
        else:
            out[p] = v
    return out


@pytest.fixture(scope="module")
def canonical_run(tmp_path_factory):
    from driver import dialects
    from driver.run.model import Knobs

    tmp = tmp_path_factory.mktemp("canon")
    checkout = tmp / "prime-rl"
    (checkout / "configs" / "stock_arithmetic").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text('[project]\nname = "prime-rl"\nversion = "0.5.1.dev209"\n')
    knobs = Knobs.for_backend("prime_rl", batch_size=256, steps_per_run=3, seq_len=4096,
                              max_completion_tokens=512, temperature=0.9)
    text = dialects.get("classic").render_base({"env_id": "stock_arithmetic", "eval_size": 200}, knobs)
    canonical = checkout / "configs" / "stock_arithmetic" / "rl.toml"
    # a user's canonical config: the driver's base with the extra settings merged in
    canonical.write_text(tomli_w.dumps(merged(tomllib.loads(text), tomllib.loads(EXTRA))))
    r = driver(["run", "--max-iters", "2", *FAST, "--prime-rl-dir", str(checkout),
                "--runs-dir", str(tmp / "runs")], driver_env(tmp))
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp, run_dir_from(r.stdout), canonical


def test_every_arm_trains_with_iter0s_settings_key_by_key(canonical_run):
    import tomllib

    from driver.arms.arm import ARM_OWNED

    tmp, rd, canonical = canonical_run
    canon = leaves(tomllib.loads(canonical.read_text()))
    by_arm = {launch["output_dir"].split("/")[-2]: leaves(compose(launch["argv"]))
              for launch in launches(tmp)}
    # iter_1's gradient probe (iter_1/probe/) is a one-step launch under the same settings
    assert set(by_arm) == {"iter_0", "iter_1", "probe", "run_a_best_from_iter0",
                           "run_b_combined_from_base", "run_c_untargeted_from_iter0"}
    shared = [k for k in canon if not any(k == o or k.startswith(o + ".") for o in ARM_OWNED)]
    assert {"trainer.optim.lr", "trainer.optim.weight_decay", "trainer.loss.ratio_type",
            "inference.gpu_memory_utilization", "orchestrator.buffer.online_difficulty_filtering",
            "seq_len", "orchestrator.train.sampling.temperature"} <= set(shared)
    # the probe sets two things itself: its one step's batch (probe prompts x group) and no eval
    probe_owned = ("orchestrator.batch_size", "orchestrator.eval")
    for arm, cfg in by_arm.items():
        for key in shared:   # flags arrive as strings: compared as text
            if arm == "probe" and key.startswith(probe_owned):
                continue
            assert str(cfg.get(key)) == str(by_arm["iter_0"].get(key)), (arm, key)
    group = int(by_arm["iter_0"]["orchestrator.rollouts_per_example"])
    assert int(by_arm["probe"]["orchestrator.batch_size"]) == 32 * group   # --probe-prompts' default
    assert not any(k.startswith("orchestrator.eval") for k in by_arm["probe"])
    # the run's knobs win over the canonical file's where the run sets them, in iter_0 too
    assert str(by_arm["iter_0"]["seq_len"]) == "2048" and canon["seq_len"] == 4096
    assert str(by_arm["iter_1"]["trainer.optim.lr"]) == "3e-06"   # the canonical's, as in iter_0
    assert (rd / "canonical_shared.toml").exists()


def test_every_arm_is_evaluated_with_one_configuration_recorded_in_metrics(canonical_run):
    _, rd, _ = canonical_run
    m = json.loads((rd / "metrics.json").read_text())
    configs = {f"iter_{e['iter']}": e["eval_config"] for e in m["iters"]}
    configs.update({c["run"]: c["eval_config"] for c in m["controls"]})
    run_limit = json.loads((rd / "run.json").read_text())["max_completion_tokens"]
    assert {c["max_completion_tokens"] for c in configs.values()} == {run_limit}
    assert configs["iter_0"]["examples"] == configs["iter_1"]["examples"] == {"eval": 200, "hub-selection": 200}
    assert all(configs[c]["examples"] == {"eval": 200, "hub-selection": 200}
               for c in ("run_a", "run_b", "run_c"))


def test_a_canonical_configs_eval_temperature_reaches_every_arm_iter_0_included(canonical_run):
    """The canonical config sets an eval temperature: it becomes the run's one eval setting,
    rendered into every arm's eval (iter_0's overlay too), recorded with each arm's numbers."""
    tmp, rd, _ = canonical_run
    assert json.loads((rd / "run.json").read_text())["eval_temperature"] == 0.6
    for launch in launches(tmp):
        arm = launch["output_dir"].split("/")[-2]
        cfg = compose(launch["argv"])
        if arm != "probe":   # the probe has no eval
            assert cfg["orchestrator"]["eval"]["sampling"]["temperature"] == 0.6, arm
    m = json.loads((rd / "metrics.json").read_text())
    assert {e["eval_config"]["temperature"] for e in m["iters"] + m["controls"]} == {0.6}


def test_another_eval_sampling_key_in_the_canonical_config_is_refused_before_a_run_directory(tmp_path):
    from driver import dialects
    from driver.run.model import Knobs

    knobs = Knobs.for_backend("prime_rl", batch_size=256, steps_per_run=3)
    base = tomllib.loads(dialects.get("classic").render_base({"env_id": "stock_arithmetic", "eval_size": 200}, knobs))
    base["orchestrator"]["eval"] = {"sampling": {"temperature": 0.6, "top_p": 0.9},
                                    "env": [{"id": "stock_arithmetic"}]}
    (tmp_path / "canon.toml").write_text(tomli_w.dumps(base))
    runs = tmp_path / "runs"
    r = driver(["run", *FAST, "--base-config", str(tmp_path / "canon.toml"), "--runs-dir", str(runs)],
               driver_env(tmp_path))
    assert r.returncode == 2 and "[orchestrator.eval.sampling] top_p" in r.stderr
    assert not runs.exists()


def test_the_summary_computes_no_lift_between_arms_measured_under_different_settings():
    from driver.reporting.summary import comparable

    a = {"eval_config": {"max_completion_tokens": 96, "temperature": 0.0, "examples": {"eval": 200}}}
    assert comparable(a, {"eval_config": {**a["eval_config"], "examples": {"eval": 1000}}})
    assert not comparable(a, {"eval_config": {**a["eval_config"], "temperature": 0.6}})
    assert not comparable(a, {"eval_config": {"unknown": True}}) and not comparable(a, {})
