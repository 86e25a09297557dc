"""`driver run --backend hosted`: the whole loop on Prime Intellect's Hosted Training through the
`prime` CLI, against tests/prime_double.py (the CLI and the platform, built from prime 0.18.0's
source) on PATH. Everything here is verified through that double only: no test reaches the
live service."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from conftest import FAST, ROOT, driver, driver_env, run_dir_from
from driver.dialects import get

PRIME_BIN = ROOT / "tests" / "prime_bin"
sys.path.insert(0, str(ROOT / "tests"))
from prime_double import cost_of  # noqa: E402

STEPS, BATCH = 3, 256
ARM_COST = cost_of(STEPS * BATCH) + cost_of(1 * BATCH)   # its training run and its one-step eval run
# --max-cost 1.5 arms: the gate after iter_0 lets iter_1 run, the gate after it ends the loop by
# cost, though --max-iters 3 would allow iter_2
ARGS = ["run", "--backend", "hosted", "--max-iters", "3", "--seed", "7", *FAST, "--eval-examples", "120",
        "--max-cost", f"{1.5 * ARM_COST:.4f}", "--hosted-volume", "ssi-test"]
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
                "DRIVER_HOSTED_POLL_S": "0.3"})   # each poll is two CLI calls
    env.update({k: str(v) for k, v in extra.items()})
    return env


def platform_runs(tmp_path: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "platform" / "runs").glob("*.json"))]


def submissions(tmp_path: Path) -> Counter:
    """(arm, kind) -> runs submitted, from the names the driver gives them."""
    out: Counter = Counter()
    for r in platform_runs(tmp_path):
        m = re.fullmatch(r"ssi-[0-9a-f]{6}-(.+)-(train|eval)-[0-9a-f]{6}", r["name"] or "")
        assert m, r["name"]
        out[(m.group(1), m.group(2))] += 1
    return out


def calls(tmp_path: Path) -> list[list[str]]:
    p = tmp_path / "platform" / "calls.jsonl"
    return [json.loads(x)["argv"] for x in p.read_text().splitlines()] if p.exists() else []


def outcome(run_dir: Path):
    """What a run ended with, its per-run package tags taken out."""
    untag = lambda text: re.sub(r"_[0-9a-f]{6}\b", "", text)  # noqa: E731
    metrics = json.loads(untag((run_dir / "metrics.json").read_text()))
    best = json.loads(untag((run_dir / "best_iter.json").read_text()))
    scratch = (run_dir / "scratchpad.md").read_text()
    return metrics, best, json.loads((run_dir / "run.json").read_text())["status"], \
        untag(scratch[scratch.index("## Final summary"):])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hosted")
    r = driver([*ARGS, "--runs-dir", str(tmp / "runs")], hosted_env(tmp))
    assert r.returncode == 0, r.stderr[-4000:]
    return tmp, run_dir_from(r.stdout), r


def test_a_hosted_run_goes_from_introspection_to_finalize_with_three_controls(reference):
    tmp, run_dir, r = reference
    state = json.loads((run_dir / "run.json").read_text())
    assert (state["backend"], state["dialect"], state["model"]) == ("hosted", "current", "Qwen/Qwen3-4B-Instruct-2507")
    assert "backend: hosted (prime train on Prime Intellect's Hosted Training (prime CLI 0.18.0" in r.stderr
    assert "cost estimate: $3.50/GPU-hour on demand (H200_141GB)" in r.stderr
    metrics, best, status, summary = outcome(run_dir)
    # --max-cost ended the loop at the gate, after iter_1, before --max-iters would have
    assert status == "cost_exhausted" and state["trainer"] is None
    assert "[gate] loop ends: cost_exhausted (after iteration 1)" in r.stderr
    assert [m["iter"] for m in metrics["iters"]] == [0, 1]
    assert {c["run"] for c in metrics["controls"]} == {"run_a", "run_b", "run_c"}
    assert all(m["n_eval"] == 120 for m in metrics["iters"]) and all(c["n_eval"] == 200 for c in metrics["controls"])
    assert best["chosen_on"] == "selection" and "<- BEST_ITER" in summary
    # every arm: one training run and one eval run submitted, never more
    assert submissions(tmp) == {(arm, kind): 1 for arm in ARMS for kind in ("train", "eval")}
    assert all(run["status"] == "COMPLETED" for run in platform_runs(tmp))
    # what each arm's runs cost (`prime train usage`) is in metrics.json and the summary
    for m in metrics["iters"] + metrics["controls"]:
        assert m["cost_usd"] == pytest.approx(ARM_COST)
    ledger = json.loads((run_dir / "cost.json").read_text())["launches"]
    assert sum(e["cost_usd"] for e in ledger.values()) == pytest.approx(5 * ARM_COST)
    assert "cost $" in r.stdout and f"Cost: ${5 * ARM_COST:.2f} spent of --max-cost" in r.stdout
    # each generated env was pushed as a private v1 env before its run; its Hub id is recorded
    hub = {p.stem: json.loads(p.read_text()) for p in (tmp / "platform" / "hub" / "alice").glob("*.json")}
    assert len(hub) == 4 and all(h["visibility"] == "PRIVATE" and [v["runtime"] for v in h["versions"]] == ["v1"]
                                 for h in hub.values())
    for arm in ARMS[1:]:
        installed = json.loads((run_dir / arm / "env_installed.json").read_text())
        assert installed["hub"]["ref"] == f"alice/{installed['package']}@0.1.0"
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
        assert train.get("resume") == ({"dir": f"/volume/runs/{iter0_run}/run/checkpoints/step_3"} if forks else None)
        ids = [s["env"]["taskset"]["id"] for s in train["orchestrator"]["train"]["source"]]
        assert all("/" in i for i in ids), ids    # Hub ids: the platform installs them
        # the final-weights eval is a one-step run from the arm's final broadcast on the volume
        ev = tomllib.loads((d / "hosted_eval.toml").read_text())
        own = next(r for r in platform_runs(tmp) if f"-{arm}-train-" in r["name"])["id"]
        final = 6 if forks else 3
        assert ev["model"] == {"name": f"/volume/runs/{own}/run/broadcasts/step_{final}"}
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
            assert (tmp / "platform" / "volumes" / "ssi-test" / remote["path"]).is_dir()
    # the teacher read train traces as flat rows; the eval summaries hold numbers only
    summary_json = json.loads((run_dir / "iter_1" / "eval_summary.json").read_text())
    assert summary_json["train_diagnose"]["groups"] > 0 and summary_json["cost_usd"] == pytest.approx(ARM_COST)


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


def test_preflight_refuses_a_model_hosted_training_does_not_list(tmp_path, runs):
    r = driver(["run", "--backend", "hosted", "--model", "Qwen/Qwen3-0.6B", "--runs-dir", str(runs), *FAST],
               hosted_env(tmp_path))
    _refused(r, runs, "--model Qwen/Qwen3-0.6B is not a model Hosted Training trains",
             "Qwen/Qwen3-4B-Instruct-2507")


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
    cfg.write_text("max_steps = 1\n[trainer]\n[orchestrator]\n")
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
    bad = tmp_path / "bad.toml"
    bad.write_text("max_steps = 1\n[orchestrator]\nbogus = 1\n[trainer]\n")
    r = _prime(tmp_path, "--plain", "train", str(bad), "--yes", "-o", "json")
    assert r.returncode == 1 and "  - config.orchestrator.bogus: Extra inputs are not permitted" in r.stdout
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


SHORT = ["run", "--backend", "hosted", "--max-iters", "1", "--seed", "3", *FAST, "--eval-examples", "60"]


@pytest.fixture(scope="module")
def faults(tmp_path_factory):
    """iter_0 only: the platform pauses its training run at step 2, then fails its eval run;
    the driver stops, and `driver resume` finishes the run."""
    tmp = tmp_path_factory.mktemp("hosted-faults")
    r1 = driver([*SHORT, "--runs-dir", str(tmp / "runs")],
                hosted_env(tmp, PRIME_DOUBLE_PAUSE="-iter_0-train-:2",
                           PRIME_DOUBLE_FAIL="-iter_0-eval-:CUDA error: out of memory on rank 0"))
    run_dir = run_dir_from(r1.stdout)
    failed_state = json.loads((run_dir / "run.json").read_text())
    r2 = driver(["resume", str(run_dir)], hosted_env(tmp))
    assert r2.returncode == 0, r2.stderr[-3000:]
    return tmp, run_dir, r1, failed_state


def test_a_run_the_platform_fails_is_recorded_with_its_reason_and_resume_submits_it_afresh(faults):
    tmp, run_dir, r1, failed = faults
    assert r1.returncode == 1, r1.stderr[-2000:]
    assert failed["status"] == "failed" and "CUDA error: out of memory on rank 0" in failed["reason"]
    assert "FAILED: CUDA error: out of memory on rank 0" in (run_dir / "iter_0" / "final_eval.log.failed-1").read_text()
    assert submissions(tmp)[("iter_0", "eval")] == 2     # the failed one, then one afresh
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["iters"][0]["eval_acc"] is not None
    # the failed run billed nothing (the double fails it before it trains)
    assert metrics["iters"][0]["cost_usd"] == pytest.approx(ARM_COST)


def test_a_paused_run_is_continued_from_its_checkpoint_with_resume_from(faults):
    tmp, run_dir, _, _ = faults
    paused, resumed = [p for p in platform_runs(tmp) if "-iter_0-train-" in p["name"]]
    assert (paused["status"], resumed["status"], resumed["resume_from"]) == ("PAUSED", "COMPLETED", paused["id"])
    assert submissions(tmp)[("iter_0", "train")] == 2
    record = json.loads((run_dir / "iter_0" / "prime_out" / ".hosted.json").read_text())
    assert record["run_ids"] == [paused["id"], resumed["id"]] and record["resumed_from"] == [paused["id"]]
    assert any(c[:2] == ["train", record["config"]] and c[-2:] == ["--resume-from", paused["id"]]
               for c in calls(tmp))
    # steps 1-2 come from the paused run, step 3 from the one that continued it
    dialect = get("current")
    assert all(dialect.train_file(run_dir / "iter_0" / "prime_out", s).exists() for s in (1, 2, 3))
    remote = json.loads((dialect.weights_dir(run_dir / "iter_0" / "prime_out", 3) / "REMOTE.json").read_text())
    assert remote["run_id"] == resumed["id"]


@pytest.mark.extended
def test_sigkill_anywhere_on_the_hosted_backend_never_submits_a_second_run(reference, tmp_path):
    _, ref_dir, _ = reference
    r = driver([*ARGS, "--runs-dir", str(tmp_path / "runs")],
               hosted_env(tmp_path, DRIVER_FAULT_KILL_AT=KILL_POINTS[0]))
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    run_dir = run_dir_from(r.stdout)
    for point in KILL_POINTS[1:]:
        r = driver(["resume", str(run_dir)], hosted_env(tmp_path, DRIVER_FAULT_KILL_AT=point))
        assert r.returncode == -signal.SIGKILL, f"never reached {point}: {r.stderr[-2000:]}"
    r = driver(["resume", str(run_dir)], hosted_env(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert outcome(run_dir) == outcome(ref_dir)
    assert submissions(tmp_path) == {(arm, kind): 1 for arm in ARMS for kind in ("train", "eval")}
    # iter_1's env was pushed twice (the second answered "already exists"), every other once
    pushes = Counter(Path(c[c.index("-p") + 1]).name.rsplit("_", 1)[0] for c in calls(tmp_path)
                     if c[:2] == ["env", "push"])
    assert pushes == {"stock_arithmetic_iter_1": 2, "stock_arithmetic_run_a": 1,
                      "stock_arithmetic_run_b": 1, "stock_arithmetic_run_c": 1}
