"""Run directory guarantees and the CLI's contract: lock, corrupted files, budget and max_iters,
exit codes, help."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FAST, driver, driver_env, launches, run_dir_from


def test_every_commands_help_states_the_exit_codes_and_help_loads_nothing_heavy():
    """(That every run-model field is a `driver run` flag with its help is tests/test_house.py's.)"""
    from driver.cli import COMMANDS

    for command in COMMANDS:
        r = subprocess.run([sys.executable, "-m", "driver.cli", command.NAME, "--help"],
                           capture_output=True, text=True)
        assert r.returncode == 0, command.NAME
        for code in ("0  finished", "1  failure", "2  usage", "3  waiting for the teacher"):
            assert code in r.stdout, (command.NAME, code)
    # what makes --help fast is what it does not import (no clock here: a shared 2-core machine
    # makes wall-clock bounds flaky; `time driver --help` is about 0.2 s). The run model
    # (pydantic) is loaded: the flags are generated from it.
    r = subprocess.run([sys.executable, "-c", "import driver.cli, sys; "
                        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                        "('torch','verifiers','datasets','jinja2','psutil','scipy','matplotlib')))"],
                       capture_output=True, text=True)
    assert r.stdout.strip() == "[]"


def test_budget_ends_the_loop_at_the_gate(tmp_path, runs):
    # iter_0's trainer takes at least its 1-s start-up: the 1-s budget is spent at the gate after
    # it, however fast the rest of the run goes
    r = driver(["run", "--budget", "1s", "--max-iters", "5", "--runs-dir", str(runs), *FAST],
               driver_env(tmp_path, DOUBLE_STARTUP_SECONDS="1"))
    assert r.returncode == 0, r.stderr
    rd = run_dir_from(r.stdout)
    state = json.loads((rd / "run.json").read_text())
    assert state["status"] == "budget_exhausted"
    metrics = json.loads((rd / "metrics.json").read_text())
    assert [m["iter"] for m in metrics["iters"]] == [0]     # the baseline alone
    assert not (rd / "iter_1").exists()


@pytest.fixture(scope="module")
def two_iters(tmp_path_factory):
    """One run under --max-iters 2 with a sampling temperature, an lr and difficulty filtering,
    shared by the tests below."""
    tmp = tmp_path_factory.mktemp("two-iters")
    r = driver(["run", "--max-iters", "2", "--runs-dir", str(tmp / "runs"), "--temperature", "0.5",
                "--lr", "2e-5", "--difficulty-filter", *FAST], driver_env(tmp))
    assert r.returncode == 0, r.stderr
    return tmp, run_dir_from(r.stdout), r


def test_max_iters_ends_the_loop_exactly(two_iters):
    _, rd, r = two_iters
    state = json.loads((rd / "run.json").read_text())
    assert state["status"] == "max_iters_reached" and state["loop_end"] == "max_iters_reached"
    assert [m["iter"] for m in json.loads((rd / "metrics.json").read_text())["iters"]] == [0, 1]
    assert not (rd / "iter_2").exists()
    assert "[gate] loop ends: max_iters_reached (after iteration 1)" in r.stderr


def test_temperature_lr_and_difficulty_filter_reach_every_launched_arms_config(two_iters):
    """iter_0's base config included: the config each launch names first is the arm's own."""
    import tomllib

    tmp, rd, _ = two_iters
    m = json.loads((rd / "metrics.json").read_text())
    arm_dirs = {"run_a": "run_a_best_from_iter0", "run_b": "run_b_combined_from_base",
                "run_c": "run_c_untargeted_from_iter0"}
    arms = [f"iter_{i['iter']}" for i in m["iters"]] + [arm_dirs[c["run"]] for c in m["controls"]]
    configs = [Path(l["argv"][l["argv"].index("@") + 1]) for l in launches(tmp)]
    probes = [c for c in configs if c.parent.name == "probe"]       # iteration 1's probe launch
    assert sorted(c.parent.name for c in configs if c not in probes) == sorted(arms)   # one per arm
    assert probes == [rd / "iter_1" / "probe" / "rl.toml"]
    assert rd / "iter_0" / "base_rl.toml" in configs and rd / "iter_1" / "rl.toml" in configs
    for cfg in configs:
        t = tomllib.loads(cfg.read_text())
        assert t["orchestrator"]["train"]["sampling"]["temperature"] == 0.5, cfg
        assert t["trainer"]["optim"]["lr"] == 2e-5, cfg
        assert t["orchestrator"]["buffer"]["online_difficulty_filtering"] is True, cfg
    state = json.loads((rd / "run.json").read_text())
    assert state["difficulty_filter"] is True
    assert (state["temperature"], state["lr"]) == (0.5, 2e-5)


@pytest.mark.parametrize("bad", [["--temperature", "0"], ["--lr", "3"]], ids=["temperature-0", "lr-3"])
def test_an_out_of_range_temperature_or_lr_is_a_usage_error_before_a_run_dir_is_made(tmp_path, runs, bad):
    b = driver(["run", "--runs-dir", str(runs / "bad"), *bad, *FAST], driver_env(tmp_path))
    assert b.returncode == 2 and bad[0] in b.stderr and not (runs / "bad").exists()


def test_run_json_history_gives_every_phase_a_start_and_an_end(two_iters):
    _, rd, _ = two_iters
    history = json.loads((rd / "run.json").read_text())["history"]
    assert history and history[-1]["outcome"] == "done"
    assert all(h["end_ts"] is not None for h in history)
    assert all(h["start_ts"] <= h["end_ts"] for h in history)


def test_status_json_reports_the_finished_run_and_each_arms_eval_accuracy(two_iters):
    """for agents: status --json's accuracies are metrics.json's"""
    tmp, rd, _ = two_iters
    s = driver(["status", str(rd), "--json"], driver_env(tmp))
    assert s.returncode == 0, s.stderr
    payload = json.loads(s.stdout)
    m = json.loads((rd / "metrics.json").read_text())
    assert payload["phase"] == "done" and set(payload["eval_acc"]) == {"iter_0", "iter_1"}
    assert payload["status"] == "max_iters_reached"
    assert payload["eval_acc"] == {f"iter_{i['iter']}": i["eval_acc"] for i in m["iters"]}
    assert payload["controls"] == {c["run"]: c["eval_acc"] for c in m["controls"]}


def test_second_driver_on_a_locked_run_dir_refuses(tmp_path, runs):
    env = driver_env(tmp_path, DOUBLE_STEP_SECONDS="2")
    p = subprocess.Popen([sys.executable, "-m", "driver.cli", "run", "--max-iters", "1",
                          "--runs-dir", str(runs), *FAST], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not list(runs.glob("*/run.json")):
            time.sleep(0.1)
        rd = next(runs.glob("*/run.json")).parent
        r = driver(["resume", str(rd)], env)
        assert r.returncode == 2
        assert f"pid {p.pid}" in r.stderr
    finally:
        p.kill()
        p.communicate()


def test_corrupted_run_json_gives_a_clear_error_and_is_not_overwritten(tmp_path, runs):
    r = driver(["run", "--max-iters", "1", "--runs-dir", str(runs), *FAST], driver_env(tmp_path))
    rd = run_dir_from(r.stdout)
    metrics_before = (rd / "metrics.json").read_bytes()
    (rd / "run.json").write_text('{"dataset": "stock_arith')
    r = driver(["resume", str(rd)], driver_env(tmp_path))
    assert r.returncode == 2 and "corrupted" in r.stderr and "Nothing was changed" in r.stderr
    assert (rd / "run.json").read_text() == '{"dataset": "stock_arith'
    assert (rd / "metrics.json").read_bytes() == metrics_before
    (rd / "run.json").write_text(json.dumps({"format_version": 99, "dataset": "x"}))
    r = driver(["resume", str(rd)], driver_env(tmp_path))
    assert r.returncode == 2 and "newer than this driver" in r.stderr
    (rd / "run.json").write_text(json.dumps({"format_version": 1, "dataset": 3}))
    r = driver(["status", str(rd)], driver_env(tmp_path))
    assert r.returncode == 2 and "does not match the run format (dataset 3: Input should be a valid string" in r.stderr


def test_trainer_crash_stops_cleanly_and_resume_retrains(tmp_path, runs):
    r = driver(["run", "--max-iters", "1", "--runs-dir", str(runs), *FAST],
               driver_env(tmp_path, DOUBLE_CRASH_AT_STEP="2"))
    assert r.returncode == 1
    assert "training failed" in r.stderr and "injected crash at step 2" in r.stderr
    rd = run_dir_from(r.stdout)
    state = json.loads((rd / "run.json").read_text())
    assert state["status"] == "failed" and state["phase"] == "baseline"
    r = driver(["resume", str(rd)], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert (rd / "iter_0" / "train.log.failed-1").exists()   # the failed attempt is kept
    assert json.loads((rd / "run.json").read_text())["status"] == "max_iters_reached"
    assert len(launches(tmp_path)) == 2


def test_an_unknown_hub_env_is_refused_before_a_run_directory_exists(tmp_path, runs):
    r = driver(["run", "--dataset", "no_such_env_xyz", "--runs-dir", str(runs), *FAST],
               driver_env(tmp_path))
    assert r.returncode == 2 and "hub env not found" in r.stderr
    assert "then run the command again" in r.stderr and "Nothing was created" in r.stderr
    helped = " ".join(driver(["run", "--help"], driver_env(tmp_path)).stdout.split())
    assert "refused first, with exit 2 and nothing created: a hub env that does not load" in helped
    assert not runs.exists() or not any(runs.iterdir())
    assert launches(tmp_path) == []


def test_a_resume_whose_hub_env_no_longer_loads_aborts_with_reason(tmp_path, runs):
    """The env loaded at `driver run` and was gone by the time the introspect phase reran (a
    kill before hub_env.json was written, then the package uninstalled): the run is marked."""
    env = driver_env(tmp_path, DRIVER_FAULT_KILL_AT="introspect:before-write")
    r = driver(["run", "--max-iters", "1", "--runs-dir", str(runs), *FAST], env)
    assert r.returncode != 0
    rd = run_dir_from(r.stdout)
    assert not (rd / "hub_env.json").exists()
    state = json.loads((rd / "run.json").read_text())
    state["dataset"] = "no_such_env_xyz"   # stands in for an env uninstalled since
    (rd / "run.json").write_text(json.dumps(state))
    r = driver(["resume", str(rd)], driver_env(tmp_path))
    assert r.returncode == 2 and "hub env not found" in r.stderr
    state = json.loads((rd / "run.json").read_text())
    assert state["status"] == "aborted" and state["reason"] == "hub env not found"


def test_skill_install_puts_skill_md_where_agents_look_and_never_clobbers(tmp_path):
    from driver import resources

    def install(*args):
        return subprocess.run([sys.executable, "-m", "driver.cli", "skill", "install", *args],
                              cwd=tmp_path, capture_output=True, text=True)

    r = install("--json")
    dest = tmp_path / ".claude" / "skills" / "synthetic-self-improve-rl" / "SKILL.md"
    assert r.returncode == 0 and json.loads(r.stdout) == {"path": str(dest), "action": "installed"}
    assert dest.read_text() == resources.skill_md().read_text()
    assert dest.read_text().startswith("---\nname: synthetic-self-improve-rl\n")
    assert install().stdout.startswith("unchanged:")
    dest.write_text("my local edits")
    r = install()
    assert r.returncode == 2 and "--force" in r.stderr and dest.read_text() == "my local edits"
    r = install("--force", "--dir", str(dest.parent))
    assert r.returncode == 0 and r.stdout.startswith("replaced:")
    assert (dest.parent / "SKILL.md.bak").read_text() == "my local edits"
    r = install("--dir", str(tmp_path / "elsewhere"))
    assert r.returncode == 0 and (tmp_path / "elsewhere" / "SKILL.md").exists()


def test_status_shows_training_progress_and_the_live_run_prints_plain_progress_lines(tmp_path, runs):
    env = driver_env(tmp_path, DOUBLE_STEP_SECONDS="0.7")
    proc = subprocess.Popen([sys.executable, "-m", "driver.cli", "run", "--max-iters", "1",
                             "--steps-per-run", "8", "--batch-size", "256", "--eval-examples", "50",
                             "--runs-dir", str(runs)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    seen = None
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        dirs = list(runs.iterdir())
        if dirs:
            r = driver(["status", str(dirs[0]), "--json"], env)
            if r.returncode == 0:
                p = json.loads(r.stdout)
                if p["training"] and p["training"]["step"] >= 3:
                    seen = p
                    text = driver(["status", str(dirs[0])], env).stdout
                    break
        time.sleep(0.3)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]
    assert seen is not None, "never saw the trainer at step 3"
    t = seen["training"]
    assert t["arm"] == "iter_0" and t["max_steps"] == 8 and 3 <= t["step"] <= 8
    assert t["start_step"] == 0 and t["fraction"] == round(t["step"] / t["max_steps"], 4)
    assert 0 < t["fraction"] <= 1 and t["eta_s"] is not None and t["eta_s"] >= 0
    assert "training [iter_0] step" in text and "/8 [" in text and "eta" in text
    assert "budget [" in text
    # stderr is a pipe here: plain progress lines, no carriage returns, one per new step
    # (a log an agent reads is not filled with a line per poll)
    assert "[iter_0] step " in err and "\r" not in err
    import re

    steps = [m.group(1) for m in re.finditer(r"^\[iter_0\] step (\d+)/8 [^\n·]*· eta [^\n·]*$", err, re.M)]
    assert len(steps) >= 4 and len(steps) == len(set(steps)), steps


def test_status_counts_a_resumed_arm_from_the_steps_its_trainer_record_names(tmp_path):
    # an iteration resumes iter_0's step 30 and trains to 60: the batches of three steps on disk
    # are 3 of 30, read from run.json's trainer record (start and final step), not from the
    # arm's name; classic prime-rl files the batch of step s under rollouts/step_{s-1}
    from driver.reporting.status import status_payload
    from driver.dialects.classic import ClassicDialect
    from driver.run.model import RunState, TrainerProcess
    from driver.run.rundir import RunDir

    d = tmp_path / "run"
    out = d / "iter_1" / "prime_out"
    for s in (29, 30, 31, 32):   # step 29 is iter_0's last batch, not this arm's work
        f = ClassicDialect().train_file(out, s)
        f.parent.mkdir(parents=True)
        f.write_text("{}\n")
    d.mkdir(exist_ok=True)
    rd = RunDir(d)
    rd.save(RunState(dataset="stock_arithmetic", hub_id="h", model="m", start_ts=time.time(),
                     budget_seconds=60, max_iters=3, batch_size=64, rollouts_per_example=4, backend="local",
                     teacher="builtin", phase="train", iteration=1, steps_per_run=30,
                     trainer=TrainerProcess(pid=1, create_time=0, output_dir=str(out),
                                            config_paths=[], launched_ts=time.time() - 9,
                                            start_step=30, final_step=60)))
    t = status_payload(str(d))["training"]
    assert t["arm"] == "iter_1" and (t["step"], t["start_step"], t["max_steps"]) == (33, 30, 60)
    assert t["fraction"] == 0.1


def test_a_compaction_warning_is_recorded_shown_and_refused_while_a_driver_runs(tmp_path, runs):
    from driver.run.rundir import RunLock

    r = driver(["run", "--max-iters", "1", "--runs-dir", str(runs), *FAST], driver_env(tmp_path))
    rd = run_dir_from(r.stdout)
    with RunLock(rd):   # a driver is running on the directory
        w = driver(["compact-warning", str(rd), "lost the iter_1 plan"], driver_env(tmp_path))
        assert w.returncode == 2 and "in use by another driver" in w.stderr
    w = driver(["compact-warning", str(rd), "lost the iter_1 plan", "--json"], driver_env(tmp_path))
    assert w.returncode == 0 and json.loads(w.stdout) == {"compact_warnings": 1}
    st = json.loads(driver(["status", str(rd), "--json"], driver_env(tmp_path)).stdout)
    assert len(st["compact_warnings"]) == 1 and st["compact_warnings"][0].endswith("lost the iter_1 plan")
    assert driver(["report", str(rd)], driver_env(tmp_path)).returncode == 0
    assert "lost the iter_1 plan" in (rd / "report.md").read_text()


def test_env_args_reach_every_hub_env_block_and_the_canonical_config_is_used(tmp_path, runs):
    import tomllib

    from driver import dialects
    from driver.run.model import Knobs

    # a prime-rl checkout whose configs/stock_arithmetic/rl.toml is the canonical iter_0 config
    checkout = tmp_path / "prime-rl"
    (checkout / "configs" / "stock_arithmetic").mkdir(parents=True)
    # the stand-in trainer follows the named checkout's version: a classic one
    (checkout / "pyproject.toml").write_text('[project]\nname = "prime-rl"\nversion = "0.5.1.dev209"\n')
    knobs = Knobs.for_backend("prime_rl", model="m", batch_size=256, rollouts_per_example=16,
                              steps_per_run=3, eval_examples=200, seq_len=1536)
    hub = {"env_id": "stock_arithmetic", "env_args": {"seed": 1}, "eval_size": 200}
    canonical = checkout / "configs" / "stock_arithmetic" / "rl.toml"
    canonical.write_text(dialects.get("classic").render_base(hub, knobs))
    r = driver(["run", "--max-iters", "1", "--runs-dir", str(runs), "--env-args", '{"seed": 1}',
                "--prime-rl-dir", str(checkout), *FAST], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines()[0].startswith(f"canonical config: {canonical.resolve()}")
    rd = run_dir_from(r.stdout)
    hub_json = json.loads((rd / "hub_env.json").read_text())
    assert hub_json["env_args"] == {"seed": 1}
    assert hub_json["selection"]["args"] == {"seed": 1, "eval_split": "selection"}
    first = launches(tmp_path)[0]["argv"]
    assert str(canonical.resolve()) in first and not (rd / "iter_0" / "base_rl.toml").exists()
    overlay = tomllib.loads((rd / "iter_0" / "eval_overlay.toml").read_text())
    eval_blocks = overlay["orchestrator"]["eval"]["env"]
    assert eval_blocks and all(b["args"]["seed"] == 1 for b in eval_blocks)
    # run B's real-data block is the canonical config's train env, args included
    from driver.context import Ctx
    from driver.arms.render import hub_train_block
    from driver.run.rundir import RunDir

    rdir = RunDir(rd)
    assert hub_train_block(Ctx.records(rdir, rdir.load()))["args"] == {"seed": 1}


def test_env_args_that_are_not_a_json_object_are_refused_before_a_run_dir_is_made(tmp_path, runs):
    bad = driver(["run", "--runs-dir", str(runs), "--env-args", "[1]", *FAST], driver_env(tmp_path))
    assert bad.returncode == 2 and "must be a JSON object" in bad.stderr
    assert list(runs.iterdir()) == []


def test_a_base_config_without_a_train_env_is_refused_before_anything_starts(tmp_path, runs):
    cfg = tmp_path / "rl.toml"
    cfg.write_text("max_steps = 3\n")
    r = driver(["run", "--runs-dir", str(runs), "--base-config", str(cfg), *FAST], driver_env(tmp_path))
    assert r.returncode == 2 and "does not compose for prime-rl's classic configs: train env missing" in r.stderr
    assert list(runs.iterdir()) == []


def test_an_unexpected_error_in_a_phase_is_recorded_in_run_json_and_resume_continues(tmp_path, runs):
    r = driver(["run", "--max-iters", "1", "--runs-dir", str(runs), *FAST],
               driver_env(tmp_path, DRIVER_FAULT_BUG_AT="train:before-launch"))
    assert r.returncode == 1 and "unexpected RuntimeError" in r.stderr and "Traceback" not in r.stderr
    rd = run_dir_from(r.stdout)
    st = json.loads((rd / "run.json").read_text())
    assert st["status"] == "failed" and st["reason"].startswith("baseline: RuntimeError: simulated")
    assert "simulated unexpected error" in (rd / "driver_error.log").read_text()
    r = driver(["resume", str(rd)], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((rd / "run.json").read_text())["status"] == "max_iters_reached"


def test_a_missing_hub_env_is_installed_under_its_hub_id(tmp_path, runs):
    # a `prime` CLI on PATH that records what it is asked and installs nothing
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "prime_calls.txt"
    (bindir / "prime").write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\nexit 1\n")
    (bindir / "prime").chmod(0o755)
    env = driver_env(tmp_path)
    env["PATH"] = f"{bindir}{os.pathsep}{env['PATH']}"
    r = driver(["run", "--dataset", "no_such_env", "--hub-id", "someone/no-such-env",
                "--runs-dir", str(runs), *FAST], env)
    assert r.returncode == 2 and "prime --plain env install someone/no-such-env" in r.stderr
    assert calls.read_text().split() == ["--plain", "env", "install", "someone/no-such-env"]


def test_a_base_config_that_does_not_compose_is_refused_before_anything_starts(tmp_path, runs):
    cfg = tmp_path / "rl.toml"
    cfg.write_text('max_steps = 3\n[orchestrator]\nbatch_size = 64\n[[orchestrator.train.env]]\nid = "x"\n'
                   '[no_such_table]\nk = 1\n')
    r = driver(["run", "--runs-dir", str(runs), "--base-config", str(cfg), *FAST], driver_env(tmp_path))
    assert r.returncode == 2 and "does not compose" in r.stderr and "no_such_table" in r.stderr
    assert list(runs.iterdir()) == []
