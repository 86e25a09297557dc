"""The gradient probe on prime-rl without any extra variable: one step of the backend's own
`rl` from iter_0's checkpoint on the generated env, no eval; its train rollouts are the probe's.
A dataset the anchor student never solves goes back to the teacher before any arm trains on it."""
from __future__ import annotations

import json

import pytest

from conftest import FAST, current_env, driver, driver_env, launches, run_dir_from
from rl_contract.composition import compose


# in the main suite, test_full_run_and_resume checks the probe's launch on every iteration
@pytest.mark.extended
@pytest.mark.parametrize("dialect", ["classic", "current"])
def test_the_probe_is_a_one_step_launch_from_iter0_on_the_generated_env(tmp_path, runs, dialect):
    env = driver_env(tmp_path) if dialect == "classic" else current_env(tmp_path)
    r = driver(["run", "--max-iters", "2", *FAST, "--probe-prompts", "20", "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    probe = json.loads((rd / "iter_1" / "probe.json").read_text())
    assert "skipped" not in probe and probe["prompts"] == 20 and probe["k"] == 16
    assert 0 < probe["live_fraction"] <= 1 and probe["passed"]
    [launch] = [l for l in launches(tmp_path) if "/iter_1/probe/" in l["output_dir"]]
    cfg = compose(launch["argv"])
    f = json.loads((rd / "run.json").read_text())["iter_0_step"]
    assert int(cfg["max_steps"]) == f + 1 and int(cfg["orchestrator"]["batch_size"]) == 20 * 16
    assert "eval" not in cfg["orchestrator"]                      # no eval: the rows are the probe
    rows = (rd / "iter_1" / "probe_rollouts.jsonl").read_text().splitlines()
    assert len(rows) == 20 * 16
    assert not (rd / "iter_1" / "probe" / "prime_out").exists()  # the throwaway update is gone
    # the probe ran before the arm trained, and the arm trained once
    order = [l["output_dir"] for l in launches(tmp_path) if "/iter_1/" in l["output_dir"]]
    assert order[0].endswith("iter_1/probe/prime_out") and order[1].endswith("iter_1/prime_out")
    assert not any("/probe/" in o for o in order[1:])             # (then, current: its final eval)


def test_a_dataset_the_student_never_solves_goes_back_to_the_teacher_untrained(tmp_path, runs):
    env = driver_env(tmp_path, DOUBLE_SHAPE_ARM="probe", DOUBLE_TRAIN_SKILL="0")
    r = driver(["run", "--max-iters", "2", *FAST, "--teacher-retries", "1", "--runs-dir", str(runs)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    skipped = json.loads((rd / "iter_1" / "skipped.json").read_text())
    assert skipped["failures"][0].startswith("probe: the dataset carries no gradient for the student: "
                                             "live fraction 0.000 < 0.1 on 32 prompts x 16")
    # iter_1's arm never launched: only iter_0 and the probe did
    dirs = [l["output_dir"].split("/runs/")[1].split("/", 1)[1] for l in launches(tmp_path)]
    assert dirs == ["iter_0/prime_out", "iter_1/probe/prime_out"]
