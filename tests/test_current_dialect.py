"""The current dialect (prime-rl v0.8.1.dev57 .. dev67, v1 tasksets): rendered configs key by
key, the preflight refusals the contract calls for, and the trace readers."""
from __future__ import annotations

import json
import tempfile
import tomllib
from pathlib import Path

import pytest

from driver.dialects import current_schema, get
from driver.run.model import Knobs
from driver.dialects.current import NULL_AGENT, TRAIN_SOURCE
from driver.errors import UsageError
from rl_contract.composition import compose
from rl_contract.current import RUN_NAME, eval_view, episode_reward, train_row

KNOBS = Knobs.for_backend("prime_rl", model="Qwen/Qwen3-0.6B", batch_size=256, rollouts_per_example=16, steps_per_run=30,
              eval_examples=150, lr=3e-6, max_completion_tokens=512, temperature=0.7, wandb="on",
              eval_draws=4)
EVAL_KNOBS = KNOBS.model_copy(update={"max_completion_tokens": 256})   # the eval's own limit
HUB = {"env_id": "stock-arithmetic", "env_args": {"seed": 0}, "eval_size": 200,
       "train_args": {"split": "train"}, "eval_args": {"split": "test"},
       "selection": {"size": 200, "args": {"split": "validation"}}}
D = get("current")
# a forked checkpoint that exists (the launch-time check looks for it)
ANCHOR = Path(tempfile.mkdtemp(prefix="anchor-")) / "iter_0" / "prime_out"
(ANCHOR / RUN_NAME / "checkpoints" / "step_30").mkdir(parents=True)


def _taskset(block):
    return block["env"]["taskset"]


def test_difficulty_filtering_is_said_explicitly_and_otherwise_left_to_the_default():
    plain = tomllib.loads(D.render_base(HUB, KNOBS))
    assert "filter_zero_advantages" not in plain["orchestrator"]["train"]   # prime-rl's default: on
    on = tomllib.loads(D.render_base(HUB, KNOBS.model_copy(update=dict(difficulty_filter=True))))
    assert on["orchestrator"]["train"]["filter_zero_advantages"] is True
    assert current_schema.unknown_keys(on) == []


def test_base_and_overlay_compose_into_the_intended_iter0(tmp_path):
    (tmp_path / "base.toml").write_text(D.render_base(HUB, KNOBS))
    (tmp_path / "overlay.toml").write_text(D.render_eval_overlay(HUB, KNOBS))
    cfg = compose(["@", str(tmp_path / "base.toml"), "@", str(tmp_path / "overlay.toml"),
                   *D.iter0_overrides(KNOBS, tmp_path / "out")])
    # flags arrive as strings; the run's sequence length, sampling and lr are flags in iter_0 as
    # in every arm (a canonical config's values for them never differ between arms)
    assert cfg["max_steps"] == "30" and cfg["seq_len"] == "2048"
    assert cfg["run"] == {"name": RUN_NAME} and cfg["output_dir"] == str(tmp_path / "out")
    assert cfg["weight_broadcast"] == {"type": "filesystem"} and cfg["ckpt"] == {"interval": 30}
    orch = cfg["orchestrator"]
    assert orch["batch_size"] == "256" and orch["group_size"] == "16"
    assert orch["train"]["sampling"] == {"max_completion_tokens": "512", "temperature": "0.7"}
    [src] = orch["train"]["source"]
    assert src == {"name": TRAIN_SOURCE, "env": {"taskset": {"id": "stock-arithmetic", "seed": 0,
                                                             "split": "train"}, "agent": NULL_AGENT}}
    assert "eval" not in orch      # the run never measures its final weights: `evals` does
    assert cfg["trainer"] == {"optim": {"lr": "3e-06"}} and cfg["inference"] == {}
    assert "rollouts_per_example" not in orch and "resume" not in cfg
    D.check_effective(cfg)


def test_an_iteration_forks_iter0_by_resume_dir_with_absolute_max_steps(tmp_path):
    it0 = tmp_path / "iter_0" / "prime_out"
    text = D.render_run(arm="iter_1", purpose="targeted rows", hub=HUB, knobs=KNOBS, eval_knobs=EVAL_KNOBS,
                        train_envs=[D.train_env_block("gen-pkg")], resume_step=30, resume_from=it0)
    cfg = D.check_rendered(text, expect_resume=30)
    assert cfg["max_steps"] == 60
    assert cfg["resume"] == {"dir": str(it0 / RUN_NAME / "checkpoints" / "step_30")}
    [src] = cfg["orchestrator"]["train"]["source"]
    assert src["name"] == TRAIN_SOURCE and _taskset(src) == {"id": "gen-pkg"}
    assert cfg["monitors"] == {"wandb": {"project": "synthetic-self-improve-rl-stock-arithmetic", "name": "iter_1"}}
    assert text.startswith("# iter_1: targeted rows\n")


def test_run_b_has_two_named_sources_with_ratios():
    text = D.render_run(arm="run_b", purpose="p", hub=HUB, knobs=KNOBS, eval_knobs=EVAL_KNOBS, resume_step=None,
                        train_envs=[D.train_env_block("stock-arithmetic", D.hub_train_args(HUB),
                                                      name="hub-train", ratio=0.5),
                                    D.train_env_block("gen-pkg", name="gen-pkg", ratio=0.5)])
    cfg = D.check_rendered(text)
    srcs = cfg["orchestrator"]["train"]["source"]
    assert [(s["name"], s["ratio"], _taskset(s)) for s in srcs] == [
        ("hub-train", 0.5, {"id": "stock-arithmetic", "seed": 0, "split": "train"}),
        ("gen-pkg", 0.5, {"id": "gen-pkg"})]
    assert cfg["max_steps"] == 30 and "resume" not in cfg


def test_the_final_weights_eval_config_loads_the_broadcast_into_the_served_base_model(tmp_path):
    """A broadcast holds weight shards only: evals' online mode serves the base model (by its
    name, as in training) and loads the arm's final broadcast into it, at the retrigger."""
    b = tmp_path / "run" / "broadcasts"
    cfg = tomllib.loads(D.render_final_eval(HUB, EVAL_KNOBS, b, 60, tmp_path / "fe"))
    assert current_schema.unknown_keys(cfg, current_schema.EVALS_SCHEMA) == []
    assert cfg["model"] == "Qwen/Qwen3-0.6B" and cfg["output_dir"] == str(tmp_path / "fe")
    assert cfg["online"] == {"broadcasts_dir": str(b), "max_steps": 60, "resume_step": 60}
    assert cfg["eval"]["retrigger_on_resume"] is True
    assert cfg["eval"]["sampling"] == {"temperature": 0.0, "max_completion_tokens": 256}
    assert [(s["name"], s["num_examples"], s["group_size"], _taskset(s)) for s in cfg["eval"]["source"]] == [
        ("hub-eval", 150, 1, {"id": "stock-arithmetic", "seed": 0, "split": "test"}),
        ("hub-selection", 150, 1, {"id": "stock-arithmetic", "split": "validation"}),
        # seed 003's draws: each split again, --eval-draws rollouts per example, at temperature
        # one by the source's own sampling (its other fields inherit the eval's: max tokens)
        ("hub-eval-draws", 150, 4, {"id": "stock-arithmetic", "seed": 0, "split": "test"}),
        ("hub-selection-draws", 150, 4, {"id": "stock-arithmetic", "split": "validation"})]
    assert [s.get("sampling") for s in cfg["eval"]["source"]] == [None, None, {"temperature": 1.0},
                                                                   {"temperature": 1.0}]
    assert all(s["env"]["agent"] == NULL_AGENT for s in cfg["eval"]["source"])
    no_draws = tomllib.loads(D.render_final_eval(HUB, EVAL_KNOBS.model_copy(update={"eval_draws": 0}),
                                                 b, 60, tmp_path / "fe"))
    assert [s["name"] for s in no_draws["eval"]["source"]] == ["hub-eval", "hub-selection"]
    # online evals file the episodes under the policy's step
    assert D.eval_file(tmp_path, 60) == tmp_path / "final_eval" / "step_60" / "rollouts" / "step_60" / "eval" / "all" / "traces.jsonl"


def _good() -> dict:
    return tomllib.loads(D.render_run(arm="iter_1", purpose="p", hub=HUB, knobs=KNOBS, eval_knobs=EVAL_KNOBS,
                                      train_envs=[D.train_env_block("gen")], resume_step=30,
                                      resume_from=ANCHOR))


def _with(path: str, value):
    cfg = _good()
    node = cfg
    *head, last = path.split(".")
    for k in head:
        node = node.setdefault(k, {})
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value
    return cfg


@pytest.mark.parametrize("cfg, needle", [
    (_with("orchestrator.rollouts_per_example", 8), "rollouts_per_example is orchestrator.group_size"),
    (_with("ckpt.resume_step", 30), "[ckpt] resume_step is [resume] step"),
    (_with("wandb", {"project": "x"}), "[wandb] is [monitors.wandb]"),
    (_with("orchestrator.train.env", [{"id": "x"}]), "[[orchestrator.train.source]] with env.taskset"),
    (_with("max_steps", 30), "trainer hangs"),
    (_with("max_steps", 12), "must exceed the resume step 30"),
    (_with("resume", {"dir": "/r/checkpoints/step_30", "step": 30}), "step or dir, not both"),
    (_with("resume", {"dir": "/r/checkpoints/latest"}), "checkpoints/step_N"),
    (_with("resume", {"step": 0}), "positive integer"),
    (_with("orchestrator.batch_size", 248), "group_size"),
    (_with("trainer", None), "no [trainer] table"),
    (_with("run", None), "random suffix per launch"),
    (_with("model.name", "Qwen/Qwen2.5-0.5B-Instruct"), "renderer map"),
    (_with("weight_broadcast", None), "NCCL"),
    (_with("weight_broadcast", {"type": "nccl"}), "writes no loadable weights"),
    (_with("orchestrator.eval", {"interval": 5}), "without a source"),
    (_with("resume", {"dir": "/nowhere/checkpoints/step_30"}), "does not exist"),
])
def test_preflight_refuses_what_fails_at_runtime(cfg, needle):
    with pytest.raises(UsageError) as e:
        D.check_effective(cfg)
    assert needle in str(e.value)


def test_a_resume_that_renames_the_train_source_or_drops_the_agent_is_refused():
    cfg = _good()
    cfg["orchestrator"]["train"]["source"][0]["name"] = "gen"
    with pytest.raises(UsageError, match="keep the checkpoint's names"):
        D.check_effective(cfg)
    cfg = _good()
    del cfg["orchestrator"]["train"]["source"][0]["env"]["agent"]
    with pytest.raises(UsageError, match="remote sandbox"):
        D.check_effective(cfg)
    # an env whose role has another name (configs/basic/wordle@559b447: `player`) is read by it
    cfg["orchestrator"]["train"]["source"][0]["env"]["player"] = {"harness": {"id": "null"}}
    with pytest.raises(UsageError, match="its 'player' role"):
        D.check_effective(cfg)
    cfg["orchestrator"]["train"]["source"][0]["env"]["player"]["runtime"] = {"type": "subprocess"}
    D.check_effective(cfg)
    cfg = _good()
    cfg["orchestrator"]["renderer"] = {"name": "qwen3"}
    cfg["model"]["name"] = "my-org/tiny"                 # any model, with an explicit renderer
    assert D.check_effective(cfg)["model"]["name"] == "my-org/tiny"


def test_foreign_run_sees_any_artifact_in_the_run_dir(tmp_path):
    assert D.foreign_run(tmp_path, 30) == []
    (tmp_path / RUN_NAME / "rollouts" / "step_31").mkdir(parents=True)
    (tmp_path / RUN_NAME / "broadcasts" / "step_30").mkdir(parents=True)
    assert sorted(Path(p).name for p in D.foreign_run(tmp_path, 30)) == ["step_30", "step_31"]


def _episode(key, rewards, *, ok=True, stop=None, metrics=None, secret="the eval prompt"):
    return {"id": "e", "env": {"id": "stock-arithmetic", "name": "hub-eval"},
            "task": {"type": "StockTask", "key": key, "hash": "h",
                     "data": {"prompt": secret, "answer": "42", "info": {"problem": {"initial": 1}}}},
            "group": {"id": "g"}, "ok": ok, "errors": [] if ok else ["boom"],
            "traces": [{"nodes": [{"message": {"role": "user", "content": secret}},
                                  {"message": {"role": "assistant", "content": "{\"final_stock\": 42}"},
                                   "sampled": True}],
                        "rewards": {n: {"score": s, "weight": w} for n, (s, w) in rewards.items()},
                        "metrics": metrics or {}, "stop_condition": stop, "is_completed": True}]}


def test_reward_is_the_weighted_sum_of_scores_and_eval_rows_keep_numbers_only():
    ep = _episode("test:7", {"correct": (1.0, 1.0), "style": (0.5, 0.2)},
                  metrics={"population_ID50": 1.0, "lenient_correct": 1.0})
    assert episode_reward(ep) == pytest.approx(1.1)
    view = eval_view(ep)
    assert view == {"example_id": "test:7", "env_name": "hub-eval", "errored": False, "reward": pytest.approx(1.1),
                    "metrics": {"population_ID50": 1.0, "lenient_correct": 1.0, "correct": 1.0,
                                "style": 0.5}}
    assert "the eval prompt" not in json.dumps(view) and "42" not in json.dumps(view)
    failed = eval_view(_episode("test:8", {"correct": (1.0, 1.0)}, ok=False))
    # an errored episode is marked as such (counted apart from wrong answers), its numbers 0
    assert failed["errored"] is True and failed["reward"] == 0.0 and failed["metrics"] == {"correct": 0.0}


def test_train_rows_read_as_the_flat_rows_the_teacher_sees():
    row = train_row(_episode("train:3", {"correct": (0.0, 1.0)}, stop="max_output_tokens",
                             secret="how many crates"))
    assert row["example_id"] == "train:3" and row["reward"] == 0.0 and row["is_truncated"] is True
    assert row["prompt"] == [{"role": "user", "content": "how many crates"}]
    assert row["completion"] == [{"role": "assistant", "content": "{\"final_stock\": 42}"}]
    assert row["answer"] == "42" and row["info"] == {"problem": {"initial": 1}}


def test_resumable_step_needs_both_halves_of_a_checkpoint(tmp_path):
    ck = tmp_path / RUN_NAME / "checkpoints"
    (ck / "step_10" / "trainer").mkdir(parents=True)
    (ck / "step_10" / "orchestrator").mkdir(parents=True)
    (ck / "step_10" / "orchestrator" / "progress.pt").write_text("x")
    (ck / "step_20" / "orchestrator").mkdir(parents=True)     # a crash's orchestrator-only save
    (ck / "step_20" / "orchestrator" / "progress.pt").write_text("x")
    assert D.resumable_step(tmp_path) == 10
