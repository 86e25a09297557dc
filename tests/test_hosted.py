"""`driver run --backend hosted`: the whole loop on Prime Intellect's Hosted Training through the
`prime` CLI, against tests/prime_double.py (the CLI and the platform, built from prime 0.18.0's
source) on PATH. Everything here is verified through that double only: no test reaches the
live service."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import zipfile
from collections import Counter
from pathlib import Path

import pytest

from conftest import FAST, ROOT, driver, driver_env, run_dir_from
from driver.dialects import get

PRIME_BIN = ROOT / "tests" / "prime_bin"
sys.path.insert(0, str(ROOT / "tests"))
from prime_double import cost_of  # noqa: E402

STEPS, BATCH = 3, 256
TRAIN_COST, EVAL_COST = cost_of(STEPS * BATCH), cost_of(1 * BATCH)   # its training run, its one-step eval run
ARM_COST = TRAIN_COST + EVAL_COST
PROBE_COST = cost_of(32 * 16)            # the probe: one step of 32 prompts x the group size
# what the driver reserves for a control: a training run and an eval run as an iteration's
# (every arm evaluates the same 120 examples of each split)
CONTROL_ESTIMATE = TRAIN_COST + EVAL_COST
# --max-cost 6.5 arms, the whole run's: the gate after iter_0 lets iter_1 run (one more
# iteration and the three controls, at iter_0's runs, fit), the gate after it ends the loop by
# cost (another iteration, its probe now known, and the controls would not fit), though
# --max-iters 3 would allow iter_2; the controls then run inside it
ARGS = ["run", "--backend", "hosted", "--max-iters", "3", "--seed", "7", *FAST, "--eval-examples", "120",
        "--max-cost", f"{6.5 * ARM_COST:.4f}", "--hosted-volume", "ssi-test", "--hosted-probe-share", "1"]
# the whole loop's platform: an on-demand-only account (no reserved cluster caches the student),
# prime-rl's run directory at runs/<runId>/ itself, and run_b's training run lost (its status
# reads fail while it runs on)
# A GPU step takes far longer than a poll: each step of iter_0's training run lasts half a
# second here, so a poll sees it running past its first step and measures its start-up (the
# probe's cost estimate reads it); a run that finished between two polls leaves it unmeasured.
# The other runs' steps take no time: nothing reads how long they ran but their bills.
REFERENCE = {"PRIME_DOUBLE_ACCOUNT": "on_demand", "PRIME_DOUBLE_LAYOUT": "flat",
             "PRIME_DOUBLE_UNRESOLVED": "stock-arithmetic",   # on no index the platform reads
             "PRIME_DOUBLE_GET_FAIL": "-run_b_combined_from_base-train-",
             "PRIME_DOUBLE_STEP_SECONDS": "-iter_0-train-:0.5"}
ARMS = ["iter_0", "iter_1", "run_a_best_from_iter0", "run_b_combined_from_base",
        "run_c_untargeted_from_iter0"]
KILL_POINTS = [
    "hosted:after-submit",     # iter_0's run submitted, its id not yet recorded: found by name
    "train:after-launch",      # iter_0's eval run running, driver gone: re-attached by id
    "hosted:after-push",       # iter_1's env pushed, the push not yet recorded: "already exists"
    "hosted:before-download",  # iter_1's run completed, nothing read back yet
    "evaluate:before-summary",
    "train:before-launch",     # run_a's training run
    "train:after-launch",      # run_a's training run submitted and recorded
]


def hosted_env(tmp_path: Path, **extra) -> dict:
    env = driver_env(tmp_path, **extra)
    env.pop("DRIVER_RL_COMMAND", None)
    env.update({"PATH": f"{PRIME_BIN}:{env.get('PATH', '')}",
                "PRIME_DOUBLE_HOME": str(tmp_path / "platform"),
                "PRIME_DOUBLE_PYTHON": sys.executable, "PRIME_API_KEY": "test-key",
                "DRIVER_HOSTED_POLL_S": "0.3",   # each poll is two CLI calls
                # the platform's pods run the double's trainer ranks with its own teardown
                "DOUBLE_RANK_TEARDOWN_SECONDS": "0.3",
                "DRIVER_HOSTED_LOST_AFTER": "5"})
    env.update({k: str(v) for k, v in extra.items()})
    return env


def platform_runs(tmp_path: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "platform" / "runs").glob("*.json"))]


def workload_left(tmp_path: Path) -> list[str]:
    """The live processes this test's platform (PRIME_DOUBLE_HOME) started, as commands: those
    under its environment that are not this test process's own (the in-process driver's warm
    workers carry the same environment)."""
    import psutil

    home, left = str(tmp_path / "platform"), []
    ours = {p.pid for p in psutil.Process().children(recursive=True)}
    for p in psutil.process_iter():
        try:
            if p.pid not in ours and p.environ().get("PRIME_DOUBLE_HOME") == home \
                    and p.status() != psutil.STATUS_ZOMBIE:
                left.append(" ".join(p.cmdline()))
        except psutil.Error:
            pass
    return left


def submissions(tmp_path: Path) -> Counter:
    """(arm, kind) -> runs submitted, from the names the driver gives them."""
    out: Counter = Counter()
    for r in platform_runs(tmp_path):
        m = re.fullmatch(r"ssi-[0-9a-f]{6}-(.+)-(train|eval|probe)-[0-9a-f]{6}", r["name"] or "")
        assert m, r["name"]
        out[(m.group(1), m.group(2))] += 1
    return out


def calls(tmp_path: Path) -> list[list[str]]:
    p = tmp_path / "platform" / "calls.jsonl"
    return [json.loads(x)["argv"] for x in p.read_text().splitlines()] if p.exists() else []


def outcome(run_dir: Path):
    """What a run ended with, its per-run package tags, the env versions hashed from them and
    platform run ids taken out, and the spent total (the lost run's billed seconds are
    wall-clock) left out."""
    def untag(text: str) -> str:
        # a generated env's version hashes every file it ships, its tagged package name included
        text = re.sub(r"@0\.1\.\d+\b", "@0.1.N", text)
        text = re.sub(r"\brun_[0-9a-f]{10}\b", "run_ID", re.sub(r"_[0-9a-f]{6}\b", "", text))
        return re.sub(r"Cost: \$[\d.]+ spent", "Cost: $X spent", text)
    metrics = json.loads(untag((run_dir / "metrics.json").read_text()))
    best = json.loads(untag((run_dir / "best_iter.json").read_text()))
    scratch = (run_dir / "scratchpad.md").read_text()
    return metrics, best, json.loads((run_dir / "run.json").read_text())["status"], \
        untag(scratch[scratch.index("## Final summary"):])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hosted")
    r = driver([*ARGS, "--runs-dir", str(tmp / "runs")], hosted_env(tmp, **REFERENCE))
    assert r.returncode == 0, r.stderr[-4000:]
    return tmp, run_dir_from(r.stdout), r


# The reference run (about 35 s) is a whole hosted loop: its tests are in CI's extended command,
# beside the kill-anywhere test that resumes it; the main suite keeps hosted whole loops in
# `faults`, the paused-arm and the create-timeout tests below.
@pytest.mark.extended
def test_an_on_demand_only_account_runs_the_whole_loop_on_the_flat_volume_layout(reference):
    tmp, run_dir, r = reference
    state = json.loads((run_dir / "run.json").read_text())
    assert (state["backend"], state["dialect"], state["model"]) == ("hosted", "current", "Qwen/Qwen3-4B-Instruct-2507")
    assert "backend: hosted (prime train on Prime Intellect's Hosted Training (prime CLI 0.18.0" in r.stderr
    # no reserved cluster caches the student: the run goes on demand, which downloads it, and
    # the header says so with the listed rate
    assert "is on no reserved cluster of yours, so its runs go on demand, which downloads the model" in r.stderr
    assert "$3.50/GPU-hour (H200_141GB" in r.stderr
    metrics, best, status, summary = outcome(run_dir)
    # --max-cost ended the loop at the gate, after iter_1, before --max-iters would have
    assert status == "cost_exhausted" and state["trainer"] is None
    assert "[gate] loop ends: cost_exhausted (after iteration 1)" in r.stderr
    assert [m["iter"] for m in metrics["iters"]] == [0, 1]
    assert {c["run"] for c in metrics["controls"]} == {"run_a", "run_c"}
    assert all(m["n_eval"] == 120 for m in metrics["iters"]) and all(c["n_eval"] == 120 for c in metrics["controls"])
    assert best["chosen_on"] == "selection" and "<- BEST_ITER" in summary
    # every arm: one training run and one eval run submitted, never more; run_b's training
    # run was lost, so it has no eval run
    assert submissions(tmp) == {**{(arm, kind): 1 for arm in ARMS for kind in ("train", "eval")
                                   if (arm, kind) != ("run_b_combined_from_base", "eval")}, ("iter_1", "probe"): 1}
    assert all(run["status"] == "COMPLETED" for run in platform_runs(tmp) if "-run_b_" not in run["name"])
    # the lost run was stopped, and a stopped run's workload ends whole: no process of this
    # platform lives on, not even a trainer rank in a session of its own
    assert workload_left(tmp) == []
    # each run's dispatch quoted its on-demand rate; the ledger has both views of every launch
    ledger = json.loads((run_dir / "cost.json").read_text())["launches"]
    for e in ledger.values():
        assert all(v["rate_per_hour"] == 7.0 and v["gpu_count"] == 2 and v["billed_s"] > 0 for v in e["runs"]), e
        assert e["gpu_hour_usd"] == pytest.approx(sum(7.0 * v["billed_s"] / 3600 for v in e["runs"]), abs=1e-5)
        assert e["cost_usd"] == pytest.approx(max(e["gpu_hour_usd"], e["usage_usd"]))
    # the gradient probe was a one-step hosted run from iter_0, its cost stated before it ran
    # (--hosted-probe-share 1 lets it run), and counted in iter_1's
    probe = next(e for e in ledger.values() if e["kind"] == "probe")
    assert probe["arm"] == "iter_1" and probe["outcome"] == "completed"
    assert re.search(r"\[iter_1\] probe: a one-step hosted run from iter_0 \(\d+ rollouts\): about \d+s billed "
                     r"\(iter_0's start-up \d+s and one step\), \d+% of an arm's, about \$[\d.]+; it runs "
                     r"\(--hosted-probe-share 1\)", r.stderr), r.stderr[-3000:]
    assert json.loads((run_dir / "iter_1" / "probe.json").read_text())["passed"] is True
    # what each arm's runs cost is in metrics.json and the summary
    for m in metrics["iters"] + metrics["controls"]:
        assert m["cost_usd"] == pytest.approx(ARM_COST + (probe["cost_usd"] if m.get("iter") == 1 else 0))
    assert sum(e["cost_usd"] for e in ledger.values()) > 4 * ARM_COST
    assert "cost $" in r.stdout and "spent of --max-cost" in r.stdout
    # each generated env was pushed as a private v1 env before its run, declaring no bare name
    # for the hub env it loads (each run names that by its Hub id among its tasksets)
    hub = {p.stem: json.loads(p.read_text()) for p in (tmp / "platform" / "hub" / "alice").glob("*.json")}
    assert len(hub) == 4 and all(h["visibility"] == "PRIVATE" and [v["runtime"] for v in h["versions"]] == ["v1"]
                                 for h in hub.values())
    assert all(h["versions"][0]["requires_dist"] == ["verifiers"] for h in hub.values())
    for arm in ARMS[1:]:
        installed = json.loads((run_dir / arm / "env_installed.json").read_text())
        version = tomllib.loads(next((run_dir / arm).glob("*/pyproject.toml")).read_text())["project"]["version"]
        assert installed["hub"]["ref"] == f"alice/{installed['package']}@{version}"
    assert [m.get("env_hub_ref") is not None for m in metrics["iters"]] == [False, True]
    # every rendered config passes the current dialect's checks; the submitted ones too
    from driver.backends import hosted

    dialect = get("current")
    iter0_run = next(r for r in platform_runs(tmp) if "-iter_0-train-" in r["name"])["id"]
    for arm in ARMS:
        d = run_dir / arm
        for p in sorted(d.glob("*.toml")):
            cfg = tomllib.loads(p.read_text())
            if p.name == "evals.toml":
                dialect.check_final_eval(p.read_text())
                continue
            if p.name.startswith("hosted_"):
                hosted.check_submission(cfg)
                cfg.pop("name")
            assert dialect.check_effective(cfg, complete=False) is cfg
        train = tomllib.loads((d / "hosted_train.toml").read_text())
        assert "output_dir" not in train and "monitors" not in train
        forks = arm in ("iter_1", "run_a_best_from_iter0", "run_c_untargeted_from_iter0")
        # the fork is found where the volume holds it: runs/<id>/checkpoints/, no run/ segment
        assert train.get("resume") == ({"dir": f"/volume/runs/{iter0_run}/checkpoints/step_3"} if forks else None)
        ids = [s["env"]["taskset"]["id"] for s in train["orchestrator"]["train"]["source"]]
        assert all("/" in i for i in ids), ids    # Hub ids: the platform installs them
        if arm == "run_b_combined_from_base":
            continue
        # the final-weights eval is a one-step run from the arm's final broadcast on the volume
        ev = tomllib.loads((d / "hosted_eval.toml").read_text())
        own = next(r for r in platform_runs(tmp) if f"-{arm}-train-" in r["name"])["id"]
        final = 6 if forks else 3
        assert ev["model"] == {"name": f"/volume/runs/{own}/broadcasts/step_{final}"}
        assert ev["max_steps"] == 1 and ev["orchestrator"]["eval"]["skip_first_step"] is False
        assert ev["tokenizer"] == {"name": "Qwen/Qwen3-4B-Instruct-2507"}
        # read back: the train rollouts of each new step, the eval as numbers only, and where
        # the checkpoint trees stay on the volume
        for step in range(final - STEPS + 1, final + 1):
            assert dialect.train_file(d / "prime_out", step).exists()
        eval_text = dialect.eval_file(d / "prime_out", final).read_text()
        assert '"prompt"' not in eval_text and "(double)" not in eval_text and "completion" not in eval_text
        for tree in dialect.checkpoint_trees(d / "prime_out", final):
            remote = json.loads((tree / "REMOTE.json").read_text())
            assert remote["path"].startswith(f"runs/{own}/") and "/run/" not in remote["path"]
            assert (tmp / "platform" / "volumes" / "ssi-test" / remote["path"]).is_dir()
    # the teacher read train traces as flat rows; the eval summaries hold numbers only
    summary_json = json.loads((run_dir / "iter_1" / "eval_summary.json").read_text())
    assert summary_json["train_diagnose"]["groups"] > 0
    assert summary_json["cost_usd"] == pytest.approx(ARM_COST + probe["cost_usd"])


@pytest.mark.extended   # the reference run's
def test_the_hosted_probe_states_its_cost_and_runs_only_under_its_share_of_an_arm(reference):
    from driver.backends import hosted
    from driver.run.rundir import RunDir

    _, run_dir, _ = reference
    state = RunDir(run_dir).load()
    runs, line = hosted.probe_gate(run_dir, state.model_copy(update={"hosted_probe_share": 0.0}), 512)
    assert not runs and line.endswith("skipped: over --hosted-probe-share 0 (1 runs it)")
    assert re.search(r"about \d+s billed \(iter_0's start-up \d+s and one step\), \d+% of an arm's, about \$", line)
    runs, line = hosted.probe_gate(run_dir, state.model_copy(update={"hosted_probe_share": 1.0}), 512)
    assert runs and line.endswith("it runs (--hosted-probe-share 1)")
    # nothing measured (iter_0 ran elsewhere): no estimate, so it is off unless the share is 1
    runs, line = hosted.probe_gate(run_dir / "nowhere", state.model_copy(update={"hosted_probe_share": 0.1}), 512)
    assert not runs and "cannot be estimated" in line and line.endswith("skipped (--hosted-probe-share 0.1; 1 runs it anyway)")


@pytest.mark.extended   # the reference run's
def test_a_lost_control_is_stopped_by_id_before_the_next_is_submitted_and_its_cost_is_in_the_ledger(reference):
    tmp, run_dir, r = reference
    runs = platform_runs(tmp)
    lost = next(p for p in runs if "-run_b_combined_from_base-train-" in p["name"])
    after = [p for p in runs if p["created_at"] > lost["created_at"]]
    assert lost["status"] == "STOPPED"
    assert any(c[:3] == ["train", "stop", lost["id"]] for c in calls(tmp))
    # nothing was submitted while it ran: the next control's runs came after its stop
    assert after and all(p["created_at"] > lost["completed_at"] for p in after)
    ledger = json.loads((run_dir / "cost.json").read_text())["launches"]
    entry = next(e for e in ledger.values() if e["run_ids"] == [lost["id"]])
    assert entry["arm"] == "run_b_combined_from_base" and entry["outcome"] == "failed"
    assert entry["billed_s"] > 0 and entry["gpu_hour_usd"] > 0 and entry["cost_usd"] == entry["gpu_hour_usd"]
    errors = json.loads((run_dir / "run.json").read_text())["phase4_errors"]
    assert any("run_b" in e and f"lost track of hosted run {lost['id']}" in e for e in errors), errors


@pytest.mark.extended   # a whole two-iteration loop with its controls (about 35 s)
def test_the_cost_cap_is_checked_before_every_submission_and_a_control_past_it_is_never_submitted(tmp_path):
    """--max-cost is the whole run's, the controls included. --max-iters 2 ends the loop; the
    controls then start in turn while their estimates fit. iter_1's probe, unknown when the gate
    after iter_0 reserved for the controls, spent part of it: run_c's estimate would take the run
    past the cap, so run_c is recorded as skipped with the reason and never submitted."""
    # the gate after iter_0 lets iter_1 start (iter_0's runs, one more iteration at them and three
    # controls fit); what iter_0, iter_1 with its probe, run_a and run_b cost, with run_c's
    # estimate, does not
    fits = 2 * ARM_COST + 3 * CONTROL_ESTIMATE
    run_c_needs = 4 * ARM_COST + PROBE_COST + CONTROL_ESTIMATE
    assert fits < run_c_needs
    cap = (fits + run_c_needs) / 2
    r = driver(["run", "--backend", "hosted", "--max-iters", "2", "--seed", "7", *FAST, "--eval-examples", "120",
                "--max-cost", f"{cap:.4f}", "--hosted-volume", "ssi-test", "--hosted-probe-share", "1",
                "--runs-dir", str(tmp_path / "runs")], hosted_env(tmp_path, PRIME_DOUBLE_ACCOUNT="on_demand"))
    assert r.returncode == 0, r.stderr[-4000:]
    assert f"--max-cost ${float(f'{cap:.4f}'):g} is a ceiling on every submission, the controls' included" in r.stderr
    run_dir = run_dir_from(r.stdout)
    state = json.loads((run_dir / "run.json").read_text())
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert "[gate] iteration 1: " in r.stderr and f"left of --max-cost ${cap:.2f} covers one more iteration" in r.stderr
    assert state["status"] == "max_iters_reached" and [m["iter"] for m in metrics["iters"]] == [0, 1]
    assert sorted(c["run"] for c in metrics["controls"]) == ["run_a", "run_b"]
    (skip,) = [e for e in state["phase4_errors"] if e.startswith("run_c: ")]
    assert re.fullmatch(r"run_c: skipped, the run has spent \$[\d.]+, and its training and eval \(estimated "
                        rf"at \$[\d.]+\) would take it past its --max-cost \${cap:.2f}", skip), skip
    assert f"[run_c] {skip.removeprefix('run_c: ').replace('skipped, ', 'skipped: ', 1)}" in r.stderr
    # never submitted: no `prime` call names it (no env pushed, no run), no run of it on the platform
    assert not [c for c in calls(tmp_path) if any("run_c_untargeted_from_iter0" in a for a in c)]
    assert sorted({arm for arm, _ in submissions(tmp_path)}) == ["iter_0", "iter_1", "run_a_best_from_iter0",
                                                                 "run_b_combined_from_base"]
    ledger = json.loads((run_dir / "cost.json").read_text())["launches"]
    assert sum(e["cost_usd"] for e in ledger.values()) <= cap


def _refused(r, runs: Path, *needles: str) -> None:
    assert r.returncode == 2, r.stdout + r.stderr
    for needle in needles:
        assert needle in r.stderr, r.stderr
    assert list(runs.iterdir()) == []


def test_preflight_refuses_a_machine_without_the_prime_cli_before_a_run_directory_exists(tmp_path, runs):
    env = hosted_env(tmp_path)
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    r = driver(["run", "--backend", "hosted", "--runs-dir", str(runs), *FAST], env)
    _refused(r, runs, "`prime` CLI, which is not on PATH", "uv tool install prime", "prime login")


def test_preflight_refuses_when_not_logged_in(tmp_path, runs):
    env = hosted_env(tmp_path, HOME=str(tmp_path / "home"))
    env.pop("PRIME_API_KEY")
    r = driver(["run", "--backend", "hosted", "--runs-dir", str(runs), *FAST], env)
    _refused(r, runs, "not logged in to Prime Intellect", "No API key configured", "Run `prime login`")


def test_preflight_refuses_a_model_neither_reserved_nor_on_demand_capacity_can_place(tmp_path, runs):
    # an account with reserved clusters and no on-demand access: a model its clusters do not
    # cache cannot be placed (on demand would download it, but the account has none)
    r = driver(["run", "--backend", "hosted", "--model", "Qwen/Qwen3-0.6B", "--runs-dir", str(runs), *FAST],
               hosted_env(tmp_path, PRIME_DOUBLE_ACCOUNT="reserved"))
    _refused(r, runs, "--model Qwen/Qwen3-0.6B cannot be placed on Hosted Training",
             "reserved: Qwen/Qwen3-4B-Instruct-2507", "not enrolled in the on-demand beta",
             "`prime train request`")


def test_a_reserved_only_account_is_refused_up_front_where_no_eval_run_could_be_placed(tmp_path, runs):
    """The student is cached on the account's reserved clusters, but every arm's final-weights
    eval is a run whose model is those weights on the volume, which only the on-demand pool
    places (the double refuses it on reserved capacity, as the platform does). Before, iter_0
    trained on the allocation and its eval was refused; now nothing is created."""
    r = driver(["run", "--backend", "hosted", "--runs-dir", str(runs), *FAST],
               hosted_env(tmp_path, PRIME_DOUBLE_ACCOUNT="reserved"))
    _refused(r, runs, "measures every arm's final weights with an eval run",
             "not enrolled in the on-demand beta", "nothing was created")


def test_a_mixed_accounts_header_says_its_eval_runs_are_billed_on_demand(tmp_path, runs):
    r = driver(["run", "--backend", "hosted", "--dry-run", "--runs-dir", str(runs), *FAST],
               hosted_env(tmp_path, PRIME_DOUBLE_ACCOUNT="both"))
    assert r.returncode == 0, r.stderr[-2000:]
    said = " ".join(r.stderr.split())
    assert "Every arm's final-weights eval run goes on demand" in said and "/GPU-hour (H200_141GB)" in said


def test_driver_run_help_says_what_hosted_refuses_up_front_and_how_the_probe_is_gated(tmp_path):
    r = driver(["run", "--help"], hosted_env(tmp_path))
    helped = " ".join(r.stdout.split())
    assert ("on --backend hosted, no logged-in `prime` 0.15.0 .. 0.18.x, a --model neither your "
            "reserved clusters nor the on-demand pool can place, or an account with no on-demand "
            "capacity (every final-weights eval run goes there)") in helped
    assert "it runs only when its estimated cost (from iter_0's measured start-up and step time, stated " \
           "before it runs) is at most this share of an arm's; 1 always runs it (default: 0.1)" in helped
    assert "hours at the rate its dispatch quoted and `prime train usage`" in helped


def test_preflight_places_a_model_only_on_demand_would_download_and_says_what_it_costs(tmp_path, runs):
    from driver.backends.hosted import cost_estimate
    from driver.run.model import RunState

    models = json.loads(_prime(tmp_path, "train", "models", "-o", "json",
                               PRIME_DOUBLE_ACCOUNT="on_demand").stdout)
    assert models["available_fft_models"] == [] and models["on_demand_beta_access"] is True
    state = RunState.model_construct(model="Qwen/Qwen3-0.6B", max_cost_usd=None, budget_seconds=3600.0,
                                     steps_per_run=100, batch_size=512, hosted_probe_share=0.1)
    line = cost_estimate(state, models)
    assert "on no reserved cluster of yours, so its runs go on demand, which downloads the model" in line
    assert "$3.50/GPU-hour (H200_141GB" in line and "costs up to $7.00" in line
    # the same model cached on the account's reserved clusters: no hourly price, said so
    both = json.loads(_prime(tmp_path, "train", "models", "-o", "json").stdout)
    state = RunState.model_construct(model="Qwen/Qwen3-4B-Instruct-2507", max_cost_usd=5.0,
                                     budget_seconds=3600.0, steps_per_run=100, batch_size=512,
                                     hosted_probe_share=0.1)
    line = cost_estimate(state, both)
    assert "cached on reserved clusters of yours (H200_141GB)" in line and "cost is unknown here" in line
    assert "--max-cost $5 caps the whole run, the controls included" in line


@pytest.mark.parametrize("version,needle", [("0.12.0", "older than 0.13.0"),
                                            ("0.14.0", "no PAUSED runs and no `--resume-from`"),
                                            ("0.19.0", "newer than any whose source")])
def test_preflight_refuses_a_cli_outside_the_window_naming_its_version(tmp_path, runs, version, needle):
    r = driver(["run", "--backend", "hosted", "--runs-dir", str(runs), *FAST],
               hosted_env(tmp_path, PRIME_DOUBLE_VERSION=version))
    _refused(r, runs, f"prime CLI {version}", needle, "prime==0.18.0")


def _prime(tmp_path: Path, *args: str, **env) -> subprocess.CompletedProcess:
    e = hosted_env(tmp_path, HOME=str(tmp_path / "home"), **env)   # no ~/.prime of the user's
    return subprocess.run(["prime", *args], env=e, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_the_double_refuses_what_prime_0_18_refuses_with_its_words(tmp_path):
    lora = tmp_path / "lora.toml"
    lora.write_text('model = "Qwen/Qwen3-4B"\n[[env]]\nid = "x"\n')
    r = _prime(tmp_path, "--plain", "train", str(lora), "--yes", "-o", "json")
    assert r.returncode == 1 and r.stdout.startswith(f"Error: {lora} is a shared LoRA training config")
    cfg = tmp_path / "rl.toml"
    cfg.write_text("max_steps = 1\n[trainer]\n[orchestrator]\n[inference]\n")
    r = _prime(tmp_path, "--plain", "train", str(cfg), "--yes", "-o", "json", "-e", "OPENAI_API_KEY=x")
    assert r.returncode == 1 and ("Error: full-FT runs only forward HF_TOKEN, WANDB_API_KEY today; got "
                                  "unsupported secret(s): OPENAI_API_KEY.") in r.stdout
    r = _prime(tmp_path, "--plain", "train", str(cfg), "--yes", "-o", "yaml")
    assert r.returncode == 1 and "Error: Invalid output format 'yaml'. Supported formats: table, json" in r.stdout
    r = _prime(tmp_path, "--plain", "train", str(cfg), "--yes", "--resume-from", " ")
    assert r.returncode == 1 and "Error: --resume-from needs the ID of a PAUSED run." in r.stdout
    r = _prime(tmp_path, "--plain", "train", str(cfg), "--yes", "-o", "json", PRIME_API_KEY="")
    assert r.returncode == 1 and r.stdout.strip() == ("Error: No API key configured. Use command 'prime "
                                                      "login' to configure your API key.")
    r = _prime(tmp_path, "--plain", "train", str(cfg), "-o", "json")   # no --yes, stdin closed
    assert r.returncode == 1 and r.stdout.strip().endswith("Aborted.")
    r = _prime(tmp_path, "train", "get", "run_missing", "-o", "json")
    assert r.returncode == 1 and r.stdout.strip() == "Error: HTTP 404: Run not found"
    r = _prime(tmp_path, "train", "progress", "run_missing", "-o", "json")   # always JSON: no -o
    assert r.returncode == 2
    # the CLI's local schema check (training_schema_worker.py), with its words
    bad = tmp_path / "bad.toml"
    bad.write_text("max_steps = 1\n[orchestrator]\nbogus = 1\n[trainer]\n[inference]\n")
    r = _prime(tmp_path, "--plain", "train", str(bad), "--yes", "-o", "json")
    assert r.returncode == 1 and r.stdout == ("Error: Config validation failed:\n"
                                              "orchestrator.bogus: Extra inputs are not permitted\n")
    for text, said in [("max_steps = 1\n[trainer]\n[orchestrator]\n", "Hosted RL runs need inference GPUs"),
                       ("clean = true\n[trainer]\n[orchestrator]\n[inference]\n", "clean = true is unsupported"),
                       ("[trainer]\n[orchestrator]\n[inference]\n[k8s]\nx = 1\n", "[k8s] is not supported"),
                       ("[orchestrator]\n[inference]\n", "Config validation failed:\ntrainer: Field required")]:
        bad.write_text(text)
        r = _prime(tmp_path, "--plain", "train", str(bad), "--yes", "-o", "json")
        assert r.returncode == 1 and r.stdout.startswith(f"Error: {said}"), r.stdout
    # sources are deferred to submission (they need env plugins): an unknown key there passes
    bad.write_text("[trainer]\n[inference]\n[[orchestrator.train.source]]\nodd = 1\n")
    r = _prime(tmp_path, "--plain", "train", str(bad), "--yes", "-o", "json")
    assert r.returncode == 0 and '"runId"' in r.stdout
    # `train resume` is 0.16.0's: on 0.15.0 it is the default command's extra argument
    assert _prime(tmp_path, "train", "resume", "run_x", "--yes", PRIME_DOUBLE_VERSION="0.15.0").returncode == 2
    r = _prime(tmp_path, "train", "resume", "run_x", "--yes", "-o", "json")
    assert r.returncode == 1 and r.stdout.strip() == "Error: HTTP 404: Run not found"
    r = _prime(tmp_path, "--version")
    assert r.stdout == "Prime CLI version: 0.18.0\n"


def _package(root: Path, name: str, deps: list[str], uv_sources: str = "") -> Path:
    pkg = root / name
    (pkg / name).mkdir(parents=True)
    (pkg / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\nversion = "0.1.0"\ndependencies = {json.dumps(deps)}\n' + uv_sources)
    (pkg / name / "__init__.py").write_text("__all__ = []\n")
    return pkg


def test_a_generated_env_with_a_git_dependency_is_refused_before_push_and_a_push_is_idempotent(tmp_path, monkeypatch):
    from driver.backends import hosted
    from driver.errors import DriverError

    for k, v in hosted_env(tmp_path).items():
        monkeypatch.setenv(k, v)
    backend = hosted.build()
    for name, deps, extra, needle in [
            ("git_dep", ["verifiers", "tau2 @ git+https://github.com/sierra-research/tau2-bench"], "", "git+https"),
            ("path_dep", ["verifiers", "helper @ file:///tmp/helper"], "", "file:///tmp/helper"),
            ("uv_git", ["verifiers", "helper"], '[tool.uv.sources]\nhelper = { git = "https://x/y" }\n', "tool.uv.sources")]:
        with pytest.raises(DriverError, match="refusing to push") as e:
            backend.publish_env(_package(tmp_path, name, deps, extra))
        assert needle in str(e.value)
    assert not [c for c in calls(tmp_path) if c[:2] == ["env", "push"]]
    # a clean package is pushed as a private v1 env; the record makes a second call a no-op
    pkg = _package(tmp_path, "clean_env", ["verifiers>=0.3"])
    first = backend.publish_env(pkg)
    assert first["ref"] == "alice/clean_env@0.1.0" and first["visibility"] == "PRIVATE"
    assert backend.publish_env(pkg) == first
    assert len([c for c in calls(tmp_path) if c[:2] == ["env", "push"]]) == 1
    # killed after the push but before its record: pushing the same content again fails with
    # "content hash ... already exists", which counts as pushed
    (pkg / ".prime" / "driver_push.json").unlink()
    again = backend.publish_env(pkg)
    assert {k: again[k] for k in ("id", "ref", "content_hash")} == {k: first[k] for k in ("id", "ref", "content_hash")}
    assert len([c for c in calls(tmp_path) if c[:2] == ["env", "push"]]) == 2



def test_a_half_pushed_env_is_pushed_again_and_its_ref_installs(tmp_path, monkeypatch):
    """The first push of an env registers its wheel's content hash and fails at finalize
    (PRIME_DOUBLE_PUSH_UNFINALIZED); the retry of the same content is answered "content hash ...
    already exists", which counted as pushed though no version of it is listed: every run naming
    that ref failed to install it. `prime env status` does not list it, so it is pushed again
    as a .post release, and the ref it records is one the Hub lists."""
    import subprocess as sp

    from driver.backends import hosted
    from driver.errors import DriverError

    for k, v in hosted_env(tmp_path, PRIME_DOUBLE_PUSH_UNFINALIZED="halfway_env").items():
        monkeypatch.setenv(k, v)
    backend = hosted.build()
    pkg = _package(tmp_path, "halfway_env", ["verifiers>=0.3"])
    with pytest.raises(DriverError, match="Failed to finalize wheel upload"):
        backend.publish_env(pkg)
    pushed = backend.publish_env(pkg)   # `driver resume`
    assert pushed["ref"] == "alice/halfway_env@0.1.0.post0"
    status = json.loads(sp.run([str(PRIME_BIN / "prime"), "env", "status", "alice/halfway_env", "--output",
                                "json"], capture_output=True, text=True, env=dict(os.environ)).stdout)
    assert status["latest_version"]["semantic_version"] == "0.1.0.post0"
    assert [c[-1] for c in calls(tmp_path) if c[:2] == ["env", "push"]][-1] == "--post"
    assert backend.publish_env(pkg) == pushed   # recorded: not pushed a fourth time
    assert len([c for c in calls(tmp_path) if c[:2] == ["env", "push"]]) == 3

SHORT = ["run", "--backend", "hosted", "--max-iters", "1", "--seed", "3", *FAST, "--eval-examples", "60"]


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    """iter_0 only, on an account whose reserved clusters cache the student (no hourly rate),
    with prime-rl's run directory at runs/<runId>/run/: the platform pauses its training run at
    step 2, then fails its eval run; the driver stops, and `driver resume` finishes the run."""
    tmp = tmp_path_factory.mktemp("hosted-faults")
    platform = {"PRIME_DOUBLE_LAYOUT": "run", "PRIME_DOUBLE_ACCOUNT": "both"}
    r1 = driver([*SHORT, "--runs-dir", str(tmp / "runs")],
                hosted_env(tmp, PRIME_DOUBLE_PAUSE="-iter_0-train-:2",
                           PRIME_DOUBLE_FAIL="-iter_0-eval-:CUDA error: out of memory on rank 0",
                           # the platform leaves the failed run's completed_at unset (other
                           # tests' platforms stamp it): the ledger bills it all the same
                           PRIME_DOUBLE_NO_COMPLETED_AT="1", **platform))
    run_dir = run_dir_from(r1.stdout)
    failed_state = json.loads((run_dir / "run.json").read_text())
    r2 = driver(["resume", str(run_dir)], hosted_env(tmp, **platform))
    assert r2.returncode == 0, r2.stderr[-3000:]
    return tmp, run_dir, r1, failed_state


def test_a_run_bill_never_falls_short_of_the_platforms(tmp_path):
    """prime_cli/api/rl.py:70-75@0.18.0: a run's created_at, started_at, completed_at and
    updated_at (completed_at optional). Billed from the earliest start to the latest end known,
    else to when the driver settled it: a run the platform failed without completed_at was
    billed 0 s, and a start-up before `started_at` went unbilled."""
    from driver.backends.hosted.runner import run_bill

    placement = {"estimatedCostPerHour": 7.2, "pricePerGpuHour": 3.6}
    failed = run_bill({"started_at": "2026-12-05T10:00:00Z", "updated_at": "2026-12-05T10:30:00Z",
                       "placement": placement}, None)
    assert failed["billed_s"] == 1800 and failed["gpu_hour_usd"] == pytest.approx(3.6)
    early = run_bill({"created_at": "2026-12-05T09:50:00Z", "started_at": "2026-12-05T10:00:00Z",
                      "completed_at": "2026-12-05T10:30:00Z", "placement": placement}, None)
    assert early["billed_s"] == 2400
    unknown_end = run_bill({"dispatched_at": 1000.0, "placement": placement}, None, settled_at=1600.0)
    assert unknown_end["billed_s"] == 600


def test_a_run_the_platform_fails_is_recorded_with_its_reason_and_resume_submits_it_afresh(faults):
    tmp, run_dir, r1, failed = faults
    assert r1.returncode == 1, r1.stderr[-2000:]
    assert failed["status"] == "failed" and "CUDA error: out of memory on rank 0" in failed["reason"]
    assert "FAILED: CUDA error: out of memory on rank 0" in (run_dir / "iter_0" / "final_eval.log.failed-1").read_text()
    assert submissions(tmp)[("iter_0", "eval")] == 2     # the failed one, then one afresh
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["iters"][0]["eval_acc"] is not None
    # reserved capacity: no hourly rate for training, said so in the header and the ledger; the
    # usage view is the cost
    assert "where its training runs have no hourly price: the loop's cost is unknown here" in " ".join(r1.stderr.split())
    ledger = json.loads((run_dir / "cost.json").read_text())["launches"]
    train = [e for e in ledger.values() if e["kind"] == "train"]
    assert len(train) == 1 and train[0]["gpu_hour_usd"] is None and train[0]["cost_usd"] == train[0]["usage_usd"]
    assert all(e["cost_usd"] == max(e["gpu_hour_usd"] or 0, e["usage_usd"]) for e in ledger.values())
    failed_eval = [e for e in ledger.values() if e["kind"] == "eval" and e["outcome"] == "failed"]
    assert len(failed_eval) == 1 and failed_eval[0]["billed_s"] > 0   # no completed_at: 0 s before
    assert metrics["iters"][0]["cost_usd"] == pytest.approx(sum(e["cost_usd"] for e in ledger.values()))


def test_a_paused_run_is_continued_from_its_own_checkpoint_with_prime_train_resume(faults):
    tmp, run_dir, _, _ = faults
    paused, resumed = [p for p in platform_runs(tmp) if "-iter_0-train-" in p["name"]]
    assert (paused["status"], resumed["status"], resumed["resume_from"]) == ("PAUSED", "COMPLETED", paused["id"])
    assert submissions(tmp)[("iter_0", "train")] == 2
    # it went on from step 2: one step trained (and billed) after the pause, none twice
    assert (resumed["start_step"], resumed["rollouts_trained"]) == (2, 1 * BATCH)
    assert paused["rollouts_trained"] == 2 * BATCH
    record = json.loads((run_dir / "iter_0" / "prime_out" / ".hosted.json").read_text())
    assert record["run_ids"] == [paused["id"], resumed["id"]] and record["resumed_from"] == [paused["id"]]
    assert any(c[:3] == ["train", "resume", paused["id"]] for c in calls(tmp))
    # steps 1-2 come from the paused run, step 3 from the one that continued it, under run/
    dialect = get("current")
    assert all(dialect.train_file(run_dir / "iter_0" / "prime_out", s).exists() for s in (1, 2, 3))
    remote = json.loads((dialect.weights_dir(run_dir / "iter_0" / "prime_out", 3) / "REMOTE.json").read_text())
    assert remote["run_id"] == resumed["id"] and remote["path"] == f"runs/{resumed['id']}/run/broadcasts/step_3"


# `config` (the platform runs the submitted config as is) is the reading that would retrain a
# paused arm from its start: the main suite's; `checkpoint` is the extended command's
@pytest.mark.parametrize("reading", ["config", pytest.param("checkpoint", marks=pytest.mark.extended)])
def test_on_0_15_a_paused_arm_resumes_from_its_own_checkpoint_and_the_cost_cap_counts_gpu_hours(tmp_path, reading):
    """prime 0.15.0 has no `train resume`: the paused run is continued with --resume-from and a
    config whose [resume] names its own last checkpoint, so both readings of how the platform
    combines the two continue it from there. The account is on demand at a rate that bills
    iter_0's training past --max-cost, and `prime train usage` bills no token: the cap fires on
    GPU-hours, before iter_0's eval run is submitted."""
    runs = tmp_path / "runs"
    r = driver(["run", "--backend", "hosted", "--max-iters", "3", "--seed", "3", *FAST, "--eval-examples", "60",
                "--max-cost", "5", "--runs-dir", str(runs)],
               hosted_env(tmp_path, PRIME_DOUBLE_VERSION="0.15.0", PRIME_DOUBLE_RESUME_FROM=reading,
                          PRIME_DOUBLE_PAUSE="-iter_0-train-:2", PRIME_DOUBLE_ACCOUNT="on_demand",
                          PRIME_DOUBLE_USAGE="none", PRIME_DOUBLE_PRICE="9000", PRIME_DOUBLE_LAYOUT="run"))
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    # the cost cap fired on the GPU-hour bill, with a token bill of zero: iter_0's training had
    # spent it, so no run was submitted after it, not even iter_0's eval run
    assert json.loads((run_dir / "run.json").read_text())["status"] == "cost_exhausted"
    assert "[iter_0] final-weights eval not submitted: the run has spent $" in r.stderr
    assert " of its --max-cost $5.00; the loop ends: cost_exhausted" in r.stderr
    assert [p["name"].split("-")[-2] for p in platform_runs(tmp_path)] == ["train", "train"]
    ledger = json.loads((run_dir / "cost.json").read_text())["launches"]
    assert all(e["usage_usd"] == 0 for e in ledger.values())
    assert sum(e["gpu_hour_usd"] for e in ledger.values()) >= 5
    assert all(e["cost_usd"] == e["gpu_hour_usd"] for e in ledger.values())
    assert not [p for p in platform_runs(tmp_path) if "-iter_1-" in p["name"]]
    # the paused arm went on from its own step 2: one step trained (and billed) after the pause
    paused, resumed = [p for p in platform_runs(tmp_path) if "-iter_0-train-" in p["name"]]
    assert resumed["resume_from"] == paused["id"]
    assert (resumed["start_step"], resumed["rollouts_trained"]) == (2, 1 * BATCH)
    cfg = tomllib.loads(Path(resumed["config_path"]).read_text())
    assert cfg["resume"] == {"dir": f"/volume/runs/{paused['id']}/run/checkpoints/step_2"}


@pytest.mark.extended   # the reference run's
def test_a_generated_env_installs_on_the_platform_only_beside_the_hub_env_its_run_names(tmp_path, reference):
    """The platform installs a pushed env with its wheel's requirements only. A generated env
    loads the hub taskset by id and declares no requirement for it (a bare distribution name
    would be resolved from the public index): in a config that names only the generated env it
    fails at import; named by its Hub id among the run's tasksets (declare_hub_env, as every
    hosted training run of the driver's is), the hub env is installed from the Hub and it runs."""
    from driver.backends.hosted.submission import declare_hub_env
    from driver.run.model import RunState

    ref_tmp, run_dir, _ = reference
    pkg = tmp_path / "src"
    shutil.copytree(next((run_dir / "iter_1").glob("stock_arithmetic_iter_1_*/pyproject.toml")).parent, pkg,
                    ignore=shutil.ignore_patterns(".prime", "__pycache__"))
    inner = next(p for p in pkg.iterdir() if p.is_dir())
    pyproject = (pkg / "pyproject.toml").read_text()
    assert "stock-arithmetic" not in pyproject.split("dependencies")[1].split("\n")[0]
    (pkg / "pyproject.toml").write_text(pyproject.replace(inner.name, "copied_env"))
    inner.rename(pkg / "copied_env")
    assert _prime(tmp_path, "env", "push", "-p", str(pkg), "-v", "PRIVATE", "--runtime", "v1").returncode == 0
    version = tomllib.loads((pkg / "pyproject.toml").read_text())["project"]["version"]
    base = {"max_steps": 1, "trainer": {}, "inference": {},
            "orchestrator": {"batch_size": 16, "group_size": 16, "train": {"source": [
                {"name": "gen", "env": {"taskset": {"id": f"alice/copied_env@{version}"}}}]}}}
    declared = json.loads(json.dumps(base))
    declare_hub_env(declared, RunState.model_validate(json.loads((run_dir / "run.json").read_text())))
    state = RunState.model_validate(json.loads((run_dir / "run.json").read_text()))
    assert declared["orchestrator"]["eval"]["source"][0]["env"]["taskset"]["id"] == state.hub_id
    ended = {}
    for label, cfg in (("alone", base), ("declared", declared)):
        import tomli_w

        (tmp_path / f"{label}.toml").write_text(tomli_w.dumps(cfg))
        r = _prime(tmp_path, "train", str(tmp_path / f"{label}.toml"), "--yes", "-o", "json", "--volume", "v")
        run_id = json.loads(r.stdout)["run"]["runId"]
        for _ in range(300):
            run = json.loads(_prime(tmp_path, "train", "get", run_id, "-o", "json").stdout)["run"]
            if run["status"] not in ("QUEUED", "RUNNING"):
                break
            time.sleep(0.1)
        ended[label] = run
    assert ended["alone"]["status"] == "FAILED"
    assert ended["alone"]["error_message"] == "ModuleNotFoundError: No module named 'stock_arithmetic' (loading taskset copied_env)"
    assert "ModuleNotFoundError" not in str(ended["declared"].get("error_message"))


@pytest.mark.extended   # the reference run's
def test_a_generated_env_wheel_declares_no_bare_hub_requirement_and_each_run_names_the_hub_env(tmp_path, reference):
    """Every generated env's wheel requires verifiers only (the hub env's bare name would be
    resolved from the public index; the reference platform resolves it from none,
    PRIME_DOUBLE_UNRESOLVED), and every training run the driver submitted names the hub env by
    its Hub id, so the whole loop ran on tasksets the Hub installed."""
    from hatchling.builders.wheel import WheelBuilder

    _, run_dir, _ = reference
    for arm in ARMS[1:]:
        pkg = next((run_dir / arm).glob("stock_arithmetic_*/pyproject.toml")).parent
        wheel = next(iter(WheelBuilder(str(pkg)).build(directory=str(tmp_path / arm), versions=["standard"])))
        with zipfile.ZipFile(wheel) as z:
            meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        assert sorted(line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist:")) \
            == ["verifiers"]
        cfg = tomllib.loads((run_dir / arm / "hosted_train.toml").read_text())
        named = [b["env"]["taskset"]["id"] for part in ("train", "eval")
                 for b in (cfg["orchestrator"].get(part) or {}).get("source", [])]
        assert any(t.split("@")[0] == json.loads((run_dir / "run.json").read_text())["hub_id"] for t in named), named


@pytest.mark.extended
def test_sigkill_anywhere_on_the_hosted_backend_never_submits_a_second_run(reference, tmp_path):
    ref_tmp, ref_dir, _ = reference
    r = driver([*ARGS, "--runs-dir", str(tmp_path / "runs")],
               hosted_env(tmp_path, DRIVER_FAULT_KILL_AT=KILL_POINTS[0], **REFERENCE))
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    run_dir = run_dir_from(r.stdout)
    for point in KILL_POINTS[1:]:
        r = driver(["resume", str(run_dir)], hosted_env(tmp_path, DRIVER_FAULT_KILL_AT=point, **REFERENCE))
        assert r.returncode == -signal.SIGKILL, f"never reached {point}: {r.stderr[-2000:]}"
    r = driver(["resume", str(run_dir)], hosted_env(tmp_path, **REFERENCE))
    assert r.returncode == 0, r.stderr[-3000:]
    assert outcome(run_dir) == outcome(ref_dir)
    assert submissions(tmp_path) == submissions(ref_tmp)
    # iter_1's env was pushed twice (the second answered "already exists"), every other once
    pushes = Counter(Path(c[c.index("-p") + 1]).name.rsplit("_", 1)[0] for c in calls(tmp_path)
                     if c[:2] == ["env", "push"])
    assert pushes == {"stock_arithmetic_iter_1": 2, "stock_arithmetic_run_a": 1,
                      "stock_arithmetic_run_b": 1, "stock_arithmetic_run_c": 1}


# both in CI's extended command: each is a whole hosted run with a 4-s queue per launch
@pytest.mark.extended
@pytest.mark.parametrize("pause", [None, "-iter_0-train-:2"])
def test_time_in_the_queue_is_shown_and_never_counted_against_the_start_up_limit(tmp_path, runs, pause):
    """A run may queue (commands/rl.py:1456@0.18.0): each of this run's launches waits 4 s in the
    queue against a 2-s --startup-timeout, and (second case) iter_0's training is paused at step
    2 and continued by a new run that queues too and prints no step until its first. The clock
    starts at each run's first running poll, so nothing is stopped (before, the queue counted
    and iter_0 was stopped the moment it ran, and a continuation inherited the paused run's
    silence); the log says how long each waited."""
    extra = {"PRIME_DOUBLE_PAUSE": pause} if pause else {}
    r = driver([*SHORT, "--startup-timeout", "2s", "--runs-dir", str(runs)],
               hosted_env(tmp_path, PRIME_DOUBLE_QUEUE_S="4", **extra))
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    assert json.loads((run_dir / "metrics.json").read_text())["iters"][0]["eval_acc"] is not None
    log = (run_dir / "iter_0" / "train.log").read_text()
    queued = [float(m) for m in re.findall(r"running after (\d+)s queued", log)]
    assert len(queued) == (2 if pause else 1) and all(q >= 3 for q in queued), log[-2000:]
    assert "--startup-timeout" not in r.stderr
    if pause:   # continued, not retrained: one submission, then its continuation
        paused, continued = [p for p in platform_runs(tmp_path) if "-iter_0-train-" in p["name"]]
        assert (paused["status"], continued["status"]) == ("PAUSED", "COMPLETED")
        assert submissions(tmp_path)[("iter_0", "train")] == 2


@pytest.mark.extended   # keeps the main suite inside its 5 minutes
def test_a_run_queued_past_its_own_limit_is_stopped_and_resume_submits_it_again(tmp_path, runs):
    """The queue has its own limit (--queue-timeout), never the start-up one: iter_0's training
    run waits 6 s queued against a 2-s --queue-timeout (and a 60-s --startup-timeout), so it is
    stopped while queued and the arm fails saying so; `driver resume --queue-timeout 1m` submits
    it again and the run finishes."""
    r = driver([*SHORT, "--queue-timeout", "2s", "--startup-timeout", "60s", "--runs-dir", str(runs)],
               hosted_env(tmp_path, PRIME_DOUBLE_QUEUE_S="6"))
    assert r.returncode == 1
    assert "still queued after 2s (--queue-timeout)" in r.stderr, r.stderr[-2000:]
    run_dir = run_dir_from(r.stdout)
    (stopped,) = [p for p in platform_runs(tmp_path) if "-iter_0-train-" in p["name"]]
    assert stopped["status"] == "STOPPED" and not stopped.get("started_at")
    r = driver(["resume", str(run_dir), "--queue-timeout", "1m"], hosted_env(tmp_path, PRIME_DOUBLE_QUEUE_S="6"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert submissions(tmp_path)[("iter_0", "train")] == 2

def test_a_create_that_times_out_after_the_run_exists_leaves_one_run_tracked_and_billed(tmp_path, runs):
    """`prime train` exits 1 with "Request timed out" after the platform made iter_0's training
    run. Settled as refused (before), the run trained and billed untracked while a retry
    submitted a second; looked up by its name, it is the arm's one run, polled and in the
    ledger."""
    r = driver([*SHORT, "--runs-dir", str(runs)],
               hosted_env(tmp_path, PRIME_DOUBLE_CREATE_TIMEOUT="-iter_0-train-:1"))
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    trains = [p for p in platform_runs(tmp_path) if "-iter_0-train-" in p["name"]]
    assert len(trains) == 1 and trains[0]["status"] == "COMPLETED"
    assert "but the platform made run" in (run_dir / "iter_0" / "train.log").read_text()
    ledger = json.loads((run_dir / "cost.json").read_text())["launches"]
    (entry,) = [e for e in ledger.values() if trains[0]["id"] in e["run_ids"]]
    # its dispatch answer lost, it is billed at the highest listed on-demand rate per GPU it
    # held (no rate at all before: only the usage view counted it)
    (bill,) = entry["runs"]
    assert bill["gpu_count"] and bill["rate_per_hour"] == pytest.approx(3.5 * bill["gpu_count"]) and entry["gpu_hour_usd"] > 0


def test_a_stop_that_finds_the_run_completed_leaves_it_to_be_fetched_not_retrained(tmp_path):
    """`prime train stop` on a run that completed meanwhile prints "reached a terminal state
    before the stop completed" and `Status: COMPLETED` (commands/rl.py:1798-1806@0.18.0). It was
    settled as stopped, so a resume submitted the arm again; now the record stays open and the
    resume's find re-attaches to the completed run."""
    import subprocess as sp

    from driver.backends.hosted.records import read_record, write_record
    from driver.backends.hosted.runner import HostedRunner
    from driver.run.model import TrainerProcess

    from driver.backends.hosted.cli import CLIError

    class StopSaysCompleted:
        def json(self, *args, timeout=0):   # the settle's reads (`train get`, `train usage`) fail
            raise CLIError("unavailable")

        def run(self, *args, timeout=0):
            assert args[:2] == ("train", "stop")
            return sp.CompletedProcess(args, 0, stdout="Run r1 reached a terminal state before the stop "
                                                       "completed\nStatus: COMPLETED\n", stderr="")

    (tmp_path / "run.json").write_text("{}")   # a run directory, whose ledger a settle writes
    out = tmp_path / "iter_1" / "prime_out"
    out.mkdir(parents=True)
    rec = {"name": "ssi-x-iter_1-train-abc", "kind": "train", "label": "train", "arm": "iter_1",
           "config": str(tmp_path / "hosted_train.toml"), "volume": "v", "run_ids": ["r1"],
           "resumed_from": [], "submitted_ts": 0.0, "settled": False, "log": str(tmp_path / "train.log"),
           "runs": {"r1": {"dispatched_at": 0.0, "placement": {}}}, "status": "RUNNING"}
    write_record(out, rec)
    runner = HostedRunner(StopSaysCompleted())
    tp = TrainerProcess(pid=0, create_time=0.0, output_dir=str(out), config_paths=[rec["config"]],
                        launched_ts=0.0, run_id="r1")
    runner.stop(tp)
    after = read_record(out)
    assert after["settled"] is False and after["run_ids"] == ["r1"]
    assert not (tmp_path / "train.rc").exists()   # no exit status: the launch has not ended for the driver
    found = runner.find(tp, out)
    assert found is not None and found.run_id == "r1"
    assert "completed before the stop reached it" in (tmp_path / "train.log").read_text()


def test_a_paused_run_whose_continuation_fails_to_start_is_in_the_ledger(tmp_path):
    """The platform paused a control's run and `prime train resume` failed: the controls phase
    records the control as failed and moves on, and no resume ever polls that launch again. Its
    paused run ran (and billed) all the same: billed before the continuation is asked for, it is
    in cost.json (it was not before)."""
    import subprocess as sp

    from driver.backends.hosted.records import write_record
    from driver.backends.hosted.runner import HostedRunner, platform_time
    from driver.backends.process import Limits
    from driver.errors import DriverError
    from driver.run.model import TrainerProcess

    class PausedResumeRefused:
        def json(self, *args, timeout=0):
            if args[:2] == ("train", "get"):
                return {"run": {"status": "PAUSED", "created_at": "2026-12-05T10:00:00Z",
                                "updated_at": "2026-12-05T10:20:00Z", "gpu_count": 2}}
            if args[:2] == ("train", "usage"):
                return {"total_cost_usd": 0.25}
            if args[:2] == ("train", "list"):
                return {"runs": []}
            if args[:2] == ("volumes", "ls"):   # the pause left its checkpoint
                return [{"path": "runs/r1/checkpoints/step_2/trainer/model.safetensors", "type": "file"}]
            raise AssertionError(args)

        def run(self, *args, timeout=0):
            assert args[:2] == ("train", "resume")
            return sp.CompletedProcess(args, 1, stdout="Error: HTTP 409: run cannot be resumed\n", stderr="")

    (tmp_path / "run.json").write_text("{}")
    out = tmp_path / "run_a_best_from_iter0" / "prime_out"
    out.mkdir(parents=True)
    rec = {"name": "ssi-x-run_a_best_from_iter0-train-abc", "kind": "train", "label": "train",
           "arm": "run_a_best_from_iter0", "config": str(tmp_path / "hosted_train.toml"), "volume": "v",
           "run_ids": ["r1"], "resumed_from": [], "submitted_ts": 0.0, "settled": False,
           "log": str(tmp_path / "train.log"),
           "runs": {"r1": {"dispatched_at": platform_time("2026-12-05T10:00:05Z"),
                           "placement": {"estimatedCostPerHour": 7.0,
                                                                 "pricePerGpuHour": 3.5}}}}
    write_record(out, rec)
    tp = TrainerProcess(pid=0, create_time=0.0, output_dir=str(out), config_paths=[rec["config"]],
                        launched_ts=0.0, run_id="r1", start_step=0, final_step=3)
    with pytest.raises(DriverError, match="train resume r1"):
        HostedRunner(PausedResumeRefused()).poll(
            tp, tmp_path / "train.log", tmp_path / "eval.jsonl", 0, limits=Limits(60, 60, 60),
            steps=3, progress=lambda: 0, interval=0.0, on_tick=None)
    (entry,) = json.loads((tmp_path / "cost.json").read_text())["launches"].values()
    assert entry["run_ids"] == ["r1"] and entry["outcome"] == "paused"
    assert entry["billed_s"] == 1200 and entry["cost_usd"] == pytest.approx(7.0 / 3)
