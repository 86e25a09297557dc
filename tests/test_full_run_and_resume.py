"""Full runs through the trainer double: an uninterrupted run, and the same run SIGKILLed at
many points across every phase and resumed each time. Both must end identically."""
from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import Counter

import pytest

from conftest import FAST, driver, driver_env, launches, run_dir_from

# iterations evaluate on 120 of the 200 eval (and validation) examples; controls on all 200
ARGS = ["run", "--max-iters", "3", "--seed", "7", *FAST, "--eval-examples", "120"]

# One kill per segment, in the order the run reaches them; each resume dies at the next one.
KILL_POINTS = [
    "phase:introspect:start",
    "write:run.json",              # between the temp file's fsync and its rename
    "write:hub_env.json",
    "train:after-launch",          # iter_0 trainer running, driver gone: resume re-attaches
    "train:poll",                  # while polling iter_0
    "evaluate:before-summary",     # iter_0 eval aggregated, summary not yet written
    "phase:gate:start",
    "weakness:before-teacher",     # iter_1
    "generator:running",           # the generator is left running: resume stops it, reruns
    "dataset:after-generator",
    "install:after-cleanup",
    "install:after-install",
    "train:before-launch",         # iter_1
    "evaluate:after-metrics",
    "write:metrics.json",
    "phase:dataset:end",           # iter_2
    "phase:run_a:start",
    "train:after-launch",          # run_a
    "phase:run_b:start",
    "phase:run_c:start",
    "phase:finalize:start",
    "write:scratchpad.md",
]


def outcome(run_dir):
    metrics = json.loads((run_dir / "metrics.json").read_text())
    best = json.loads((run_dir / "best_iter.json").read_text())
    best["env_dir"] = re.sub(r"_[0-9a-f]{6}$", "", best["env_dir"])  # the run's own package tag
    state = json.loads((run_dir / "run.json").read_text())
    scratch = (run_dir / "scratchpad.md").read_text()
    summary = scratch[scratch.index("## Final summary"):]
    return metrics, best, state["status"], summary


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    r = driver([*ARGS, "--runs-dir", str(tmp / "runs")], driver_env(tmp))
    assert r.returncode == 0, r.stderr
    return tmp, run_dir_from(r.stdout), r


def test_uninterrupted_run_completes_every_phase(reference):
    tmp, run_dir, r = reference
    metrics, best, status, summary = outcome(run_dir)
    assert status == "max_iters_reached"
    assert [m["iter"] for m in metrics["iters"]] == [0, 1, 2]
    assert {c["run"] for c in metrics["controls"]} == {"run_a", "run_b", "run_c"}
    assert best["best_iter"] in (1, 2)
    assert "<- BEST_ITER" in summary and "* recommended" in summary
    assert "run_a (best @iter0)" in r.stdout and "run_b (real+best @base)" in r.stdout
    assert "run_c (untargeted @iter0)" in r.stdout
    # the best iteration is chosen on the validation split, and reported on the test split
    iters = {m["iter"]: m for m in metrics["iters"]}
    assert best["chosen_on"] == "selection"
    assert best["selection_acc"] == max(iters[k]["selection_acc"] for k in (1, 2))
    assert all(m["n_eval"] == 120 and m["n_selection"] == 120 for m in metrics["iters"])
    assert all(c["n_eval"] == 200 and c["n_selection"] == 200 for c in metrics["controls"])
    assert re.search(r"run_a \(best @iter0\)\s+\d+\s+200 ", summary)   # n, per row
    # every arm's accuracy is printed as it finishes, with its interval and n
    assert re.search(r"\[iter_0\] evaluated: eval [0-9.]+% \[[0-9.]+, [0-9.]+\] \(n = 120\); "
                     r"selection [0-9.]+% \[[0-9.]+, [0-9.]+\] \(n = 120\)", r.stderr)
    assert re.search(r"\[run_c\] evaluated: eval [0-9.]+% \[[0-9.]+, [0-9.]+\] \(n = 200\)", r.stderr)
    # the trainer double stands in for prime-rl, and every place that shows numbers says so
    assert "trainer: a stand-in (" in r.stderr and "Trainer: a stand-in for prime-rl" in r.stdout
    assert "Trainer: a stand-in for prime-rl" in summary
    assert "val %" in summary and "played no part in choosing" in summary
    # the report lists each iteration's accuracy on both splits
    before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()}
    rep = driver(["report", str(run_dir)], driver_env(tmp))
    assert rep.returncode == 0, rep.stderr
    assert driver(["status", str(run_dir), "--json"], driver_env(tmp)).returncode == 0
    changed = {p.name for p in run_dir.rglob("*") if p.is_file() and before.get(p) != p.stat().st_mtime_ns}
    assert changed <= {"report.md", "report.json", "eval_accuracy.png", "train_reward.png"}, changed
    assert re.search(r"- iter_1: eval [0-9.]+, selection [0-9.]+, rows", (run_dir / "report.md").read_text())
    assert "**trainer: a stand-in**" in (run_dir / "report.md").read_text()
    st_out = driver(["status", str(run_dir)], driver_env(tmp)).stdout
    assert "trainer: stand-in" in st_out
    # control C: as many untargeted rows as the best dataset, from iter_0's checkpoint
    best_rows = (run_dir / best["dataset"]).read_text().count("\n")
    run_c = run_dir / "run_c_untargeted_from_iter0"
    c_rows = [json.loads(x) for x in (run_c / "dataset.jsonl").read_text().splitlines()]
    assert len(c_rows) == best_rows and {x["info"]["domain"] for x in c_rows} == {"untargeted"}
    assert "resume_step = 3" in (run_c / "rl.toml").read_text()
    assert f"iter_{best['best_iter']} (best) vs run_c (untargeted rows" in summary
    # every arm trained exactly once
    dirs = Counter(l["output_dir"] for l in launches(tmp))
    assert len(dirs) == 6 and set(dirs.values()) == {1}
    # every iteration resumes from iter_0's final step (the anchor)
    for n in (1, 2):
        assert "resume_step = 3" in (run_dir / f"iter_{n}" / "rl.toml").read_text()
    assert "resume_step" not in (run_dir / "run_b_combined_from_base" / "rl.toml").read_text()
    state = json.loads((run_dir / "run.json").read_text())
    assert state["end_ts"] >= state["start_ts"] and state["total_duration_s"] > 0
    # the gate's decontamination fingerprints came with introspection: hashes, no eval text
    fp = json.loads((run_dir / "eval_fingerprints.json").read_text())
    assert fp["eval_rows"] == 200 and fp["rows"]
    assert all(len(h) == 16 and int(h, 16) >= 0 for row in fp["rows"] for h in row)
    # the trainer double's backend has no probe: skipped, and said why
    probe = json.loads((run_dir / "iter_1" / "probe.json").read_text())
    assert "cannot sample outside a training run" in probe["skipped"]
    assert "probe skipped" in r.stderr
    gate_lines = json.loads((run_dir / "iter_1" / "gate_report.json").read_text())["lines"]
    assert {"name": "no overlap with the eval split (blind)", "ok": True, "detail": ""} in gate_lines


def test_sigkill_anywhere_then_resume_gives_the_same_result(reference, tmp_path):
    ref_tmp, ref_dir, _ = reference
    env = driver_env(tmp_path, DRIVER_FAULT_KILL_AT=KILL_POINTS[0])
    r = driver([*ARGS, "--runs-dir", str(tmp_path / "runs")], env)
    assert r.returncode == -signal.SIGKILL, r.stderr
    run_dir = run_dir_from(r.stdout)
    killed = 1
    for point in KILL_POINTS[1:]:
        # a trainer left running by a killed driver must still be running when the resumed
        # driver polls it ("train:poll"), so the arms launched just before a kill take a while
        slow = {"DOUBLE_STEP_SECONDS": "2"} if point == "train:after-launch" else {}
        r = driver(["resume", str(run_dir)], driver_env(tmp_path, DRIVER_FAULT_KILL_AT=point, **slow))
        assert r.returncode == -signal.SIGKILL, f"never reached {point}: {r.stderr[-2000:]}"
        killed += 1
    r = driver(["resume", str(run_dir)], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert killed >= 20
    assert outcome(run_dir) == outcome(ref_dir)
    # no arm was ever trained twice, although the driver died around every launch
    dirs = Counter(l["output_dir"] for l in launches(tmp_path))
    assert len(dirs) == 6 and set(dirs.values()) == {1}, dirs


def test_external_sigkill_during_training_reattaches(tmp_path):
    env = driver_env(tmp_path, DOUBLE_STEP_SECONDS="1.5")
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "driver.cli", "run", "--max-iters", "1",
                             "--runs-dir", str(tmp_path / "runs"), *FAST], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not launches(tmp_path):
        time.sleep(0.2)
    assert launches(tmp_path), "trainer never launched"
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate()
    run_dir = run_dir_from(out)
    state = json.loads((run_dir / "run.json").read_text())
    assert state["phase"] == "baseline" and state["trainer"] is not None
    r = driver(["resume", str(run_dir)], env)
    assert r.returncode == 0, r.stderr
    assert "re-attached" in r.stderr
    assert len(launches(tmp_path)) == 1  # iter_0 trained once; max_iters 1 leaves no controls


def test_an_env_without_a_selection_split_reports_holm_and_resamples_train_rows_for_control_c(tmp_path):
    """model_router has one eval split and no untargeted generator: the summary says the best
    is chosen on the examples it is reported on, adjusts p for the iterations compared, and
    control C trains on as many resampled hub train rows as the best dataset has."""
    runs = tmp_path / "runs"
    r = driver(["run", "--dataset", "model_router", "--max-iters", "3", *FAST[:4],
                "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    hub = json.loads((run_dir / "hub_env.json").read_text())
    assert hub["selection"] is None
    metrics, best, _, summary = outcome(run_dir)
    assert best["chosen_on"] == "eval" and all("selection_acc" not in m for m in metrics["iters"])
    assert "Holm p" in summary and "chosen on the same examples its lift is reported on" in summary
    assert "val %" not in summary
    c_rows = (run_dir / "run_c_untargeted_from_iter0" / "dataset.jsonl").read_text().splitlines()
    assert len(c_rows) == (run_dir / best["dataset"]).read_text().count("\n")
    assert f"[run_c] {len(c_rows)} untargeted rows from a resample of the hub env's train rows" in r.stderr
    # every resampled row is a hub train row (never an eval row), and no row is repeated while
    # the train split still has unused ones
    import verifiers as vf
    hub_env = vf.load_environment("model_router")
    train_q = {row["question"] for row in hub_env.get_dataset()}
    eval_q = {row["question"] for row in hub_env.get_eval_dataset()}
    got = [json.loads(x)["question"] for x in c_rows]
    assert set(got) <= train_q and not set(got) & eval_q
    assert len(set(got)) == min(len(got), len(train_q))
