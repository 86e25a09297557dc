"""The whole loop on the current dialect: the trainer double stands in for prime-rl v0.8.1.dev67's
`rl` and `evals`, the hub is StockArithmetic-v1's taskset form, and every arm's final weights
are measured by a launch of their own. An uninterrupted run, and the same run SIGKILLed at
points across every phase and resumed each time, end identically."""
from __future__ import annotations

import json
import signal
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from conftest import FAST, current_env, driver, driver_env, launches, run_dir_from
from driver.dialects import get

# draws on, as a user of current prime-rl opts in (its default is greedy only)
ARGS = ["run", "--max-iters", "3", "--seed", "7", *FAST, "--eval-examples", "120", "--eval-draws", "4"]
ARMS = ["iter_0", "iter_1", "iter_2", "run_a_best_from_iter0", "run_b_combined_from_base",
        "run_c_untargeted_from_iter0"]
# one eval episode of every eval launch errors (an env-server or model error): counted apart
ERRORED = {"DOUBLE_ERRORED_EVAL_ROWS": "3"}
# the classic kill-anywhere test covers every phase; these are the points the current dialect
# changes: around both launches of an arm (its trainer, then its final-weights eval)
KILL_POINTS = [
    "train:after-launch",          # iter_0's trainer running, driver gone: resume re-attaches
    "train:after-launch",          # iter_0's final-weights eval running
    "evaluate:before-summary",
    "write:traces.jsonl",          # iter_0 measured, its eval traces being sealed
    "train:before-launch",         # iter_1's trainer
    "train:before-launch",         # iter_1's final eval
    "train:after-launch",          # run_a's trainer
]




def outcome(run_dir: Path):
    import re

    metrics = json.loads((run_dir / "metrics.json").read_text())
    best = json.loads((run_dir / "best_iter.json").read_text())
    best["env_dir"] = re.sub(r"_[0-9a-f]{6}$", "", best["env_dir"])
    scratch = (run_dir / "scratchpad.md").read_text()
    return metrics, best, json.loads((run_dir / "run.json").read_text())["status"], \
        scratch[scratch.index("## Final summary"):]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cur")
    r = driver([*ARGS, "--runs-dir", str(tmp / "runs")], current_env(tmp, **ERRORED))
    assert r.returncode == 0, r.stderr[-4000:]
    return tmp, run_dir_from(r.stdout), r


# The reference run is a whole loop on the current generation: its tests are in CI's extended
# command, beside the kill-anywhere test that resumes it; the main suite keeps a current whole
# loop in the partial-groups test below, and the classic twins of these checks
# (test_full_run_and_resume.py).
@pytest.mark.extended
def test_a_current_run_goes_from_taskset_introspection_to_finalize(reference):
    tmp, run_dir, r = reference
    state = json.loads((run_dir / "run.json").read_text())
    assert (state["dialect"], state["prime_rl_version"]) == ("current", "0.8.1.dev67")
    assert "dialect: current, prime-rl 0.8.1.dev67" in r.stderr
    hub = json.loads((run_dir / "hub_env.json").read_text())
    assert hub["kind"] == "taskset" and hub["env_class"] == "StockArithmeticTaskset"
    assert (hub["train_args"], hub["eval_args"], hub["selection"]["args"]) == (
        {"split": "train"}, {"split": "test"}, {"split": "selection"})
    assert [f["name"] for f in hub["rubric_funcs"] if f["weight"] > 0] == ["correct_final_stock"]
    metrics, best, status, summary = outcome(run_dir)
    assert status == "max_iters_reached"
    assert [m["iter"] for m in metrics["iters"]] == [0, 1, 2]
    assert {c["run"] for c in metrics["controls"]} == {"run_a", "run_b", "run_c"}
    # the errored episode is counted apart, never as a wrong answer
    assert all((m["n_eval"], m["n_errored"], m["n_selection"]) == (119, 1, 120) for m in metrics["iters"])
    # every arm on the same examples, the controls too
    assert all((c["n_eval"], c["n_errored"], c["n_selection"]) == (119, 1, 120) for c in metrics["controls"])
    # and measured twice, as seed 003 does: greedy, and 4 draws per example (a source of its own)
    assert all(m["n_draws"] == 4 * 120 and m["draws_acc"] is not None and m["selection_draws_acc"] is not None
               for m in metrics["iters"] + metrics["controls"])
    assert "Decided on: the per-draw success rate over 4 stochastic draws per example" in summary
    assert "Errored eval episodes (a model or env-server error" in summary
    assert "Each arm's eval measures the arm's final weights v(max_steps) alone" in summary
    assert best["chosen_on"] == "selection" and "<- BEST_ITER" in summary
    # each arm: one training launch and one final-weights eval launch, never more; iter_1
    # also its gradient probe's one-step launch
    outs = Counter(Path(l["output_dir"]).relative_to(run_dir).parts[0] for l in launches(tmp))
    assert outs == {**{arm: 2 for arm in ARMS}, "iter_1": 3, "iter_2": 3}, outs
    dialect = get("current")
    for arm in ARMS:
        d = run_dir / arm
        cfgs = [tomllib.loads(p.read_text()) for p in sorted(d.glob("*.toml")) if p.name != "evals.toml"]
        for cfg in cfgs:
            assert dialect.check_effective(cfg, complete=False) is cfg
        ev = tomllib.loads((d / "evals.toml").read_text())
        final = json.loads((d / "eval_summary.json").read_text())["final_step"]
        # the final weights are a weights-only broadcast, loaded into the served base model
        weights = dialect.weights_dir(d / "prime_out", final)
        assert ev["model"] == "Qwen/Qwen3-0.6B" and (weights / "STABLE").exists()
        assert ev["online"] == {"broadcasts_dir": str(weights.parent), "max_steps": final,
                                "resume_step": final}
        assert not (weights / "config.json").exists()
        # the train reward covers each of the arm's steps, never the spilled window after them
        steps = json.loads((d / "eval_summary.json").read_text())["train_reward_by_step"]
        start = 0 if arm in ("iter_0", "run_b_combined_from_base") else 3
        assert sorted(map(int, steps)) == list(range(start + 1, final + 1))
        assert (dialect.rollouts_dir(d / "prime_out") / f"step_{final + 1}").exists()
    # iterations and runs A and C fork iter_0's checkpoint in place: nothing is copied
    anchor = run_dir / "iter_0" / "prime_out" / "run" / "checkpoints" / "step_3"
    for arm in ("iter_1", "iter_2", "run_a_best_from_iter0", "run_c_untargeted_from_iter0"):
        cfg = tomllib.loads((run_dir / arm / "rl.toml").read_text())
        assert cfg["resume"] == {"dir": str(anchor)} and cfg["max_steps"] == 6
        assert [s["name"] for s in cfg["orchestrator"]["train"]["source"]] == ["train"]
        assert sorted(p.name for p in (run_dir / arm / "prime_out" / "run" / "checkpoints").iterdir()) == ["step_6"]
    run_b = tomllib.loads((run_dir / "run_b_combined_from_base" / "rl.toml").read_text())
    srcs = run_b["orchestrator"]["train"]["source"]
    assert "resume" not in run_b and [(s["name"], s["ratio"]) for s in srcs][0] == ("hub-train", 0.5)
    assert srcs[0]["env"]["taskset"] == {"id": "stock_arithmetic", "split": "train"}
    # the teacher read train traces as flat rows; eval summaries hold numbers only
    summary = json.loads((run_dir / "iter_1" / "eval_summary.json").read_text())
    assert set(summary["correct_by_example"]) <= {f"test:{i}" for i in range(200)}
    assert "(double)" not in (run_dir / "iter_1" / "eval_summary.json").read_text()
    assert summary["train_reward_mean"] is not None and summary["train_diagnose"]["groups"] > 0
    gate_lines = json.loads((run_dir / "iter_1" / "gate_report.json").read_text())["lines"]
    assert {"name": "no overlap with the eval split (blind)", "ok": True, "detail": ""} in gate_lines
    # the generated env is a taskset package built on the hub's own Task class
    pkg = next((run_dir / "iter_1").glob("stock_arithmetic_iter_1_*/stock_arithmetic_iter_1_*/__init__.py"))
    text = pkg.read_text()
    assert "_HubTask = _HubTaskset.task_type()" in text and "class GeneratedTask(_HubTask)" in text
    assert "return _HubTaskset.toolsets(config)" in text     # the hub taskset's shared tools too


@pytest.mark.extended   # the reference run's
def test_every_eval_file_holds_numbers_only_once_its_arm_is_evaluated(reference):
    """The eval seal on the current dialect: no eval or selection problem is in any file under
    the run directory, and every arm's final-weights eval traces (the eval and selection sources,
    the errored episode among them) hold sealed episodes only and read back to the arm's own
    numbers."""
    from tests_support import assert_every_eval_file_is_sealed, files_holding, stock_arithmetic_eval_prompts

    _, run_dir, _ = reference
    assert files_holding(run_dir, stock_arithmetic_eval_prompts()) == []   # in no file at all
    found = assert_every_eval_file_is_sealed(run_dir, "current")
    assert sorted(p.relative_to(run_dir).parts[0] for p in found) == sorted(ARMS)
    assert all("/final_eval/" in str(p) for p in found)
    episodes = [json.loads(x) for p in found for x in p.read_text().splitlines()]
    assert {k for e in episodes for k in e} == {"task", "env", "ok", "traces"}
    assert sum(not e["ok"] for e in episodes) == len(ARMS)   # the errored one of each arm


@pytest.mark.extended
def test_sigkill_anywhere_on_the_current_dialect_then_resume_gives_the_same_result(reference, tmp_path):
    _, ref_dir, _ = reference
    r = driver([*ARGS, "--runs-dir", str(tmp_path / "runs")],
               current_env(tmp_path, DRIVER_FAULT_KILL_AT=KILL_POINTS[0], **ERRORED))
    assert r.returncode == -signal.SIGKILL, r.stderr
    run_dir = run_dir_from(r.stdout)
    for point in KILL_POINTS[1:]:
        r = driver(["resume", str(run_dir)], current_env(tmp_path, DRIVER_FAULT_KILL_AT=point, **ERRORED))
        assert r.returncode == -signal.SIGKILL, f"never reached {point}: {r.stderr[-2000:]}"
    r = driver(["resume", str(run_dir)], current_env(tmp_path, **ERRORED))
    assert r.returncode == 0, r.stderr[-3000:]
    assert outcome(run_dir) == outcome(ref_dir)
    from tests_support import assert_every_eval_file_is_sealed   # the seal it died in, finished

    assert len(assert_every_eval_file_is_sealed(run_dir, "current")) == len(ARMS)
    assert not [p for p in run_dir.rglob(".traces.jsonl.*")]
    outs = Counter(Path(l["output_dir"]).relative_to(run_dir).parts[0] for l in launches(tmp_path))
    assert outs == {**{arm: 2 for arm in ARMS}, "iter_1": 3, "iter_2": 3}, outs


def test_a_stand_in_for_the_current_generation_needs_the_evals_stand_in_too(tmp_path, runs):
    env = driver_env(tmp_path, DRIVER_PRIME_RL_VERSION="0.8.1.dev60")
    r = driver(["run", "--runs-dir", str(runs), *FAST], env)
    assert r.returncode == 2 and "DRIVER_EVALS_COMMAND" in r.stderr, r.stderr
    assert list(runs.iterdir()) == []


@pytest.mark.extended
def test_no_eval_canary_of_a_taskset_is_left_under_the_run_directory_and_a_torn_eval_is_measured_again(tmp_path, runs):
    """canary_taskset plants a canary in every test and validation task: the LLM teacher's
    requests, everything the driver prints and every file under the run directory stay free of
    it, the final-weights eval's own traces included once their arm is measured. iter_1's final
    eval is torn on the first attempt: the weights are measured again, and never retrained."""
    from fake_llm import FakeLLM
    import teacher_files

    sys.path.insert(0, str(Path(__file__).with_name("envs")))
    from canary_taskset import CANARY

    def passing(body):   # a capable model: skeletons of the failed train rows it was shown
        import re

        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        assert CANARY not in user
        # the prompt's words: each row's `idx` and `step`, cited as skeleton:train_step_<step>_idx_<idx>
        skeletons = [{"source": f"train_step_{step}_idx_{idx}", "problem": json.loads(info)["problem"]}
                     for idx, step, reward, info in
                     re.findall(r"### idx (\d+) · step (\d+) · reward (\S+)\n.*?\ninfo: (.*?)\n", user, re.S)
                     if float(reward) < 0.5 and "problem" in json.loads(info)]
        return teacher_files.as_reply(teacher_files.passing(skeletons, 1, "canary_taskset"))

    with FakeLLM([passing] * 3) as llm:
        env = current_env(tmp_path, TEACHER_TEST_KEY="sk-test", DOUBLE_TORN_EVAL="iter_1",
                          PYTHONPATH=str(Path(__file__).with_name("envs")))
        r = driver(["run", "--dataset", "canary_taskset", "--max-iters", "2", "--runs-dir", str(runs),
                    "--teacher", "llm", "--llm-base-url", llm.url + "/v1", "--llm-model", "fake-1",
                    "--llm-key-env", "TEACHER_TEST_KEY", *FAST], env)
        assert r.returncode != 0 and "is not JSON" in r.stderr, r.stderr[-2000:]
        rd = run_dir_from(r.stdout)
        env.pop("DOUBLE_TORN_EVAL")
        r2 = driver(["resume", str(rd)], env)
        requests = llm.requests
    assert r2.returncode == 0, r2.stderr[-3000:]
    rel = [Path(l["output_dir"]).relative_to(rd).parts for l in launches(tmp_path)]
    assert rel.count(("iter_1", "prime_out")) == 1            # trained once
    assert rel.count(("iter_1", "prime_out", "final_eval", "step_6")) == 2   # measured twice
    assert (rd / "iter_1" / "prime_out" / "final_eval" / "step_6.failed-1").is_dir()
    assert json.loads((rd / "hub_env.json").read_text())["env_class"] == "CanaryTaskset"
    assert json.loads((rd / "iter_1" / "gate_report.json").read_text())["passed"] is True
    # every arm's eval traces, and the torn attempt set aside, hold numbers only: no file under
    # the run directory carries the canary
    from tests_support import assert_every_eval_file_is_sealed

    found = assert_every_eval_file_is_sealed(rd, "current")
    assert any("step_6.failed-1" in str(p) for p in found)
    carriers = {str(p.relative_to(rd)) for p in rd.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()}
    assert carriers == set(), carriers
    assert not any(CANARY in json.dumps(q["body"]) for q in requests)
    assert CANARY not in r.stdout + r.stderr + r2.stdout + r2.stderr
    # the gate as TEACHER.md has a teacher run it, in the run dir: the taskset's own scoring
    v = driver(["validate", str(rd / "iter_1" / "dataset.jsonl"), "--weakness",
                str(rd / "iter_1" / "weakness.json")], env)
    assert v.returncode == 0 and "reasoning earns full reward" in v.stdout, v.stdout + v.stderr[-2000:]


def _hf_cache(root: Path, model: str) -> dict:
    """A Hugging Face cache holding `model`'s config and tokenizer, as a training node's does
    after the launcher downloaded it (here: the built-in student's files under that name)."""
    import shutil

    src = next((Path(__file__).resolve().parents[1] / "embedded_trainer" / "prebuilt").glob("tiny-char-qwen2-*"))
    rev = "0" * 40
    repo = root / "hub" / f"models--{model.replace('/', '--')}"
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True)
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                 "chat_template.jinja"):
        shutil.copy(src / name, snap / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(rev)
    return {"HF_HOME": str(root), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.mark.extended   # the reference run's
def test_the_recommended_weights_export_as_a_model_directory_from_pretrained_loads(reference, tmp_path):
    """A current arm's final weights are a broadcast of shards only: export-model saves the base
    model's config, generation config and tokenizer beside a copy of them."""
    from rl_contract.classic import hf_weight_files

    tmp, run_dir, _ = reference
    env = {**current_env(tmp), **_hf_cache(tmp_path / "hf", "Qwen/Qwen3-0.6B")}
    dest = tmp_path / "model"
    r = driver(["export-model", str(run_dir), "--to", str(dest), "--json"], env)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["added_from_base_model"] == ["config", "tokenizer", "generation_config"]
    assert hf_weight_files(dest) == [] and not (dest / "STABLE").exists()
    assert (dest / "model.safetensors").read_bytes() == (Path(out["weights"]) / "model.safetensors").read_bytes()
    r = driver(["export-model", str(run_dir), "--to", str(dest)], env)
    assert r.returncode == 2 and "exists" in r.stderr


# both timings run in CI: the spilling one in the extended command (the main suite's 5 minutes)
@pytest.mark.parametrize("partial", [pytest.param("1", marks=pytest.mark.extended), "0"])
def test_partial_groups_in_the_all_files_or_none_every_arm_is_measured(tmp_path, runs, partial):
    """prime-rl appends each episode to `all` as it arrives, under the step still collecting
    (orchestrator.py:591-592@559b447): a group in flight at a ship leaves its first episodes
    under the step before, and episodes queued when the final ship starts the drain land in
    step_{M+1}. How many straddle and how many spill is timing (prime-rl's own orchestrator
    spilled on one machine, not on another), so the double does either (DOUBLE_PARTIAL_GROUPS,
    DOUBLE_SPILL_GROUPS: both on, or both off) and the loop must not depend on it."""
    r = driver(["run", "--max-iters", "2", "--seed", "7", *FAST, "--eval-examples", "40",
                "--runs-dir", str(runs)],
               current_env(tmp_path, DOUBLE_PARTIAL_GROUPS=partial, DOUBLE_SPILL_GROUPS=partial))
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert [m["iter"] for m in metrics["iters"]] == [0, 1] and len(metrics["controls"]) == 3
    d = get("current")
    out = run_dir / "iter_0" / "prime_out"
    sizes = []
    final = json.loads((run_dir / "iter_0" / "eval_summary.json").read_text())["final_step"]
    for step in d.launch_train_steps(0, final):   # the spilled step after it is cut short anyway
        groups = Counter(json.loads(line)["group"]["id"] for line in d.train_file(out, step).read_text().splitlines())
        sizes += groups.values()
    group_size = tomllib.loads((run_dir / "iter_0" / "base_rl.toml").read_text())["orchestrator"]["group_size"]
    assert (min(sizes) < group_size) == (partial == "1"), Counter(sizes)
    assert ((final + 1) in d.train_steps(out)) == (partial == "1")
    summary = json.loads((run_dir / "iter_0" / "eval_summary.json").read_text())
    assert summary["train_diagnose"]["groups"] > 0
    # the train reward covers the arm's own steps whether or not a spill follows them
    assert sorted(map(int, summary["train_reward_by_step"])) == list(range(1, final + 1))
