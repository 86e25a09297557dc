"""prime-rl's OWN launcher, orchestrator, env servers and `evals` (current generation, 559b447),
run on a CPU with only the vLLM engine and the trainer stood in (tests/prime_rl_real/), checked
against what the project states about them (rl_contract/current.py) and read through the
project's own readers (rl_contract.current.CurrentLayout).

    .venv/bin/python -m pytest -n 0 -m prime_rl_real tests/test_prime_rl_real_current.py -x -q

Each launch costs about 20-90 s here; runs are shared through module-scoped fixtures.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "prime_rl_real"))
sys.path.insert(0, str(ROOT))

import scenario_current as sc  # noqa: E402
from rl_contract import current  # noqa: E402

pytestmark = pytest.mark.prime_rl_real

MAX = 3            # the fresh run's max_steps
EVAL_INTERVAL = 2
CKPT_INTERVAL = 2
BATCH, GROUP = 8, 2
LAYOUT = current.CurrentLayout()


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _eval_steps(run_dir: Path) -> list[int]:
    return [s for s in LAYOUT.steps(run_dir / "rollouts")
            if (run_dir / "rollouts" / f"step_{s}" / "eval" / current.SUBSET / "traces.jsonl").exists()]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _eval_policies(log: str) -> dict[int, int]:
    """{step: policy version} from the orchestrator's "Evaluated <env> (Step N) | Policy vK" lines."""
    return {int(m.group(1)): int(m.group(2)) for m in
            re.finditer(r"Evaluated \S+ \(Step (\d+)\) \| Policy v(\d+)", _ANSI.sub("", log))}


def _explain(res: sc.Result) -> str:
    return f"rc={res.rc} timed_out={res.timed_out} steps={res.steps}\n--- log tail ---\n{res.log[-4000:]}"


# ---------------------------------------------------------------- runs (module-scoped)

@pytest.fixture(scope="module")
def prl_env() -> sc.TestEnv:
    env = sc.testenv()          # tools/prime_rl_testenv.py build(): builds when missing
    assert (env.python).exists() and (env.checkout / "src" / "prime_rl").is_dir()
    return env


@pytest.fixture(scope="module")
def fresh(prl_env, tmp_path_factory) -> sc.Result:
    res = sc.run_rl(tmp_path_factory.mktemp("fresh"), max_steps=MAX, eval_interval=EVAL_INTERVAL,
                    ckpt_interval=CKPT_INTERVAL, timeout=300)
    assert res.rc == 0 and not res.timed_out, _explain(res)
    return res


@pytest.fixture(scope="module")
def resumed(fresh, tmp_path_factory) -> tuple[sc.Result, sc.Result]:
    """The fresh run's output copied, then resumed from its step-2 checkpoint up to step 5."""
    tmp = tmp_path_factory.mktemp("resumed")
    out = tmp / "out"
    shutil.copytree(fresh.out, out, symlinks=True)
    res = sc.run_rl(tmp, max_steps=5, eval_interval=EVAL_INTERVAL, ckpt_interval=CKPT_INTERVAL,
                    out=out, extra_args=("--resume.step", "2"), timeout=300)
    assert res.rc == 0 and not res.timed_out, _explain(res)
    return fresh, res


@pytest.fixture(scope="module")
def aborted(prl_env, tmp_path_factory) -> sc.Result:
    return sc.run_rl(tmp_path_factory.mktemp("aborted"), max_steps=MAX, policy="constant", timeout=300)


@pytest.fixture(scope="module")
def all_errored(prl_env, tmp_path_factory) -> sc.Result:
    return sc.run_rl(tmp_path_factory.mktemp("all_errored"), max_steps=MAX, policy="error", timeout=420)


@pytest.fixture(scope="module")
def unfiltered(prl_env, tmp_path_factory) -> sc.Result:
    """The same flat groups under the gradient probe's overlay (rl_contract.current.PROBE_FILTERS,
    composed as the driver composes it: a second `@` file)."""
    import tomli_w

    tmp = tmp_path_factory.mktemp("unfiltered")
    overlay = tmp / "probe_overlay.toml"
    overlay.write_text(tomli_w.dumps(current.PROBE_FILTERS))
    return sc.run_rl(tmp, max_steps=1, policy="constant", timeout=300, extra_args=["@", str(overlay)])


@pytest.fixture(scope="module")
def trainer_failed(prl_env, tmp_path_factory) -> sc.Result:
    return sc.run_rl(tmp_path_factory.mktemp("trainer_failed"), max_steps=MAX, timeout=240,
                     extra_env={"PRL_TRAINER_FAIL_AT_STEP": "2"})


# ---------------------------------------------------------------- (a) layout and step numbering

def test_layout_run_dir_and_train_steps(fresh):
    """Facts: R = OUT/run.name (RUN_NAME pinned); train rows of a launch from F=0 to M land in
    rollouts/step_{F+1}..step_M/train/{all,effective}/traces.jsonl (SOURCES 'train rows of a
    launch from F to M ...'); checkpoints at R/checkpoints/step_N/{trainer,orchestrator};
    broadcasts at R/broadcasts/step_N with STABLE; R/metrics.jsonl."""
    R = LAYOUT.run_dir(fresh.out)
    assert R == fresh.run_dir and R.name == current.RUN_NAME and R.is_dir()
    assert LAYOUT.train_steps(fresh.out, 0, MAX) == list(LAYOUT.launch_train_steps(0, MAX)) == [1, 2, 3]
    # a spill into step_{M+1} is timing (episodes already queued when the drain starts are
    # still logged under the step after the final ship, orchestrator.py:591-592,761-776): one
    # machine writes it, another not. Either way it is `all` only, never shipped, and outside
    # the launch's window, which is all the driver reads.
    assert set(LAYOUT.train_steps(fresh.out)) - {1, 2, 3} <= {MAX + 1}
    spill = R / "rollouts" / f"step_{MAX + 1}"
    assert not (spill / "train" / "effective").exists() and not (spill / "rank_0.bin").exists()
    for s in range(1, MAX + 1):
        for subset in ("all", "effective"):
            assert (R / "rollouts" / f"step_{s}" / "train" / subset / "traces.jsonl").is_file(), (s, subset)
        assert (R / "rollouts" / f"step_{s}" / "rank_0.bin").is_file()     # filesystem transport
    # the effective subset is exactly the shipped batch; `all` holds at least every shipped episode
    for s in range(1, MAX + 1):
        eff = _jsonl(R / "rollouts" / f"step_{s}" / "train" / "effective" / "traces.jsonl")
        allr = _jsonl(LAYOUT.train_file(fresh.out, s))
        assert len(eff) == BATCH and len(allr) >= BATCH
    # configs and logs the launcher writes
    for name in ("trainer.json", "orchestrator.json", "inference.json"):
        assert (R / "configs" / name).is_file()
    assert (R / "configs" / "envs" / "train" / f"{sc.TRAIN_ENV}.json").is_file()
    assert (R / "logs" / "attempt_1" / "orchestrator.log").is_file()
    assert (R / "metrics.jsonl").is_file()
    # broadcasts v0..vM (stand-in trainer) each with STABLE; the orchestrator's NCCL_READY beside it
    assert LAYOUT.steps(LAYOUT.broadcasts_dir(fresh.out)) == [0, 1, 2, 3]
    for s in range(0, MAX + 1):
        assert (LAYOUT.weights_dir(fresh.out, s) / "STABLE").is_file()
    assert not (fresh.out / "weights").exists() and not (R / "weights").exists()
    assert "Training finished!" in fresh.log and "Orchestrator finished." in fresh.log


def test_rows_read_by_project(fresh):
    """Facts: rows are verifiers Episodes with no stored reward; reward = sum(score x weight) of
    the trace's rewards; the per-example key is task.key; group ids pair GROUP rollouts
    (rl_contract.current.train_row / episode_reward). Checks the project's reading of real rows."""
    for s in LAYOUT.train_steps(fresh.out, 0, MAX):
        rows = list(LAYOUT.train_rows(fresh.out, s))
        assert rows and all(not r["errored"] for r in rows)
        assert {r["reward"] for r in rows} <= {0.0, 1.0} and {r["reward"] for r in rows} == {0.0, 1.0}
        assert all(r["example_id"] and r["group_id"] and r["env_name"] == sc.TRAIN_ENV for r in rows)
        assert all(r["completion"] and r["completion"][-1].get("role") == "assistant" for r in rows)
        # every reply the stand-in gave is "yes" or "no", and the reward says which
        for r in rows:
            said = r["completion"][-1].get("content") or ""
            assert (r["reward"] == 1.0) == ("yes" in said.lower()), r
        eff = _jsonl(R_eff := fresh.run_dir / "rollouts" / f"step_{s}" / "train" / "effective" / "traces.jsonl")
        groups: dict = {}
        for ep in eff:
            row = current.train_row(ep)
            groups.setdefault(row["group_id"], []).append(row["reward"])
        assert len(groups) == BATCH // GROUP, R_eff
        assert all(len(g) == GROUP and max(g) > min(g) for g in groups.values()), groups
    # a spill after the final ship (timing: see test_layout_run_dir_and_train_steps) reads the
    # same way, and not one of its groups was shipped
    shipped = {current.train_row(ep)["group_id"] for s in range(1, MAX + 1)
               for ep in _jsonl(fresh.run_dir / "rollouts" / f"step_{s}" / "train" / "effective" / "traces.jsonl")}
    if (MAX + 1) in LAYOUT.train_steps(fresh.out):
        late = list(LAYOUT.train_rows(fresh.out, MAX + 1))
        assert late and {r["reward"] for r in late} <= {0.0, 1.0}
        assert not {r["group_id"] for r in late} & shipped


def test_eval_placement(fresh):
    """Facts: the base eval (policy v0) lands in step_1; interval evals fire when
    progress.step % interval == 0 *after the batch before it ships* (orchestrator.py:759@559b447
    calls maybe_trigger_eval(progress.step) after `progress.step += 1` at :690; eval_source.py:54).
    So with M=3, interval 2 the evals are at steps 1, 2 and 4 = M+1: an eval DOES fire after the
    final batch when (M+1) % interval == 0, and it ran on the final policy v3 here.
    rl_contract/current.py's docstring says "the run never evaluates its final weights" — that
    holds only when (M+1) % interval != 0."""
    assert _eval_steps(fresh.run_dir) == [1, 2, 4]
    policies = _eval_policies(fresh.log)
    assert sorted(policies) == [1, 2, 4], policies
    assert policies[1] == 0                       # the base eval runs on v0
    # an interval eval at step N runs on whatever policy is live: at most v{N-1} (the batch
    # before it shipped); which one is a race with the trainer (v0 or v1 at step 2 here)
    assert all(0 <= v <= n - 1 for n, v in policies.items() if n > 1), policies
    # step_{M+1} holds the eval only: no train batch is shipped past max_steps
    assert not (fresh.run_dir / "rollouts" / "step_4" / "rank_0.bin").exists()
    # the project's eval reader on real eval episodes
    for s in (1, 2, 4):
        views = [current.eval_view(ep) for ep in
                 _jsonl(fresh.run_dir / "rollouts" / f"step_{s}" / "eval" / current.SUBSET / "traces.jsonl")]
        assert len(views) == 4 and all(v["env_name"] == sc.EVAL_ENV and not v["errored"] for v in views)
        assert {v["reward"] for v in views} <= {0.0, 1.0}


def test_checkpoints(fresh):
    """Facts: the orchestrator saves checkpoints/step_{k*interval} (not at max) and a final
    step_M; the trainer's half is checkpoints/step_N/trainer (trainer/ckpt.py:163-165@559b447);
    resumable_step needs both halves; checkpoint_trees(M) exist after a finished run."""
    ck = fresh.run_dir / "checkpoints"
    assert LAYOUT.steps(ck) == [2, 3]
    for s in (2, 3):
        assert (ck / f"step_{s}" / "orchestrator" / "progress.pt").is_file()
        assert (ck / f"step_{s}" / "trainer").is_dir()
    assert LAYOUT.resumable_step(fresh.out) == 3
    assert all(p.exists() for p in LAYOUT.checkpoint_trees(fresh.out, MAX))


# ---------------------------------------------------------------- (f) what the trainer received

def test_trainer_received_batches(fresh):
    """Fact: the orchestrator ships batch s (filesystem transport, rollouts/step_s/rank_0.bin)
    for s = 1..M with BATCH samples, each with non-zero advantages under a mixed policy
    (zero-advantage samples filtered, configs/orchestrator.py:270@559b447)."""
    recs = fresh.trainer_records()
    assert [r["step"] for r in recs] == [1, 2, 3]
    for r in recs:
        assert r["samples"] == BATCH and r["ranks"] == 1 and r["env_names"] == [sc.TRAIN_ENV]
        assert r["loss_tokens"] > 0 and r["nonzero_advantages"] == r["loss_tokens"]


# ---------------------------------------------------------------- (b) resume

def test_resume_from_checkpoint(resumed):
    """Facts: a resume from checkpoint F ships steps F+1..M with max_steps absolute
    (SOURCES 'train rows of a launch from F to M'; orchestrator.py:321@559b447), does not run the
    base eval (eval_source.py:49 first_trigger false on resume), the launcher cleans steps > F
    (entrypoints/rl.py:646-648) and logs to logs/attempt_2."""
    fresh, res = resumed
    R = res.run_dir
    assert "Resuming orchestrator from checkpoint step 2" in res.log, _explain(res)
    recs = res.trainer_records()                   # the copied log (1..3) plus this launch's steps
    assert [r["step"] for r in recs] == [1, 2, 3, 3, 4, 5]
    assert all(r["nonzero_advantages"] > 0 for r in recs)
    assert LAYOUT.train_steps(res.out, 2, 5) == list(LAYOUT.launch_train_steps(2, 5)) == [3, 4, 5]
    # the fresh run's rows before the fork stay; a spill past 5 is timing (see the layout test)
    on_disk = LAYOUT.train_steps(res.out)
    assert on_disk[:5] == [1, 2, 3, 4, 5] and set(on_disk[5:]) <= {6}, on_disk
    # no base eval at the first new step (3 is not interval-aligned); evals at 4 and at M+1 = 6
    assert _eval_steps(R) == [1, 2, 4, 6]
    assert sorted(_eval_policies(res.log)) == [4, 6], _eval_policies(res.log)
    # step_3's rows are this launch's (the fresh run's step_3 was removed, then rewritten)
    eff3 = _jsonl(R / "rollouts" / "step_3" / "train" / "effective" / "traces.jsonl")
    assert len(eff3) == BATCH
    assert (R / "logs" / "attempt_2").is_dir() and (R / "logs" / "attempt_1").is_dir()
    assert LAYOUT.resumable_step(res.out) == 5


# ---------------------------------------------------------------- (c) zero-advantage abort

def test_zero_advantage_abort(aborted):
    """Facts: ten consecutive empty train batches abort the run (orchestrator.py:99,640-652@559b447:
    MAX_CONSECUTIVE_EMPTY_BATCHES = 10, "10 consecutive empty train batches"); the launcher exits 1;
    no evicted.txt (classic only); every episode stays in `all` under the one step it could not
    ship, which is what rl_contract.CurrentLayout.abort_reason reads."""
    res = aborted
    assert res.rc == 1 and not res.timed_out, _explain(res)
    assert f"{current.MAX_CONSECUTIVE_EMPTY_BATCHES} consecutive empty train batches" in res.log
    assert "consecutive empty batches: 10/10" in res.log
    assert not list(res.out.rglob("evicted.txt"))
    assert LAYOUT.train_steps(res.out) == [1]
    assert not (res.run_dir / "rollouts" / "step_1" / "rank_0.bin").exists()
    assert res.trainer_records() == []
    reason = LAYOUT.abort_reason(res.out, 0, MAX, BATCH // GROUP)
    assert reason is not None and "consecutive empty train batches at step 1" in reason, reason


def test_every_episode_erroring_aborts_on_the_second_rule(all_errored):
    """Fact: groups with no trainable survivor (here every model request fails) count toward
    ten batch equivalents, then the orchestrator raises "10 consecutive zero-output batch
    equivalents" (orchestrator/train_sink.py:28,309-338@559b447) and the launcher exits 1. The
    project reads that abort from the files as it reads the zero-advantage one
    (CurrentLayout.abort_reason), so the driver records the arm with prime-rl's reason."""
    res = all_errored
    assert res.rc == 1 and not res.timed_out, _explain(res)
    assert f"{current.MAX_ZERO_OUTPUT_BATCHES} consecutive zero-output batch equivalents" in res.log
    assert res.trainer_records() == []
    reason = LAYOUT.abort_reason(res.out, 0, MAX, BATCH // GROUP)
    assert reason is not None and "zero-output batch equivalents at step 1" in reason, reason


def test_the_probes_filter_overlay_ships_flat_groups_instead_of_aborting(unfiltered):
    """Fact: with the probe's overlay (orchestrator.train.filter_zero_advantages = false,
    configs/orchestrator.py:270@559b447) the same all-equal rewards that abort a run above ship
    their batch: the launch ends 0, step 1's batch reaches the trainer with every advantage
    zero, and its episodes are the rows the probe reads."""
    res = unfiltered
    assert res.rc == 0 and not res.timed_out, _explain(res)
    assert "consecutive empty train batches" not in res.log
    recs = res.trainer_records()
    assert [r["step"] for r in recs] == [1] and recs[0]["nonzero_advantages"] == 0, recs
    assert len(list(LAYOUT.train_rows(res.out, 1))) >= BATCH


# ---------------------------------------------------------------- (d) trainer failure teardown

def test_trainer_failure_tears_down(trainer_failed):
    """Facts: when the trainer exits non-zero the launcher logs it, terminates all its children and
    exits non-zero (entrypoints/rl.py:382,398 and cleanup_processes, utils/process.py:83@559b447); nothing of the run survives and its ports are free again (rl_contract/launch.py's
    process-tree statements)."""
    res = trainer_failed
    assert not res.timed_out, _explain(res)
    assert res.rc not in (0, None), _explain(res)
    assert "Trainer failed with exit code 3" in res.log, _explain(res)
    needles = [str(res.out)] + [str(p) for p in res.ports.values()]
    survivors = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if any(n in cmd for n in needles):
            survivors.append((p.info["pid"], cmd[:200]))
    assert survivors == [], survivors
    for name, port in res.ports.items():
        assert sc.port_free(port), (name, port)
    recs = res.trainer_records()
    assert [r["step"] for r in recs] == [1]


# ---------------------------------------------------------------- (e) standalone evals

@pytest.fixture(scope="module")
def evals_ok(prl_env, tmp_path_factory) -> sc.Result:
    return sc.run_evals(tmp_path_factory.mktemp("evals_ok"), metrics=True, timeout=200)


@pytest.fixture(scope="module")
def evals_no_metrics(prl_env, tmp_path_factory) -> sc.Result:
    return sc.run_evals(tmp_path_factory.mktemp("evals_nometrics"), metrics=False, timeout=200)


def test_standalone_evals_writes_step_0(evals_ok):
    """Fact: a standalone `evals` (no [online]) writes its episodes to
    OUT/rollouts/step_0/eval/{all,effective}/traces.jsonl with metrics.jsonl and the env's config
    (evals/evals.py@559b447); rows read by the project's eval_view."""
    res = evals_ok
    assert res.rc == 0 and not res.timed_out, _explain(res)
    assert res.steps == [0]
    f = res.out / "rollouts" / "step_0" / "eval" / current.SUBSET / "traces.jsonl"
    views = [current.eval_view(ep) for ep in _jsonl(f)]
    assert len(views) == 4 and all(not v["errored"] and v["env_name"] == sc.EVAL_ENV for v in views)
    assert (res.out / "rollouts" / "step_0" / "eval" / "effective" / "traces.jsonl").is_file()
    assert (res.out / "metrics.jsonl").is_file()
    assert (res.out / "configs" / "envs" / "eval" / f"{sc.EVAL_ENV}.json").is_file()


def test_standalone_evals_refuses_without_engine_metrics(evals_no_metrics):
    """Fact: `evals` refuses to start when the server has no vLLM /metrics and the concurrency
    is not pinned (evals/evals.py:166-176@559b447: "No engine metrics ... pin the concurrency")."""
    res = evals_no_metrics
    assert res.rc not in (0, None) and not res.timed_out, _explain(res)
    assert "No engine metrics" in res.log
    assert not (res.out / "rollouts" / "step_0" / "eval" / "all" / "traces.jsonl").exists()


# ---------------------------------------------------------------- the driver's stop, mid-step

def test_the_drivers_stop_mid_step_leaves_no_process_and_frees_the_ports(prl_env, tmp_path, monkeypatch):
    """Facts: the driver launches `uv run rl` in a session of its own and stops it by SIGTERM to
    that group, then SIGKILL after its grace (driver/backends/process.py launch/stop); prime-rl's
    launcher, on SIGTERM, terminates every child it started (utils/process.py cleanup_processes,
    entrypoints/rl.py:398-405@559b447). Stopped while step 1's batch is still collecting, nothing
    of the run survives and the server, engine and env-server ports are free again for the next
    arm (process.wait_ports_free, as the driver waits before its next launch)."""
    import time

    from driver.backends import process
    from driver.backends.base import Command

    out = tmp_path / "out"
    server, backend, env_base = sc.free_ports(3, consecutive=2)
    ports = {"server": server, "backend": backend, "env_base": env_base, "env_eval": env_base + 1}
    cfg = tmp_path / "rl.toml"
    cfg.write_text(sc.rl_toml(out, max_steps=50, ports=ports, eval_interval=None, ckpt_interval=None))
    for k, v in sc._env("mixed", "forward", tmp_path / "standin.jsonl", None).items():
        monkeypatch.setenv(k, v)
    # the stand-in trainer takes its time over each batch, so the stop lands mid-step
    monkeypatch.setenv("PRL_TRAINER_STEP_SECONDS", "5")
    log = tmp_path / "train.log"
    tp = process.launch(Command((str(sc.BIN / "uv"), "run", "rl"), str(prl_env.checkout)),
                        ["@", str(cfg), "--output-dir", str(out)], out, log)
    try:
        deadline = time.monotonic() + 240
        first = out / sc.RUN_NAME / "rollouts" / "step_1" / "train" / "all" / "traces.jsonl"
        while not first.exists() and time.monotonic() < deadline and process.is_alive(tp):
            time.sleep(0.5)
        assert first.exists(), log.read_text(errors="replace")[-3000:]
        tree = process.record_tree(tp, log)
        assert len(tree) >= 4, tree      # launcher, inference, orchestrator, trainer, env server(s)
    finally:
        process.stop(tp, grace_s=120, log=log)
    assert process.tree_alive(tp, log) == []
    needles = [str(out)] + [str(p) for p in ports.values()]
    survivors = [(p.info["pid"], " ".join(p.info["cmdline"] or [])[:200])
                 for p in psutil.process_iter(["pid", "cmdline"])
                 if any(n in " ".join(p.info["cmdline"] or []) for n in needles)]
    assert survivors == [], survivors
    process.wait_ports_free(list(ports.values()), timeout_s=30)


@pytest.fixture(scope="module")
def lora_run(prl_env, tmp_path_factory) -> sc.Result:
    """A LoRA run, as configs/basic/alphabet-sort@559b447 trains one ([trainer.model.lora])."""
    res = sc.run_rl(tmp_path_factory.mktemp("lora"), max_steps=2,
                    extra_args=["--trainer.model.lora.rank", "8", "--trainer.model.lora.alpha", "16"])
    assert res.rc == 0, _explain(res)
    return res


def _final_eval(res: sc.Result, tmp: Path, served: Path | None) -> tuple[int, str, list[dict]]:
    """The driver's final-weights eval of the run's last broadcast: its rendered client (from
    the served config when given), the scenario's own eval source, rl_contract/final_eval.py."""
    import subprocess
    import tomllib

    import tomli_w

    from driver.dialects import get
    from driver.run.model import Knobs

    hub = {"env_id": sc.TRAIN_ENV, "eval_size": 4, "eval_args": {}}
    knobs = Knobs.for_backend("prime_rl", model=str(sc.model_dir()), eval_examples=4)
    out = tmp / "final_eval"
    cfg = tomllib.loads(get("current").render_final_eval(
        hub, knobs, LAYOUT.broadcasts_dir(res.out), 2, out,
        served=json.loads(served.read_text()) if served else None))
    env_base = sc.free_ports(1)[0]
    cfg["eval"].update(num_examples=4, env_server_base_port=env_base, source=[{
        "name": sc.EVAL_ENV, "env": {"taskset": {"id": sc.TRAIN_ENV}, "agent": {
            "harness": {"id": "prl-cpu-harness"}, "runtime": {"type": "subprocess"}}}}])
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "evals.toml").write_text(tomli_w.dumps(cfg))
    env = sc._env("mixed", "data-only", tmp / "standin.jsonl", None)
    p = subprocess.run([sys.executable, "-m", "rl_contract.final_eval", "--prime-rl-dir", str(sc.testenv().checkout),
                        *(["--inference-config", str(served)] if served else []),
                        "@", str(tmp / "evals.toml"), "--output-dir", str(out)],
                       env=env, capture_output=True, text=True, timeout=600, cwd=str(ROOT))
    rows = out / "rollouts" / "step_2" / "eval" / "all" / "traces.jsonl"
    return p.returncode, p.stdout + p.stderr, _jsonl(rows) if rows.exists() else []


def test_a_lora_arm_is_measured_on_the_inference_config_rl_resolved(lora_run, tmp_path):
    """prime-rl's own launcher turns LoRA on for the server it starts (configs/rl.py:576-578) and
    writes that config to R/configs/inference.json; the trainer broadcasts an adapter, which
    prime-rl's `evals` loads with /load_lora_adapter. The driver's final-weights eval, started on
    that file, measures the arm; started as it was before (the base model, no LoRA), the adapter
    does not load, `evals` skips the step and no row is written."""
    served = lora_run.run_dir / "configs" / "inference.json"
    inf = json.loads(served.read_text())
    assert inf["vllm"]["enable_lora"] is True and inf["vllm"]["max_lora_rank"] == 8
    assert (LAYOUT.weights_dir(lora_run.out, 2) / "adapter_config.json").is_file()
    rc, log, rows = _final_eval(lora_run, tmp_path / "served", served)
    assert rc == 0 and len(rows) == 4, log[-3000:]
    rc, log, rows = _final_eval(lora_run, tmp_path / "bare", None)
    assert rows == [] and "Failed to update inference weights to step 2" in log, log[-3000:]


def test_every_canonical_config_of_the_checkout_passes_the_drivers_check(prl_env):
    """prime-rl's own configs/basic/*/rl.toml are what `driver run` picks for an env (or the
    closest one's settings): each passes the driver's check of a base config, composed with
    iter_0's flags and overlay as iter_0 launches it. Every one was refused before: none sets
    the filesystem broadcast or run.name (iter_0's overlay and flags do), and wordle's role is
    `player`, not `agent`."""
    from driver.commands.run import _check_base_config
    from driver.run.model import Knobs

    found = sorted((prl_env.checkout / "configs" / "basic").glob("*/rl.toml"))
    assert len(found) >= 5
    for cfg in found:
        _check_base_config(cfg, "current", Knobs.for_backend("prime_rl"))
