"""The unfavourable readings of what the `prime` CLI (0.18.0) leaves to the Hosted Training
platform, each a knob of tests/prime_double.py, run both ways: the double's answer with the knob
off and on, and the driver doing the safe thing under it. Each knob's docstring entry in
prime_double.py cites the CLI line it copies or says the platform decides. Everything here is
verified through that double only: no test reaches the live service."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from conftest import FAST, ROOT, driver, run_dir_from
from test_hosted import hosted_env

sys.path.insert(0, str(ROOT / "tests"))
from prime_double import cost_of  # noqa: E402

STEPS, BATCH = 3, 256
ITER_0 = ["run", "--backend", "hosted", "--max-iters", "1", "--seed", "3", *FAST, "--eval-examples", "60"]
# iter_0, then iter_1 on a generated env (pushed, with its declared requirements), then the controls
TWO_ITERS = ["run", "--backend", "hosted", "--max-iters", "2", "--seed", "7", *FAST, "--eval-examples", "60"]
# a config the double's trainer runs in about a second: one small step on the public hub env
SMALL_RUN = """\
name = "{name}"
max_steps = {steps}
seq_len = 2048
{extra}
[model]
name = "Qwen/Qwen3-4B-Instruct-2507"

[trainer]

[inference]

[orchestrator]
batch_size = 16
group_size = 16

[[orchestrator.train.source]]
name = "train"

[orchestrator.train.source.env.taskset]
id = "primeintellect/stock_arithmetic"
split = "train"

[orchestrator.train.source.env.agent.harness]
id = "null"

[orchestrator.train.source.env.agent.runtime]
type = "subprocess"
"""


# --------------------------------------------------------------------------------------------
# helpers

def prime(tmp_path: Path, *args: str, **env) -> subprocess.CompletedProcess:
    """The double as the driver calls it (`prime --plain ...`), with no ~/.prime of the user's."""
    e = hosted_env(tmp_path, HOME=str(tmp_path / "home"), **env)
    return subprocess.run(["prime", "--plain", *args], env=e, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


def submit(tmp_path: Path, name: str, steps: int = 1, extra: str = "", **env) -> str:
    """A small run submitted to the double on volume v: its id."""
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(SMALL_RUN.format(name=name, steps=steps, extra=extra))
    r = prime(tmp_path, "train", str(cfg), "--yes", "-o", "json", "--volume", "v", **env)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout[r.stdout.index("{"):])["run"]["runId"]


def get_run(tmp_path: Path, run_id: str) -> dict:
    return json.loads(prime(tmp_path, "train", "get", run_id, "-o", "json").stdout)["run"]


def wait_for(tmp_path: Path, run_id: str, *statuses: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        run = get_run(tmp_path, run_id)
        if run["status"] in statuses or time.monotonic() > deadline:
            return run
        time.sleep(0.2)


def platform_runs(tmp_path: Path) -> list[dict]:
    """Every run the double's platform holds, in the order they were made."""
    runs = [json.loads(p.read_text()) for p in (tmp_path / "platform" / "runs").glob("*.json")]
    return sorted(runs, key=lambda r: r["created_at"])


def calls(tmp_path: Path) -> list[list[str]]:
    p = tmp_path / "platform" / "calls.jsonl"
    return [json.loads(x)["argv"] for x in p.read_text().splitlines()] if p.exists() else []


def named(tmp_path: Path, part: str) -> list[dict]:
    return [r for r in platform_runs(tmp_path) if part in (r.get("name") or "")]


def ledger(run_dir: Path) -> dict:
    return json.loads((run_dir / "cost.json").read_text())["launches"]


def run_state(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def listed(tmp_path: Path, run_id: str) -> list[str]:
    r = prime(tmp_path, "volumes", "ls", "v", f"runs/{run_id}/", "-R", "-o", "json")
    return [e["path"] for e in json.loads(r.stdout)] if r.returncode == 0 else []


# --------------------------------------------------------------------------------------------
# 1. a stop the platform does not confirm

def _stop_record(tmp_path: Path, run_id: str) -> tuple[Path, dict]:
    """A launch record of a live run, as the driver writes one, in a run directory."""
    from driver.backends.hosted.records import write_record

    (tmp_path / "run.json").write_text("{}")   # a run directory, whose ledger a settle writes
    out = tmp_path / "iter_1" / "prime_out"
    out.mkdir(parents=True)
    rec = {"name": "ssi-x-iter_1-train-abc", "kind": "train", "label": "train", "arm": "iter_1",
           "config": str(tmp_path / "hosted_train.toml"), "volume": "v", "run_ids": [run_id],
           "resumed_from": [], "submitted_ts": 0.0, "settled": False, "log": str(tmp_path / "train.log"),
           "runs": {run_id: {"dispatched_at": 0.0, "placement": {}}}, "status": "RUNNING"}
    write_record(out, rec)
    return out, rec


@pytest.mark.parametrize("confirmed", [True, False])
def test_a_stop_is_settled_only_when_the_cli_prints_a_terminal_status(tmp_path, monkeypatch, confirmed):
    """`prime train stop -f` prints `Status: STOPPED` once the stop went through, and "did not
    reach a terminal state ... still being torn down", exit 0 and no status line, when its
    follow-up reads end first (commands/rl.py:1761-1806@0.18.0). The driver settles the first
    (stopped, billed); the second raises StillRunning and leaves the record open, the run
    running and billing on the platform."""
    from driver.backends.hosted.cli import PrimeCLI
    from driver.backends.hosted.records import read_record
    from driver.backends.hosted.runner import HostedRunner
    from driver.errors import StillRunning
    from driver.run.model import TrainerProcess

    knob = {} if confirmed else {"PRIME_DOUBLE_STOP_UNCONFIRMED": "-slow-"}
    run_id = submit(tmp_path, "ssi-x-slow-train", steps=3, PRIME_DOUBLE_STEP_SECONDS="-slow-:5")
    assert wait_for(tmp_path, run_id, "RUNNING")["status"] == "RUNNING"
    for k, v in hosted_env(tmp_path, HOME=str(tmp_path / "home"), **knob).items():
        monkeypatch.setenv(k, v)
    out, rec = _stop_record(tmp_path, run_id)
    tp = TrainerProcess(pid=0, create_time=0.0, output_dir=str(out), config_paths=[rec["config"]],
                        launched_ts=0.0, run_id=run_id)
    runner = HostedRunner(PrimeCLI("prime"))
    if confirmed:
        runner.stop(tp)
        assert read_record(out)["settled"] is True and get_run(tmp_path, run_id)["status"] == "STOPPED"
        return
    with pytest.raises(StillRunning, match=rf"`prime train stop {run_id} -f` did not confirm the run stopped "
                                           r"\(no status: .*still being torn down in the background"):
        runner.stop(tp)
    assert read_record(out)["settled"] is False and get_run(tmp_path, run_id)["status"] == "RUNNING"
    assert "did not confirm the stop" in (tmp_path / "train.log").read_text()
    assert prime(tmp_path, "train", "stop", run_id, "-f").returncode == 0   # a stop that goes through


@pytest.mark.extended   # a whole hosted loop; the main suite tests the reading itself
def test_an_unconfirmed_stop_of_a_lost_control_ends_the_driver_before_the_next_control(tmp_path, runs):
    """run_a's training run is lost (`train get` fails while it runs on) and its stop is not
    confirmed: the driver must not submit run_b or run_c beside a run that may still bill.
    (With the stop confirmed, tests/test_hosted.py's reference run stops a lost control and goes
    on to the next.) The record stays open, so `driver resume` re-attaches to it first."""
    arm = "-run_a_best_from_iter0-train-"
    r = driver([*TWO_ITERS, "--runs-dir", str(runs)],
               hosted_env(tmp_path, PRIME_DOUBLE_GET_FAIL=arm, PRIME_DOUBLE_STOP_UNCONFIRMED=arm))
    try:
        assert r.returncode == 1, r.stderr[-3000:]
        run_dir = run_dir_from(r.stdout)
        found = named(tmp_path, arm)
        assert len(found) == 1, r.stderr[-3000:]
        lost = found[0]
        assert get_run(tmp_path, lost["id"])["status"] == "RUNNING"
        assert f"`prime train stop {lost['id']} -f` did not confirm the run stopped" in r.stderr
        assert "no other run is submitted until then" in r.stderr
        # nothing was submitted after it: no run_b, no run_c, no eval of run_a
        assert platform_runs(tmp_path)[-1]["id"] == lost["id"]
        assert not named(tmp_path, "-run_b_") and not named(tmp_path, "-run_c_")
        assert run_state(run_dir)["status"] == "failed"
        record = json.loads((run_dir / "run_a_best_from_iter0" / "prime_out" / ".hosted.json").read_text())
        assert record["settled"] is False and record["run_ids"] == [lost["id"]]
    finally:
        for run in platform_runs(tmp_path):   # the platform's workload ends with the test
            if run["status"] == "RUNNING":
                prime(tmp_path, "train", "stop", run["id"], "-f")



@pytest.mark.extended   # a whole hosted loop, then its resume
def test_a_control_whose_submission_times_out_unseen_stops_the_loop_and_resume_adopts_it(tmp_path, runs):
    """run_a's `prime train` exits 1 with the CLI's create timeout after the platform made the
    run, and `train list` then fails: whether run_a runs (and bills) is unknown, so the controls
    phase must not submit run_b or run_c beside it (before, the failure was recorded as a failed
    control and the next one submitted). `driver resume` finds run_a by its name, tracks it as
    the control's one run, and finishes the loop."""
    arm = "-run_a_best_from_iter0-train-"
    r = driver([*TWO_ITERS, "--runs-dir", str(runs)],
               hosted_env(tmp_path, PRIME_DOUBLE_CREATE_TIMEOUT=f"{arm}:1", PRIME_DOUBLE_LIST_FAIL=arm))
    assert r.returncode == 1, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    assert "whether the platform made run" in " ".join(r.stderr.split()), r.stderr[-3000:]
    assert len(named(tmp_path, arm)) == 1
    assert not named(tmp_path, "-run_b_") and not named(tmp_path, "-run_c_")
    record = json.loads((run_dir / "run_a_best_from_iter0" / "prime_out" / ".hosted.json").read_text())
    assert record["settled"] is False and record["run_ids"] == []
    r = driver(["resume", str(run_dir)], hosted_env(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(named(tmp_path, arm)) == 1   # adopted, never submitted again
    assert named(tmp_path, "-run_b_") and named(tmp_path, "-run_c_")
    (adopted,) = [e for e in ledger(run_dir).values() if e["arm"] == "run_a_best_from_iter0" and e["kind"] == "train"]
    assert adopted["run_ids"] == [named(tmp_path, arm)[0]["id"]] and adopted["cost_usd"] > 0

# --------------------------------------------------------------------------------------------
# 2. a continuation the platform names as it likes

def _paused_run(tmp_path: Path, **knobs) -> tuple[str, str]:
    """A two-step run the platform pauses at step 1, and `train resume` of it: (paused, continuation)."""
    env = {"PRIME_DOUBLE_PAUSE": "pausing:1", **knobs}
    paused = submit(tmp_path, "pausing-run", steps=2, **env)
    assert wait_for(tmp_path, paused, "PAUSED")["status"] == "PAUSED"
    r = prime(tmp_path, "train", "resume", paused, "--yes", "-o", "json", **env)
    assert r.returncode == 0, r.stdout
    continuation = json.loads(r.stdout)["run"]["runId"]
    assert wait_for(tmp_path, continuation, "COMPLETED")["status"] == "COMPLETED"
    return paused, continuation


# "keep" is a whole hosted loop: CI's extended command; "new" stays in the main suite
@pytest.mark.parametrize("name", [pytest.param("keep", marks=pytest.mark.extended), "new"])
def test_the_double_names_a_continuation_as_the_platform_chooses(tmp_path, name):
    paused, continuation = _paused_run(tmp_path, PRIME_DOUBLE_RESUME_NAME=name)
    got = get_run(tmp_path, continuation)["name"]
    assert (got == "pausing-run") if name == "keep" else re.fullmatch(r"run-[0-9a-f]{8}", got)
    # the list prints what a continuation shares with the run it continues, and no volume
    runs = json.loads(prime(tmp_path, "train", "list", "-n", "100", "-o", "json").stdout)["runs"]
    by_id = {r["id"]: r for r in runs}
    for key in ("base_model", "environments", "max_steps", "batch_size"):
        assert by_id[continuation][key] == by_id[paused][key]
    assert by_id[continuation]["volume_name"] is None and get_run(tmp_path, paused)["volume_name"] == "v"


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.extended) for n in ("new", "keep")])
def test_a_continuation_renamed_by_the_platform_is_adopted_after_a_kill_not_submitted_again(tmp_path, runs, name):
    """iter_0's training run is paused at step 2; the driver is SIGKILLed right after `prime train
    resume` answered, before it recorded the new run. The platform named that run as it chose
    (PRIME_DOUBLE_RESUME_NAME=new), so looking it up by the launch's name misses it, and
    `driver resume` sent a second `train resume` of the same paused run: two continuations,
    billed twice. It is found by what it is: made after the paused run, with its config."""
    platform = {"PRIME_DOUBLE_PAUSE": "-iter_0-train-:2", "PRIME_DOUBLE_RESUME_NAME": name}
    r = driver([*ITER_0, "--runs-dir", str(runs)],
               hosted_env(tmp_path, DRIVER_FAULT_KILL_AT="hosted:after-submit#2", **platform))
    assert r.returncode == -signal.SIGKILL, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    r = driver(["resume", str(run_dir)], hosted_env(tmp_path, **platform))
    assert r.returncode == 0, r.stderr[-3000:]
    assert [c[:3] for c in calls(tmp_path) if c[:2] == ["train", "resume"]] == [["train", "resume", named(
        tmp_path, "-iter_0-train-")[0]["id"]]]
    paused, continued = [p for p in platform_runs(tmp_path) if p.get("resume_from") or "-iter_0-train-" in p["name"]]
    assert continued["resume_from"] == paused["id"] and continued["status"] == "COMPLETED"
    record = json.loads((run_dir / "iter_0" / "prime_out" / ".hosted.json").read_text())
    assert record["run_ids"] == [paused["id"], continued["id"]]
    assert "submitted before a restart" in (run_dir / "iter_0" / "train.log").read_text()
    assert run_state(run_dir)["status"] == "max_iters_reached"


# --------------------------------------------------------------------------------------------
# 3. a pause that leaves no checkpoint

@pytest.mark.parametrize("checkpoint", ["saved", "none"])
def test_the_double_pauses_with_or_without_a_checkpoint_and_resumes_from_what_there_is(tmp_path, checkpoint):
    """With no checkpoint, `train resume` runs the paused run's stored config as it is: from its
    start, two steps again, as if it continued (api/training.py:306-309@0.18.0)."""
    paused, continuation = _paused_run(tmp_path, PRIME_DOUBLE_PAUSE_CHECKPOINT=checkpoint)
    ckpts = [f for f in listed(tmp_path, paused) if "/checkpoints/step_" in f]
    assert bool(ckpts) == (checkpoint == "saved")
    state = json.loads((tmp_path / "platform" / "runs" / f"{continuation}.json").read_text())
    assert state["start_step"] == (1 if checkpoint == "saved" else 0)
    assert state["rollouts_trained"] == (1 if checkpoint == "saved" else 2) * 16


@pytest.mark.extended   # a whole hosted loop; the double's pause with and without a checkpoint stays in the main suite
def test_a_paused_arm_with_no_checkpoint_is_not_resumed_as_if_continued_and_retrains_from_its_start(tmp_path, runs):
    """iter_0's training run is paused at step 2 and the pause writes no checkpoint. `prime train
    resume` would run its stored config from the arm's start, and the driver would read it back
    as a continuation: steps 1-2 trained and billed twice, and nothing said. Instead the launch
    ends failed, its two billed steps in the ledger and said, and the driver stops; `driver
    resume` trains the arm again from its start (as after any failed run), a fresh submission,
    not a `train resume`. (A pause that saves its checkpoint is continued from it: the faults
    fixture of tests/test_hosted.py.)"""
    lag = {"DRIVER_HOSTED_SYNC_WAIT_S": "1"}   # the paused run's listing is not waited on for long
    r = driver([*ITER_0, "--runs-dir", str(runs)],
               hosted_env(tmp_path, PRIME_DOUBLE_PAUSE="-iter_0-train-:2", PRIME_DOUBLE_PAUSE_CHECKPOINT="none", **lag))
    assert r.returncode == 1, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    [paused] = platform_runs(tmp_path)
    assert paused["status"] == "PAUSED"
    assert not [c for c in calls(tmp_path) if c[:2] == ["train", "resume"]]
    said = " ".join(r.stderr.split())
    assert f"paused run {paused['id']} left no checkpoint on volume" in said
    assert "the steps it trained (to step 2) are lost, and billed" in said
    assert "`driver resume` trains the arm again from its start" in said
    [entry] = [e for e in ledger(run_dir).values() if e["run_ids"] == [paused["id"]]]
    assert entry["outcome"] == "failed" and entry["usage_usd"] == pytest.approx(cost_of(2 * BATCH))
    # resumed (the platform pauses nothing this time): iter_0 trained again from step 0
    r = driver(["resume", str(run_dir)], hosted_env(tmp_path, **lag))
    assert r.returncode == 0, r.stderr[-3000:]
    again = [p for p in named(tmp_path, "-iter_0-train-") if p["id"] != paused["id"]]
    assert len(again) == 1 and (again[0]["start_step"], again[0]["rollouts_trained"]) == (0, STEPS * BATCH)
    assert not again[0].get("resume_from")
    train = [e for e in ledger(run_dir).values() if e["arm"] == "iter_0" and e["kind"] == "train"]
    assert sum(e["usage_usd"] for e in train) == pytest.approx(cost_of(5 * BATCH))   # the lost two, then three
    assert json.loads((run_dir / "metrics.json").read_text())["iters"][0]["eval_acc"] is not None


# --------------------------------------------------------------------------------------------
# 4. a declared requirement no index has

def _pushed_env(tmp_path: Path, requires: list[str]) -> str:
    """A tiny env pushed to the double's Hub declaring `requires`: its Hub id."""
    pkg = tmp_path / "tiny_env"
    (pkg / "tiny_env").mkdir(parents=True)
    (pkg / "pyproject.toml").write_text(f'[project]\nname = "tiny_env"\nversion = "0.1.0"\n'
                                        f'dependencies = {json.dumps(requires)}\n')
    (pkg / "tiny_env" / "__init__.py").write_text("import verifiers\n")
    assert prime(tmp_path, "env", "push", "-p", str(pkg), "-v", "PRIVATE", "--runtime", "v1").returncode == 0
    return "alice/tiny_env@0.1.0"


@pytest.mark.parametrize("resolves", [True, False])
def test_the_double_installs_a_declared_requirement_unless_no_index_has_it(tmp_path, monkeypatch, resolves):
    import prime_double

    ref = _pushed_env(tmp_path, ["verifiers", "stock-arithmetic>=0.1"])
    for k, v in hosted_env(tmp_path, **({} if resolves else {"PRIME_DOUBLE_UNRESOLVED": "stock_arithmetic"})).items():
        monkeypatch.setenv(k, v)
    sources = [{"name": "gen", "env": {"taskset": {"id": ref}}}]
    assert prime_double.install_problem(sources) is None
    assert prime_double.unresolved_problem(sources) == (None if resolves else [
        "ERROR: Could not find a version that satisfies the requirement stock-arithmetic>=0.1 (from versions: none)",
        "ERROR: No matching distribution found for stock-arithmetic>=0.1"])


@pytest.mark.extended   # a whole hosted loop; the main suite tests the reading itself
def test_a_requirement_that_does_not_resolve_fails_the_arm_once_with_pips_reason(tmp_path, runs):
    """iter_1's generated env declares what it requires (verifiers; the hub env's distribution
    where it names one), and the platform's index has none of them: its training run FAILS
    before it trains, pip's error its error_message. The arm fails once with that reason (in
    run.json, the error and its log), billed, and is not submitted again in the same command.
    (With the names resolving, iter_1 trains: tests/test_hosted.py's reference run.)"""
    r = driver([*TWO_ITERS, "--runs-dir", str(runs)],
               hosted_env(tmp_path, PRIME_DOUBLE_UNRESOLVED="verifiers,stock-arithmetic"))
    assert r.returncode == 1, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    [failed] = named(tmp_path, "-iter_1-train-")
    pip = failed["error_message"]
    assert failed["status"] == "FAILED" and re.fullmatch(
        r"ERROR: No matching distribution found for (verifiers|stock-arithmetic)\S*", pip), pip
    state = run_state(run_dir)
    assert state["status"] == "failed" and pip in state["reason"] and "iter_1" in state["reason"]
    assert f"Hosted Training reports run {failed['id']} FAILED: {pip}" in r.stderr
    assert pip in (run_dir / "iter_1" / "train.log").read_text()
    assert not named(tmp_path, "-iter_1-eval-") and not named(tmp_path, "-run_")
    assert any(e["run_ids"] == [failed["id"]] and e["outcome"] == "failed" for e in ledger(run_dir).values())


# --------------------------------------------------------------------------------------------
# 5. the pod's GPUs are the config's

@pytest.mark.parametrize("deployment,gpus", [("", 2), ("\n[deployment]\nnum_train_gpus = 3\nnum_infer_gpus = 2\n", 5)],
                         ids=["default-deployment", "five-gpus"])
def test_a_run_gets_the_gpus_its_config_asks_for_and_is_billed_for_them(tmp_path, deployment, gpus):
    """The host shows two GPUs (CUDA_VISIBLE_DEVICES=0,1); the pod shows what the config's
    deployment asks for, so a five-GPU config runs (before, its trainer saw the host's two and
    refused), `train get` reports five and the on-demand rate is five GPU-hours an hour."""
    r = prime(tmp_path, "train", "models", "-o", "json")
    price = json.loads(r.stdout)["on_demand"][0]["price_per_gpu_hour"]
    cfg = tmp_path / "pods.toml"
    cfg.write_text(SMALL_RUN.format(name="pods", steps=1, extra=deployment))
    r = prime(tmp_path, "train", str(cfg), "--yes", "-o", "json", "--volume", "v", PRIME_DOUBLE_ACCOUNT="on_demand")
    dispatch = json.loads(r.stdout[r.stdout.index("{"):])["run"]
    assert dispatch["estimatedCostPerHour"] == pytest.approx(price * gpus)
    run = wait_for(tmp_path, dispatch["runId"], "COMPLETED", "FAILED")
    assert (run["status"], run["gpu_count"], run["error_message"]) == ("COMPLETED", gpus, None)
    pod = json.loads((tmp_path / "platform" / "work" / dispatch["runId"] / "pod.json").read_text())
    assert pod == {"gpu_count": gpus, "gpu_type": "H200_141GB",
                   "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(gpus)))}


# --------------------------------------------------------------------------------------------
# 6. the config check by prime-rl's own classes

def _prime_rl_python() -> Path:
    sys.path.insert(0, str(ROOT / "tests" / "prime_rl_real"))
    import scenario_current

    return scenario_current.testenv().python   # tools/prime_rl_testenv.py: built where missing


def test_without_prime_rls_classes_the_double_checks_on_the_snapshot_and_says_so(tmp_path):
    """No interpreter named (or one that cannot import them): the snapshot, whose extra-key
    check misses prime-rl's validators (a resume.dir not naming a step passes)."""
    for knob in ({}, {"PRIME_DOUBLE_PRIME_RL_PYTHON": sys.executable}):
        submit(tmp_path, "odd-resume", extra='\n[resume]\ndir = "/volume/runs/x/checkpoints/latest"\n', **knob)
    checks = [json.loads(x) for x in (tmp_path / "platform" / "schema_checks.jsonl").read_text().splitlines()]
    assert [(c["by"], c["error"]) for c in checks] == [("snapshot", None), ("snapshot", None)]
    assert "cannot import prime-rl's config classes" in checks[1]["why"]
    for run in platform_runs(tmp_path):
        prime(tmp_path, "train", "stop", run["id"], "-f")


@pytest.mark.prime_rl_real
def test_with_prime_rls_classes_the_double_refuses_what_they_refuse(tmp_path):
    """PRIME_DOUBLE_PRIME_RL_PYTHON names prime-rl's test env (559b447): its RLConfig refuses a
    resume.dir that names no step, and a deployment past a node's GPUs, in its own words, as the
    CLI's schema worker would; a config it accepts is dispatched."""
    python = str(_prime_rl_python())
    cfg = tmp_path / "bad.toml"
    for extra, said in [('\n[resume]\ndir = "/volume/runs/x/checkpoints/latest"\n',
                         "resume: Value error, resume.dir must point at a checkpoint step directory"),
                        ("\n[deployment]\nnum_train_gpus = 8\nnum_infer_gpus = 4\n",
                         "deployment.single_node: Value error, Total GPU count (12 = 8 train + 4 infer) "
                         "exceeds gpus_per_node (8).")]:
        cfg.write_text(SMALL_RUN.format(name="bad", steps=1, extra=extra))
        r = prime(tmp_path, "train", str(cfg), "--yes", "-o", "json", "--volume", "v", PRIME_DOUBLE_PRIME_RL_PYTHON=python)
        assert r.returncode == 1 and r.stdout.startswith(f"Error: Config validation failed:\n{said}"), r.stdout
        r = prime(tmp_path, "train", str(cfg), "--yes", "-o", "json", "--volume", "v")   # the snapshot lets it by
        assert r.returncode == 0, r.stdout
    run_id = submit(tmp_path, "good", PRIME_DOUBLE_PRIME_RL_PYTHON=python)
    assert wait_for(tmp_path, run_id, "COMPLETED", "FAILED")["status"] == "COMPLETED"
    checks = [json.loads(x) for x in (tmp_path / "platform" / "schema_checks.jsonl").read_text().splitlines()]
    assert [c["by"] for c in checks] == ["prime-rl", "snapshot", "prime-rl", "snapshot", "prime-rl"]
    assert all("prime-rl-configs" in c["configs"] for c in checks if c["by"] == "prime-rl")
    for run in platform_runs(tmp_path):
        prime(tmp_path, "train", "stop", run["id"], "-f")


@pytest.mark.prime_rl_real
def test_every_config_the_driver_submits_passes_prime_rls_own_classes(tmp_path, runs):
    """The whole hosted loop (iter_0, iter_1 forked from it on a generated env, their eval runs
    and the controls) with each submission checked by prime-rl's RLConfig at 559b447, not by the
    project's snapshot of it."""
    r = driver([*TWO_ITERS, "--runs-dir", str(runs)],
               hosted_env(tmp_path, PRIME_DOUBLE_PRIME_RL_PYTHON=str(_prime_rl_python())))
    assert r.returncode == 0, r.stderr[-3000:]
    checks = [json.loads(x) for x in (tmp_path / "platform" / "schema_checks.jsonl").read_text().splitlines()]
    assert len(checks) == len(platform_runs(tmp_path)) >= 6
    assert all(c["by"] == "prime-rl" and c["error"] is None for c in checks), checks
    forked = tomllib.loads((run_dir_from(r.stdout) / "iter_1" / "hosted_train.toml").read_text())
    assert forked["resume"]["dir"].startswith("/volume/runs/")
