"""Full runs through the trainer double: an uninterrupted run, and the same run SIGKILLed at
many points across every phase and resumed each time. Both must end identically.

The uninterrupted run is made once (the module's `reference` fixture) and each test below reads
one behaviour off it; the expected values are derived from the run's own metrics.json."""
from __future__ import annotations

import json
import os
import re
import signal
import time
import tomllib
from collections import Counter
from itertools import pairwise

import pytest

from conftest import FAST, driver, driver_env, launches, run_dir_from

MAX_ITERS = 3
EVAL_EXAMPLES = 120   # of the hub env's 200 eval (and validation) examples
EVAL_SPLIT = 200
# iterations evaluate on 120 of the 200 eval (and validation) examples; controls on all 200
ARGS = ["run", "--max-iters", str(MAX_ITERS), "--seed", "7", *FAST, "--eval-examples", str(EVAL_EXAMPLES)]

# One kill per segment, in the order the run reaches them; each resume dies at the next one.
# Together they interrupt every phase the run goes through (asserted below).
KILL_POINTS = [
    "phase:introspect:start",
    "write:run.json",              # between the temp file's fsync and its rename
    "write:hub_env.json",
    "train:after-launch",          # iter_0 trainer running, driver gone: resume re-attaches
    "train:poll",                  # while polling iter_0
    "evaluate:before-summary",     # iter_0 eval aggregated, summary not yet written
    "write:eval_rollouts.jsonl",   # iter_0 measured, its eval file being sealed
    "phase:gate:start",
    "weakness:before-teacher",     # iter_1
    "generator:running",           # the generator is left running: resume stops it, reruns
    "dataset:after-generator",
    "install:after-cleanup",
    "install:after-install",
    "phase:probe:start",           # iter_1
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

# each arm's directory, and its row label in the summary table
ARM_DIRS = {"run_a": "run_a_best_from_iter0", "run_b": "run_b_combined_from_base",
            "run_c": "run_c_untargeted_from_iter0"}
LABELS = {"iter_0": "iter_0 (real)", "run_a": "run_a (best @iter0)",
          "run_b": "run_b (real+best @base)", "run_c": "run_c (untargeted @iter0)"}


def outcome(run_dir):
    metrics = json.loads((run_dir / "metrics.json").read_text())
    best = json.loads((run_dir / "best_iter.json").read_text())
    best["env_dir"] = re.sub(r"_[0-9a-f]{6}$", "", best["env_dir"])  # the run's own package tag
    state = json.loads((run_dir / "run.json").read_text())
    scratch = (run_dir / "scratchpad.md").read_text()
    summary = scratch[scratch.index("## Final summary"):]
    return metrics, best, state["status"], summary


def score(entry: dict) -> float:
    """What the driver chooses on: the selection split's accuracy, else the eval split's."""
    return entry["selection_acc"] if entry.get("selection_acc") is not None else entry["eval_acc"]


def expected_best_iter(metrics: dict) -> int:
    """The iteration (>= 1) with the highest selection score; ties go to the earliest."""
    return max((m for m in metrics["iters"] if m["iter"] >= 1),
               key=lambda m: (score(m), -m["iter"]))["iter"]


def arms(metrics: dict) -> list[tuple[str, dict]]:
    """Every arm in the summary table's order: the iterations, then the controls by name."""
    return ([(f"iter_{m['iter']}", m) for m in sorted(metrics["iters"], key=lambda m: m["iter"])]
            + [(c["run"], c) for c in sorted(metrics["controls"], key=lambda c: c["run"])])


def arm_dir(run_dir, arm: str):
    return run_dir / ARM_DIRS.get(arm, arm)


def resume_step(rl_toml) -> int | None:
    return tomllib.loads(rl_toml.read_text()).get("ckpt", {}).get("resume_step")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ref")
    # each rank takes the trainer double's own teardown on SIGTERM (the suite's default is none)
    env = driver_env(tmp, DOUBLE_RANK_TEARDOWN_SECONDS="0.3")
    r = driver([*ARGS, "--runs-dir", str(tmp / "runs")], env)
    assert r.returncode == 0, r.stderr
    return tmp, run_dir_from(r.stdout), r


@pytest.fixture(scope="module")
def reported(reference):
    """`report`, `status --json` and `status` on the finished run, once; and which of the run
    directory's files they changed."""
    tmp, run_dir, _ = reference
    before = {p: p.stat().st_mtime_ns for p in run_dir.rglob("*") if p.is_file()}
    rep = driver(["report", str(run_dir)], driver_env(tmp))
    status_json = driver(["status", str(run_dir), "--json"], driver_env(tmp))
    status = driver(["status", str(run_dir)], driver_env(tmp))
    changed = {p.name for p in run_dir.rglob("*") if p.is_file() and before.get(p) != p.stat().st_mtime_ns}
    return rep, status_json, status, changed


def test_the_run_ends_with_max_iters_reached(reference):
    _, run_dir, r = reference
    _, _, status, _ = outcome(run_dir)
    assert status == "max_iters_reached"
    assert f"[gate] loop ends: max_iters_reached (after iteration {MAX_ITERS - 1})" in r.stderr


def test_every_phase_is_recorded_in_run_json_history_in_order(reference):
    _, run_dir, _ = reference
    state = json.loads((run_dir / "run.json").read_text())
    loop = ["weakness", "dataset", "environment", "probe", "train", "evaluate"]
    expected = ([("introspect", None), ("baseline", None), ("gate", None)]
                + [step for n in range(1, MAX_ITERS) for step in [(p, n) for p in loop] + [("gate", None)]]
                + [("run_a", None), ("run_b", None), ("run_c", None), ("finalize", None)])
    h = state["history"]
    assert [(x["phase"], x["iteration"]) for x in h] == expected
    # each phase ends in the next one, the last in "done"; none overlaps the next
    assert [x["outcome"] for x in h] == [x["phase"] for x in h[1:]] + ["done"]
    assert state["phase"] == "done"
    assert all(x["start_ts"] <= x["end_ts"] <= y["start_ts"] for x, y in pairwise(h))
    assert h[-1]["start_ts"] <= h[-1]["end_ts"]


def test_run_json_records_the_runs_start_end_and_duration(reference):
    _, run_dir, _ = reference
    state = json.loads((run_dir / "run.json").read_text())
    assert state["end_ts"] >= state["start_ts"] and state["total_duration_s"] > 0
    assert state["total_duration_s"] == pytest.approx(state["end_ts"] - state["start_ts"])
    assert state["start_ts"] <= state["history"][0]["start_ts"]
    assert state["history"][-1]["start_ts"] <= state["end_ts"]   # the end is stamped by finalize


def test_metrics_json_has_one_entry_per_iteration_and_control(reference):
    _, run_dir, _ = reference
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert [m["iter"] for m in metrics["iters"]] == list(range(MAX_ITERS))
    assert sorted(c["run"] for c in metrics["controls"]) == ["run_a", "run_b", "run_c"]


def test_every_arm_controls_included_is_evaluated_on_the_same_eval_examples(reference):
    """Each row's n is the n of its lift: iterations and controls alike on --eval-examples of
    each split; run B's one row count, the hub's train rows and its own, in metrics.json."""
    _, run_dir, _ = reference
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert EVAL_EXAMPLES < EVAL_SPLIT
    assert all(m["n_eval"] == EVAL_EXAMPLES and m["n_selection"] == EVAL_EXAMPLES
               for m in metrics["iters"] + metrics["controls"])
    run_b = next(c for c in metrics["controls"] if c["run"] == "run_b")
    assert run_b["rows"] == sum(run_b["rows_from"].values()) and run_b["rows_from"]["hub_train"] == 1000


def test_the_best_iteration_is_the_one_with_the_highest_selection_accuracy(reference):
    """Chosen on the validation (selection) split, ties to the earliest, and reported on the
    eval split; best_iter.json names its artifacts, and every control records the same one."""
    _, run_dir, _ = reference
    metrics, best, _, _ = outcome(run_dir)
    iters = {m["iter"]: m for m in metrics["iters"]}
    b = expected_best_iter(metrics)
    assert best["best_iter"] == b
    assert best["chosen_on"] == "selection"
    assert best["selection_acc"] == max(iters[k]["selection_acc"] for k in range(1, MAX_ITERS))
    assert best["eval_acc"] == iters[b]["eval_acc"]
    assert (best["dataset"], best["rl_toml"], best["env_dir"]) == (
        f"iter_{b}/dataset.jsonl", f"iter_{b}/rl.toml", f"iter_{b}/stock_arithmetic_iter_{b}")
    assert {c["run"]: c["best_iter"] for c in metrics["controls"]} == {"run_a": b, "run_b": b, "run_c": b}


def test_the_summary_table_marks_the_best_iteration_and_the_recommended_arm(reference):
    """<- BEST_ITER on the best iteration's row alone; * recommended on one row alone, the arm the
    summary's one-sentence recommendation names (the rule itself: tests/test_recommendation.py)."""
    _, run_dir, _ = reference
    metrics, _, _, summary = outcome(run_dir)
    lines = summary.splitlines()
    best_rows = [l for l in lines if "<- BEST_ITER" in l]
    assert len(best_rows) == 1 and best_rows[0].startswith(f"iter_{expected_best_iter(metrics)} ")
    [sentence] = [l for l in lines if l.startswith("Recommended checkpoint: ")]
    arm = sentence.split()[2]
    rec_rows = [l for l in lines if "* recommended" in l]
    assert len(rec_rows) == 1 and rec_rows[0].startswith(LABELS.get(arm, arm) + " ")
    assert ("beats" in sentence) == (arm != "iter_0")


def test_the_summary_table_has_a_row_per_arm_with_its_rows_and_n(reference):
    _, run_dir, _ = reference
    metrics, _, _, summary = outcome(run_dir)
    assert re.search(r"run_a \(best @iter0\)\s+\d+\s+120 ", summary)
    for arm, entry in arms(metrics):
        label = LABELS.get(arm, arm)
        # one row count per arm, the table's the same as metrics.json's (run_b: the hub's rows
        # and its own, both counted there)
        rows = str(entry['rows'])
        assert re.search(rf"^{re.escape(label)}\s+{rows}\s+{entry['n_eval']}\s",
                         summary, re.MULTILINE), arm


def test_the_summary_says_the_eval_split_played_no_part_in_choosing(reference):
    _, run_dir, _ = reference
    _, _, _, summary = outcome(run_dir)
    assert "val %" in summary and "played no part in choosing" in summary
    assert f"val %: the hub env's selection split (n = {EVAL_EXAMPLES})" in summary


def test_the_summary_compares_the_best_iteration_with_control_c(reference):
    _, run_dir, _ = reference
    metrics, best, _, summary = outcome(run_dir)
    assert f"iter_{best['best_iter']} (best) vs run_c (untargeted rows" in summary
    # beside it, the run's own noise: run A against the iteration it replays
    noise = metrics["replay_noise"]
    assert noise["measured"] and noise["replayed"] == f"iter_{best['best_iter']}"
    assert f"Replay noise: run_a (iter_{best['best_iter']}'s rows trained again" in summary
    # control C held to the teacher's gate on the lines not about aim, and the summary says how
    # its rows were made and where they differ (none here: the family's untargeted rows)
    run_c = next(c for c in metrics["controls"] if c["run"] == "run_c")
    gate = json.loads((run_dir / "run_c_untargeted_from_iter0" / "gate_report.json").read_text())
    assert {ln["name"] for ln in gate["lines"]} >= {"no clone pairs", "rows well-formed"}
    assert run_c["gate_differs"] == [f"{ln['name']}: {ln['detail']}"[:160] if ln["detail"] else ln["name"]
                                     for ln in gate["lines"] if not ln["ok"]]
    assert f"run_c's rows: {run_c['rows_made']}." in summary and "untargeted rows from" in run_c["rows_made"]
    assert ("they pass every one" in summary) == (run_c["gate_differs"] == [])


def test_stdout_prints_the_summary_table(reference):
    _, run_dir, r = reference
    _, _, _, summary = outcome(run_dir)
    assert "run_a (best @iter0)" in r.stdout and "run_b (real+best @base)" in r.stdout
    assert "run_c (untargeted @iter0)" in r.stdout
    table = summary.split("```\n")[1]   # the fenced table in the scratchpad
    assert table in r.stdout


def test_every_arms_accuracy_is_printed_as_it_finishes_with_its_interval_and_n(reference):
    _, run_dir, r = reference
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert re.search(r"\[iter_0\] evaluated: eval [0-9.]+% \[[0-9.]+, [0-9.]+\] \(n = 120\); "
                     r"selection [0-9.]+% \[[0-9.]+, [0-9.]+\] \(n = 120\)", r.stderr)
    assert re.search(r"\[run_c\] evaluated: eval [0-9.]+% \[[0-9.]+, [0-9.]+\] \(n = 120\)", r.stderr)
    ci = r"\[[0-9.]+, [0-9.]+\]"
    for arm, e in arms(metrics):
        assert re.search(rf"\[{arm}\] evaluated: eval {100 * e['eval_acc']:.1f}% {ci} \(n = {e['n_eval']}\); "
                         rf"selection {100 * e['selection_acc']:.1f}% {ci} \(n = {e['n_selection']}\)\n",
                         r.stderr), arm


def test_every_place_that_shows_numbers_says_the_trainer_is_a_stand_in(reference, reported):
    _, run_dir, r = reference
    _, _, _, summary = outcome(run_dir)
    rep, _, status, _ = reported
    assert "trainer: a stand-in (" in r.stderr and "Trainer: a stand-in for prime-rl" in r.stdout
    assert "Trainer: a stand-in for prime-rl" in summary
    assert rep.returncode == 0, rep.stderr
    assert "**trainer: a stand-in**" in (run_dir / "report.md").read_text()
    assert status.returncode == 0, status.stderr
    assert "trainer: stand-in" in status.stdout


def test_report_and_status_change_nothing_but_the_report_files(reported):
    rep, status_json, status, changed = reported
    assert rep.returncode == 0, rep.stderr
    assert status_json.returncode == 0, status_json.stderr
    assert status.returncode == 0, status.stderr
    assert changed <= {"report.md", "report.json", "eval_accuracy.png", "train_reward.png"}, changed


def test_the_report_lists_each_iterations_accuracy_on_both_splits(reference, reported):
    _, run_dir, _ = reference
    rep, _, _, _ = reported
    assert rep.returncode == 0, rep.stderr
    metrics = json.loads((run_dir / "metrics.json").read_text())
    text = (run_dir / "report.md").read_text()
    assert re.search(r"- iter_1: eval [0-9.]+, selection [0-9.]+, rows", text)
    for m in metrics["iters"]:
        assert (f"- iter_{m['iter']}: eval {m['eval_acc']:.4f}, selection {m['selection_acc']:.4f}, "
                f"rows {m['rows']}") in text, m["iter"]


def test_control_c_trains_as_many_untargeted_rows_as_the_best_dataset_from_iter_0(reference):
    _, run_dir, _ = reference
    metrics, best, _, _ = outcome(run_dir)
    best_rows = (run_dir / best["dataset"]).read_text().count("\n")
    run_c = run_dir / ARM_DIRS["run_c"]
    c_rows = [json.loads(x) for x in (run_c / "dataset.jsonl").read_text().splitlines()]
    assert len(c_rows) == best_rows and {x["info"]["domain"] for x in c_rows} == {"untargeted"}
    assert resume_step(run_c / "rl.toml") == metrics["iters"][0]["final_step"]


def test_every_arm_trains_exactly_once(reference):
    tmp, run_dir, _ = reference
    metrics = json.loads((run_dir / "metrics.json").read_text())
    expected = {str(arm_dir(run_dir, arm) / "prime_out"): 1 for arm, _ in arms(metrics)}
    expected.update({str(run_dir / f"iter_{n}" / "probe" / "prime_out"): 1 for n in range(1, MAX_ITERS)})
    assert len(expected) == MAX_ITERS + 3 + MAX_ITERS - 1
    assert Counter(l["output_dir"] for l in launches(tmp)) == expected


def test_iterations_and_controls_from_iter_0_resume_from_its_final_step_and_run_b_from_base(reference):
    """iter_0's final checkpoint is the anchor: every iteration, run_a and run_c resume from it;
    run_b starts from the base model."""
    _, run_dir, _ = reference
    metrics = json.loads((run_dir / "metrics.json").read_text())
    anchor = metrics["iters"][0]["final_step"]
    assert anchor == int(FAST[FAST.index("--steps-per-run") + 1])
    for n in range(1, MAX_ITERS):
        assert resume_step(run_dir / f"iter_{n}" / "rl.toml") == anchor, n
    for arm in ("run_a", "run_c"):
        assert resume_step(arm_dir(run_dir, arm) / "rl.toml") == anchor, arm
    assert "resume_step" not in (run_dir / ARM_DIRS["run_b"] / "rl.toml").read_text()


def test_the_eval_fingerprints_are_hashes_with_no_eval_text(reference):
    """The gate's decontamination fingerprints came with introspection: one list of 16-hex-digit
    hashes per eval row, and nothing else."""
    _, run_dir, _ = reference
    fp = json.loads((run_dir / "eval_fingerprints.json").read_text())
    assert fp["eval_rows"] == EVAL_SPLIT and len(fp["rows"]) == fp["eval_rows"]
    assert set(fp) == {"n", "eval_rows", "rows"} and isinstance(fp["n"], int)
    assert all(row for row in fp["rows"])
    assert all(re.fullmatch(r"[0-9a-f]{16}", h) for row in fp["rows"] for h in row)


def test_the_gate_checks_each_dataset_blind_against_the_eval_fingerprints(reference):
    _, run_dir, _ = reference
    for n in range(1, MAX_ITERS):
        gate_lines = json.loads((run_dir / f"iter_{n}" / "gate_report.json").read_text())["lines"]
        assert {"name": "no overlap with the eval split (blind)", "ok": True, "detail": ""} in gate_lines, n


def test_the_probe_runs_as_a_one_step_launch_of_the_trainer_and_reports_its_live_fraction(reference):
    _, run_dir, r = reference
    assert "probe skipped" not in r.stderr
    for n in range(1, MAX_ITERS):
        probe = json.loads((run_dir / f"iter_{n}" / "probe.json").read_text())
        assert "skipped" not in probe and probe["passed"]
        assert (f"[iter_{n}] probe: live fraction {probe['live_fraction']:.2f} on "
                f"{probe['prompts']} prompts x {probe['k']}\n") in r.stderr, n


def test_every_arm_trains_each_of_its_steps_as_classic_prime_rl_files_them(reference):
    """prime-rl (classic) files the batch of trainer step s under rollouts/step_{s-1}: an arm
    resumed at F writes train rows to step_F .. step_{M-1} and its final eval alone to step_M.
    Every arm's train reward covers each of its steps, and nothing else."""
    from driver.dialects import get

    _, run_dir, _ = reference
    d = get("classic")
    state = json.loads((run_dir / "run.json").read_text())
    f = state["iter_0_step"]
    for arm, start in [("iter_0", 0), *((f"iter_{n}", f) for n in range(1, MAX_ITERS)),
                       ("run_a_best_from_iter0", f), ("run_b_combined_from_base", 0),
                       ("run_c_untargeted_from_iter0", f)]:
        summary = json.loads((run_dir / arm / "eval_summary.json").read_text())
        final = summary["final_step"]
        assert sorted(map(int, summary["train_reward_by_step"])) == list(range(start + 1, final + 1)), arm
        out = run_dir / arm / "prime_out"
        assert d.train_steps(out) == list(range(start, final)), arm
        assert d.eval_file(out, final).exists() and not d.train_file(out, final).exists(), arm


def test_every_eval_file_holds_numbers_only_once_its_arm_is_evaluated(reference, reported):
    """The eval seal, after a whole run with its controls, its report and status: no eval or
    selection problem is in any file under the run directory, and each arm's eval file (the eval
    and the selection split's rows) holds sealed rows only, one per row measured, and reads back
    to the arm's own numbers."""
    from tests_support import assert_every_eval_file_is_sealed, files_holding, stock_arithmetic_eval_prompts

    _, run_dir, _ = reference
    assert files_holding(run_dir, stock_arithmetic_eval_prompts()) == []   # in no file at all
    found = assert_every_eval_file_is_sealed(run_dir, "classic")
    assert {p.relative_to(run_dir).parts[0] for p in found} == {arm_dir(run_dir, a).name for a in
                                                               ["iter_0", "iter_1", "iter_2", *ARM_DIRS]}
    metrics = json.loads((run_dir / "metrics.json").read_text())
    for arm, m in arms(metrics):
        rows = [json.loads(x) for p in found if p.is_relative_to(arm_dir(run_dir, arm))
                for x in p.read_text().splitlines()]
        assert len(rows) == m["n_eval"] + m["n_selection"], arm
        assert {k for r in rows for k in r} == {"example_id", "error", "reward", "metrics"}, arm


# every kill point in turn, each a whole run resumed (about 3 min): the extended command, as its
# current-dialect twin; test_external_sigkill_during_training_reattaches stays in the main suite
@pytest.mark.extended
def test_sigkill_anywhere_then_resume_gives_the_same_result(reference, tmp_path):
    ref_tmp, ref_dir, _ = reference
    env = driver_env(tmp_path, DRIVER_FAULT_KILL_AT=KILL_POINTS[0])
    r = driver([*ARGS, "--runs-dir", str(tmp_path / "runs")], env)
    assert r.returncode == -signal.SIGKILL, r.stderr
    run_dir = run_dir_from(r.stdout)

    def phase_now():   # the phase run.json records: the one the driver died in
        return json.loads((run_dir / "run.json").read_text())["phase"]

    killed_at = [(KILL_POINTS[0], phase_now())]
    for point in KILL_POINTS[1:]:
        # a trainer left running by a killed driver must still be running when the resumed
        # driver polls it ("train:poll"), so the arms launched just before a kill take a while
        slow = {"DOUBLE_STEP_SECONDS": "2"} if point == "train:after-launch" else {}
        r = driver(["resume", str(run_dir)], driver_env(tmp_path, DRIVER_FAULT_KILL_AT=point, **slow))
        assert r.returncode == -signal.SIGKILL, f"never reached {point}: {r.stderr[-2000:]}"
        killed_at.append((point, phase_now()))
    r = driver(["resume", str(run_dir)], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr
    # the driver died at every kill point, in order, and in every phase the reference run went through
    assert [point for point, _ in killed_at] == KILL_POINTS
    ref_phases = {h["phase"] for h in json.loads((ref_dir / "run.json").read_text())["history"]}
    assert {phase for _, phase in killed_at} == ref_phases, killed_at
    assert outcome(run_dir) == outcome(ref_dir)
    # the seal the driver died in was finished: every eval file holds numbers only, and no
    # partial copy of one is left
    from tests_support import assert_every_eval_file_is_sealed

    assert len(assert_every_eval_file_is_sealed(run_dir, "classic")) == MAX_ITERS + 3
    assert not [p for p in run_dir.rglob(".eval_rollouts.jsonl.*")]
    # no arm was ever trained twice, although the driver died around every launch
    metrics = json.loads((run_dir / "metrics.json").read_text())
    expected = {str(arm_dir(run_dir, arm) / "prime_out"): 1 for arm, _ in arms(metrics)}
    expected.update({str(run_dir / f"iter_{n}" / "probe" / "prime_out"): 1 for n in range(1, MAX_ITERS)})
    assert len(expected) == MAX_ITERS + 3 + MAX_ITERS - 1
    dirs = Counter(l["output_dir"] for l in launches(tmp_path))
    assert dirs == expected, dirs


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


@pytest.mark.extended   # a whole run: CI's extended command keeps the main suite in its budget
def test_an_env_without_a_selection_split_reports_holm_and_resamples_train_rows_for_control_c(tmp_path):
    """model_router has one eval split and no untargeted generator: the best is chosen on the
    examples it is reported on (the highest eval accuracy, ties to the earliest), the summary
    says so and adjusts p for the iterations compared, and control C trains on as many
    resampled hub train rows as the best dataset has."""
    runs = tmp_path / "runs"
    r = driver(["run", "--dataset", "model_router", "--max-iters", "3", *FAST[:4],
                "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    hub = json.loads((run_dir / "hub_env.json").read_text())
    assert hub["selection"] is None
    metrics, best, _, summary = outcome(run_dir)
    assert [m["iter"] for m in metrics["iters"]] == [0, 1, 2]
    assert best["chosen_on"] == "eval" and all("selection_acc" not in m for m in metrics["iters"])
    assert best["best_iter"] == expected_best_iter(metrics)
    assert "Holm p" in summary and "chosen on the same examples its lift is reported on" in summary
    assert "val %" not in summary
    c_rows = (run_dir / ARM_DIRS["run_c"] / "dataset.jsonl").read_text().splitlines()
    assert len(c_rows) == (run_dir / best["dataset"]).read_text().count("\n")
    assert f"[run_c] {len(c_rows)} untargeted rows from a resample of the hub env's train rows" in r.stderr
    # every resampled row is a hub train row (never an eval row), and no row is repeated while
    # the train split still has unused ones
    import verifiers as vf
    hub_env = vf.load_environment("model_router")
    train_q = {row["question"] for row in hub_env.get_dataset()}
    eval_q = {row["question"] for row in hub_env.get_eval_dataset()}
    got = [json.loads(x)["question"] for x in c_rows]
    assert got and set(got) <= train_q and not set(got) & eval_q
    assert len(set(got)) == min(len(got), len(train_q))
