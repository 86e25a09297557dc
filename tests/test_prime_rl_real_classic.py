"""Classic prime-rl (09e2977) itself, run on a CPU: the runtime facts rl_contract/classic.py states,
checked against what prime-rl's real `rl` launcher, orchestrator and env server write.

Only vLLM and the trainer are stood in for (tests/prime_rl_real/: inference_standin.py,
trainer_standin_classic.py, reached through the PATH shims in bin/); the env is
fixtures_classic/prl_cpu_env_legacy.py. The interpreter is tools/prime_rl_testenv.py's classic
build (built on first use: ~2-3 minutes, 2.3 GB). Four launches, shared through module fixtures:

  base      max_steps 2, eval and ckpt interval 2 (the driver's shape: interval = steps per launch,
            driver/dialects/classic.py render_eval_overlay/render_run), eval 4 examples x 2;
            one eval question's reward raises
  resumed   the same output dir, `--ckpt.resume-step -1`, max_steps 4, intervals 2
  constant  every reply "yes" (zero advantage), one eval question's request fails (HTTP 500)
  trainer   the trainer stand-in exits 3 at step 1
  evicted   (last) a fresh launch into the constant run's output dir, which holds control/evicted.txt

    python -m pytest -n 0 -m prime_rl_real tests/test_prime_rl_real_classic.py -x -q
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "prime_rl_real"))
sys.path.insert(0, str(HERE.parent))

import scenario_classic as sc  # noqa: E402
from rl_contract import classic  # noqa: E402
from rl_contract.classic import ClassicLayout  # noqa: E402
from rl_contract.rows import EVAL_ROW_FIELDS  # noqa: E402

pytestmark = pytest.mark.prime_rl_real
LAYOUT = ClassicLayout()
EVAL_EXAMPLES, EVAL_ROLLOUTS = 4, 2
REWARD_RAISES_ON = 2          # eval question whose reward function raises (base run)
REQUEST_FAILS_ON = 1          # eval question whose model request fails (constant run)
BASE_MAX, RESUME_MAX = 2, 4
STEPS = RESUME_MAX - BASE_MAX   # steps per launch, as the driver sets eval and ckpt interval


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _eval_kwargs(**env_args) -> dict:
    return dict(eval_num_examples=EVAL_EXAMPLES, eval_rollouts_per_example=EVAL_ROLLOUTS,
                eval_env_args=env_args)


@pytest.fixture(scope="module")
def env_dir() -> Path:
    try:
        return sc.classic_env()
    except Exception as e:   # no archives / no network: say why
        pytest.skip(f"classic prime-rl test env unavailable: {e}")


@pytest.fixture(scope="module")
def base(env_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("classic_base")
    return sc.run_rl(tmp, max_steps=BASE_MAX, eval_interval=BASE_MAX, ckpt_interval=BASE_MAX, env_dir=env_dir,
                     timeout=300, config_kwargs=_eval_kwargs(raise_on_eval=REWARD_RAISES_ON))


@pytest.fixture(scope="module")
def resumed(base, env_dir):
    if base.returncode != 0:
        pytest.skip("the base run failed; nothing to resume")
    snapshot = {
        "final_eval_rows": len(_rows(LAYOUT.eval_file(base.out, BASE_MAX))),
        "resumable_step": LAYOUT.resumable_step(base.out),
    }
    res = sc.run_rl(base.out.parent, max_steps=RESUME_MAX, eval_interval=STEPS, ckpt_interval=STEPS,
                    resume=True, out=base.out,
                    env_dir=env_dir, timeout=300, config_kwargs=_eval_kwargs(raise_on_eval=REWARD_RAISES_ON))
    res.snapshot = snapshot
    return res


@pytest.fixture(scope="module")
def constant(env_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("classic_constant")
    return sc.run_rl(tmp, max_steps=2, eval_interval=100, env_dir=env_dir, timeout=300,
                     policy="prl_cpu_env_legacy:constant_fail_eval_reply",
                     config_kwargs=_eval_kwargs(fail_marker_on_eval=REQUEST_FAILS_ON))


@pytest.fixture(scope="module")
def unfiltered(env_dir, tmp_path_factory):
    """Flat groups under the gradient probe's overlay (rl_contract.classic.PROBE_FILTERS,
    composed as the driver composes it: a second `@` file)."""
    import tomli_w

    tmp = tmp_path_factory.mktemp("classic_unfiltered")
    overlay = tmp / "probe_overlay.toml"
    overlay.write_text(tomli_w.dumps(classic.PROBE_FILTERS))
    return sc.run_rl(tmp, max_steps=1, env_dir=env_dir, timeout=300, policy="constant",
                     extra_args=["@", str(overlay)])


@pytest.fixture(scope="module")
def trainer_fails(env_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("classic_trainer_fails")
    return sc.run_rl(tmp, max_steps=3, env_dir=env_dir, timeout=300, env_extra={"PRL_TRAINER_FAIL_AT_STEP": "1"})


def _ok(res) -> None:
    assert res.returncode == 0 and not res.timed_out, res.logs_text()[-6000:]


# --- (a) layout and step numbering ---------------------------------------------------------

def test_fresh_run_layout_and_step_numbering(base):
    """Facts: "orchestrator output dir is OUT/run_default"; "train rows of a launch from F to M
    land in step_F .. step_{M-1}" (ROWS_OFFSET = 1: launch_train_steps(0, M)); "a fresh run
    evaluates the base model at step 0"; "the final eval alone lands in step_M"; trainer
    checkpoints under OUT/checkpoints, and the step a resume reads is complete (resume_trees)."""
    _ok(base)
    out = base.out
    assert "RL training finished!" in base.log           # src/prime_rl/entrypoints/rl.py:356@09e2977
    assert LAYOUT.rollouts_dir(out).is_dir() and (out / "run_default" / "control" / "orch.toml").exists()
    assert LAYOUT.train_steps(out) == list(LAYOUT.launch_train_steps(0, BASE_MAX)) == list(range(BASE_MAX))
    assert base.step_dirs == list(range(BASE_MAX + 1))
    assert LAYOUT.eval_file(out, 0).exists(), "no base-model eval at step_0"
    final = LAYOUT.final_eval_step(BASE_MAX)
    assert final == BASE_MAX
    assert sorted(p.name for p in (LAYOUT.rollouts_dir(out) / f"step_{final}").iterdir()) == ["eval_rollouts.jsonl"]
    # interval = max_steps: no in-loop eval besides the base one (evals follow ckpt_step,
    # orchestrator.py:360-373@09e2977, compute_eval_ckpt_step; ckpt_step stays below max_steps inside the loop)
    assert not any(LAYOUT.eval_file(out, s).exists() for s in range(1, BASE_MAX)), "an interval eval fired"
    # trainer checkpoint (the stand-in writes it where the launcher's resume-step -1 looks) and
    # the orchestrator's own checkpoint + broadcast at the final step
    # ckpt interval = max_steps: exactly one checkpoint, the final one (the interval save skips the
    # loop's first and last step: trainer/rl/train.py:279-283; the orchestrator's likewise)
    assert LAYOUT.steps(out / "checkpoints") == [BASE_MAX]
    assert LAYOUT.steps(out / "run_default" / "checkpoints") == [BASE_MAX]
    assert (out / "run_default" / "checkpoints" / f"step_{BASE_MAX}" / "orchestrator" / "progress.pt").exists()
    assert LAYOUT.steps(out / "run_default" / "broadcasts") == list(range(1, BASE_MAX + 1))
    assert LAYOUT.resumable_step(out) == BASE_MAX
    # what prime-rl shipped to the trainer: a batch per step, 0-indexed, with advantages
    shipped = _rows(out / "standin_trainer.jsonl")
    assert [r["batch_step"] for r in shipped] == list(range(BASE_MAX))
    # (the filter drops a group whose two replies happened to agree: what ships has advantages)
    assert all(0 < r["examples"] <= 8 and r["nonzero_advantages"] == r["examples"] for r in shipped), shipped


def test_train_and_eval_row_keys(base):
    """rl_contract/rows.py (classic): every row has example_id, reward, metrics, is_truncated;
    train rows add env_name, advantage, filters, is_filtered; eval rows carry none of those
    (orchestrator/envs.py, vf_utils.py save_rollouts@09e2977)."""
    _ok(base)
    train = list(LAYOUT.train_rows(base.out, 0))
    assert len(train) == 8
    for r in train:
        assert {"example_id", "reward", "metrics", "is_truncated", "env_name", "advantage", "filters",
                "is_filtered"} <= r.keys()
        assert r["env_name"] == "prl_cpu_env_legacy"
    evals = _rows(LAYOUT.eval_file(base.out, 0))
    for r in evals:
        assert set(EVAL_ROW_FIELDS) <= r.keys() and "is_truncated" in r
        assert not ({"env_name", "advantage", "filters", "is_filtered"} & r.keys())
        assert "says_yes" in r["metrics"]


# --- (e) eval row counts and failing rollouts ----------------------------------------------

def test_eval_row_counts_and_raising_reward(base):
    """Eval rows per eval = num_examples x rollouts_per_example, example_id 0..n-1 (the eval
    dataset's first n), in the base eval and in the final eval. A reward function that raises is
    caught by verifiers' Rubric and scores 0 (verifiers rubrics/rubric.py:215-233@58b119f): the
    rollout is kept, with no `error` — nothing is dropped."""
    _ok(base)
    for step in (0, BASE_MAX):
        rows = _rows(LAYOUT.eval_file(base.out, step))
        assert len(rows) == EVAL_EXAMPLES * EVAL_ROLLOUTS, step
        ids = sorted(r["example_id"] for r in rows)
        assert ids == sorted(list(range(EVAL_EXAMPLES)) * EVAL_ROLLOUTS)
        raised = [r for r in rows if r["example_id"] == REWARD_RAISES_ON]
        assert all(r["reward"] == 0.0 and r["metrics"]["says_yes"] == 0.0 and not r.get("error") for r in raised)
    assert "Error calling reward function says_yes" in base.logs_text()


def test_eval_request_failure_keeps_the_row_with_error(constant):
    """A rollout whose model request fails (HTTP 500 after the client's retries) is NOT dropped
    by classic: verifiers turns it into a row with `error` (ModelError) and reward 0, so the
    eval file still has num_examples x rollouts_per_example rows. prime-rl's "N rollouts failed"
    path (src/prime_rl/orchestrator/envs.py:206-236@09e2977) only counts exceptions that escape
    verifiers' run_rollout/run_group, which this does not."""
    rows = _rows(LAYOUT.eval_file(constant.out, 0))
    assert len(rows) == EVAL_EXAMPLES * EVAL_ROLLOUTS
    failed = [r for r in rows if r["example_id"] == REQUEST_FAILS_ON]
    assert len(failed) == EVAL_ROLLOUTS
    for r in failed:
        assert r["reward"] == 0.0
        assert isinstance(r.get("error"), dict) and r["error"].get("error") == "ModelError", r.get("error")
    assert not any(r.get("error") for r in rows if r["example_id"] != REQUEST_FAILS_ON)
    assert "rollouts failed" not in constant.logs_text()


# --- (b) resume ------------------------------------------------------------------------------

def test_resume_from_latest_checkpoint(resumed):
    """Facts: "a resumed run does not evaluate at its start step" (orchestrator.py:298-301:
    "Skipping online eval on resume"); the train rows of a launch from F to M land in
    step_F .. step_{M-1}; the final eval alone in step_M; and the resume-step dir keeps the
    previous launch's final eval beside the new train rows (the launcher's clean_future_steps
    deletes only steps > F: src/prime_rl/entrypoints/rl.py:536-538@09e2977)."""
    _ok(resumed)
    out, F = resumed.out, BASE_MAX
    assert resumed.snapshot["resumable_step"] == F
    text = resumed.logs_text()
    assert "Skipping online eval on resume" in text
    assert f"Resuming training from checkpoint step {F}" in text
    assert LAYOUT.train_steps(out, F, RESUME_MAX) == list(LAYOUT.launch_train_steps(F, RESUME_MAX)) == [2, 3]
    assert LAYOUT.train_steps(out) == list(range(RESUME_MAX))
    final = LAYOUT.final_eval_step(RESUME_MAX)
    assert sorted(p.name for p in (LAYOUT.rollouts_dir(out) / f"step_{final}").iterdir()) == ["eval_rollouts.jsonl"]
    # the resume-step dir: the old final eval (untouched) beside the new train rows
    assert LAYOUT.eval_file(out, F).exists() and LAYOUT.train_file(out, F).exists()
    assert len(_rows(LAYOUT.eval_file(out, F))) == resumed.snapshot["final_eval_rows"]
    assert not LAYOUT.eval_file(out, F + 1).exists()
    shipped = _rows(out / "standin_trainer.jsonl")
    assert [r["batch_step"] for r in shipped] == list(range(RESUME_MAX))
    assert LAYOUT.resumable_step(out) == RESUME_MAX
    # one more checkpoint per launch, at its final step (trainer and orchestrator)
    assert LAYOUT.steps(out / "checkpoints") == [F, RESUME_MAX]
    assert LAYOUT.steps(out / "run_default" / "checkpoints") == [F, RESUME_MAX]
    assert not any(LAYOUT.eval_file(out, s).exists() for s in range(F + 1, RESUME_MAX)), "an interval eval fired"


# --- (c) zero advantage ----------------------------------------------------------------------

def test_zero_advantage_aborts_and_writes_evicted(constant):
    """Facts: "zero-advantage rollouts are filtered by default"; "three fully filtered batches
    at one step abort the run and write control/evicted.txt" (orchestrator.py:84,422-450);
    the launcher then exits 1 ("Orchestrator failed": src/prime_rl/entrypoints/rl.py:344-348@09e2977)."""
    assert constant.returncode == 1 and not constant.timed_out, constant.logs_text()[-4000:]
    reason = LAYOUT.abort_reason(constant.out, 0, 2, 4)
    assert reason is not None and LAYOUT.evicted_file(constant.out).exists()
    n = classic.MAX_EMPTY_BATCH_ATTEMPTS
    assert f"on {n} consecutive attempts at step 0" in reason
    text = constant.logs_text()
    assert f"Attempt {n}/{n} at step 0 filtered out all" in text
    assert "Orchestrator failed with exit code 1" in constant.log
    # nothing was trained: only step_0 exists (base eval + the filtered attempt's rows)
    assert constant.step_dirs == [0]
    assert not (constant.out / "standin_trainer.jsonl").exists()
    # the launcher terminated the trainer (stand-in blocked on batch 0) and the inference server
    assert constant.session_left == [] and sc.survivors(str(constant.out), f"--port {constant.port}") == []


def test_the_probes_filter_overlay_ships_flat_groups_instead_of_aborting(unfiltered):
    """Fact: with the probe's overlay (the default filters with zero_advantage not enforced:
    configs/orchestrator.py:505-509,583@09e2977) the all-equal rewards that evict a run above
    ship their batch: prime-rl says it only monitors the filter, writes no evicted.txt, and the
    trainer gets step 0's batch with every advantage zero."""
    _ok(unfiltered)
    text = unfiltered.logs_text()
    assert "Monitoring zero_advantage filter (type=zero_advantage, enforce=False" in text
    assert not LAYOUT.evicted_file(unfiltered.out).exists()
    recs = [json.loads(l) for l in (unfiltered.out / "standin_trainer.jsonl").read_text().splitlines()]
    assert [r["step"] for r in recs] == [0] and recs[0]["nonzero_advantages"] == 0, recs


# --- (d) trainer failure ---------------------------------------------------------------------

def test_trainer_failure_exits_nonzero_and_leaves_nothing(trainer_fails):
    """The launcher watches the trainer: on its exit 3 it logs the failure, terminates every
    child and exits 1 (src/prime_rl/entrypoints/rl.py:331-338 / 350-354@09e2977). No process of
    the run survives (its session, or any command line naming the output dir), and the
    inference port is free again."""
    res = trainer_fails
    assert res.returncode == 1 and not res.timed_out, res.logs_text()[-4000:]
    text = res.logs_text()
    assert "PRL_TRAINER_FAIL_AT_STEP=1" in text
    assert "Trainer failed with exit code 3" in text or "exit code 3" in text
    assert res.session_left == [], res.session_left
    assert sc.survivors(str(res.out), str(res.toml), f"--port {res.port}") == []
    assert sc.port_free(res.port)
    assert [r["batch_step"] for r in _rows(res.out / "standin_trainer.jsonl")] == [0]


# --- (c, continued) an evicted output dir ----------------------------------------------------

def test_launch_into_evicted_output_dir_aborts_at_once(constant, env_dir):
    """Fact: "a launch into an output dir holding control/evicted.txt aborts at once"
    (orchestrator.py:326-330@09e2977: checked at the top of every loop iteration, before any
    eval or batch). A fresh launch (no checkpoints there, so the launcher's validate_output_dir
    lets it in: src/prime_rl/utils/pathing.py:142-149) exits 1 without training. Runs last: the
    launcher's clean_future_steps(-1) wipes the constant run's rollouts."""
    assert LAYOUT.evicted_file(constant.out).exists()
    res = sc.run_rl(constant.out.parent / "again", out=constant.out, max_steps=2, env_dir=env_dir,
                    policy="mixed", timeout=240)
    assert res.returncode == 1 and not res.timed_out, res.logs_text()[-4000:]
    assert "Run evicted by trainer: All 8 rollouts were filtered out" in res.logs_text()
    assert LAYOUT.train_steps(res.out) == []
    assert not (res.out / "standin_trainer.jsonl").exists()
    assert res.session_left == []


# --- the driver's stop, mid-step --------------------------------------------------------------

def test_the_drivers_stop_mid_step_leaves_no_process_and_frees_the_port(env_dir, tmp_path, monkeypatch):
    """Facts: the driver launches `uv run rl` in a session of its own and stops it by SIGTERM to
    that group, then SIGKILL after its grace (driver/backends/process.py launch/stop); classic
    prime-rl's launcher, on SIGTERM, terminates every child it started (utils/process.py
    cleanup_processes@09e2977). Stopped while step 0's batch is with the trainer, nothing of the
    run survives and the inference port is free again for the next arm."""
    import time

    from driver.backends import process
    from driver.backends.base import Command

    sys.path.insert(0, str(sc.HERE))
    from model_dir import make_model_dir

    checkout = env_dir / "prime-rl"
    out, port = tmp_path / "out", sc.free_port()
    cfg = sc.write_config(tmp_path / "rl.toml", model=make_model_dir(tmp_path / "model"), port=port,
                          max_steps=50, eval_interval=None, ckpt_interval=None)
    for k, v in sc.shell(checkout, tmp_path, env_extra={"PRL_TRAINER_STEP_SECONDS": "5"}).items():
        monkeypatch.setenv(k, v)
    log = tmp_path / "train.log"
    tp = process.launch(Command((str(sc.BIN / "uv"), "run", "rl"), str(checkout)),
                        ["@", str(cfg), "--output-dir", str(out)], out, log)
    try:
        deadline = time.monotonic() + 240
        batch = out / "run_default" / "rollouts" / "step_0" / "train_rollouts.bin"
        while not batch.exists() and time.monotonic() < deadline and process.is_alive(tp):
            time.sleep(0.5)
        assert batch.exists(), log.read_text(errors="replace")[-3000:]
        assert len(process.record_tree(tp, log)) >= 4   # launcher, inference, orchestrator, trainer
    finally:
        process.stop(tp, grace_s=120, log=log)
    assert process.tree_alive(tp, log) == []
    assert sc.survivors(str(out), f"--port {port}") == []
    process.wait_ports_free([port], timeout_s=30)


def test_every_canonical_config_of_the_checkout_passes_the_drivers_check():
    """prime-rl's own configs/*/rl.toml pass the driver's check of a base config, with iter_0's
    flags (configs/multi_reverse_text sets per-env sampling, which the schema snapshot lacked)."""
    from driver.commands.run import _check_base_config
    from driver.run.model import Knobs

    found = sorted((sc.classic_env() / "prime-rl" / "configs").glob("*/rl.toml"))
    assert len(found) >= 9
    for cfg in found:
        _check_base_config(cfg, "classic", Knobs.for_backend("prime_rl"))
