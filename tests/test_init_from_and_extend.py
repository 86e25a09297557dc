"""--init-from a run directory this driver made (or its iter_0), and `driver resume --budget /
--max-iters` extending a loop that ended on one of them."""
from __future__ import annotations

import filecmp
import json
import shutil
import tomllib
from pathlib import Path

import pytest

from conftest import FAST, driver, driver_env, launches, run_dir_from

ARMS = ["run_a_best_from_iter0", "run_b_combined_from_base", "run_c_untargeted_from_iter0"]


def _state(rd: Path) -> dict:
    return json.loads((rd / "run.json").read_text())


def _metrics(rd: Path) -> dict:
    return json.loads((rd / "metrics.json").read_text())


def _arms_launched(entries: list[dict]) -> list[str]:
    """The arms launched, in order (the gradient probe's one-step launches left out)."""
    names = [Path(x["output_dir"]).parent.name for x in entries]
    return [n for n in names if n != "probe"]


# ---- --init-from ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def first(tmp_path_factory):
    """A finished run of this driver, --max-iters 1: iter_0 trained and evaluated."""
    tmp = tmp_path_factory.mktemp("init-from")
    r = driver(["run", "--max-iters", "1", *FAST, "--runs-dir", str(tmp / "first")], driver_env(tmp))
    assert r.returncode == 0, r.stderr
    return tmp, run_dir_from(r.stdout)


def _second(first, source: Path, max_iters: int):
    tmp, _ = first
    before = len(launches(tmp))
    r = driver(["run", "--init-from", str(source), "--max-iters", str(max_iters), *FAST,
                "--runs-dir", str(tmp / f"second-{source.name}")], driver_env(tmp))
    assert r.returncode == 0, r.stderr
    return run_dir_from(r.stdout), _arms_launched(launches(tmp)[before:])


def test_init_from_the_iter_0_of_a_driver_run_reuses_it_untrained(first):
    _, first_dir = first
    rd, launched = _second(first, first_dir / "iter_0", max_iters=1)
    state = _state(rd)
    assert (state["iter_0_source"], state["iter_0_path"], state["iter_0_step"]) == \
        ("init-from", str(first_dir / "iter_0"), 3)
    assert _metrics(rd)["iters"][0]["eval_acc"] == _metrics(first_dir)["iters"][0]["eval_acc"]
    assert launched == []     # nothing trained: iter_0 reused, no iteration, no control to run


# whole runs resumed from another run (45 s): the extended command; --init-from on real prime-rl
# output dirs of both generations stays in the main suite (test_prime_rl_runtime.py)
@pytest.mark.extended
def test_init_from_a_driver_run_directory_reuses_its_iter_0_and_iterations_resume_from_it(first):
    _, first_dir = first
    rd, launched = _second(first, first_dir, max_iters=2)
    # recorded: reused, from the first run's iter_0, at its final step
    state = _state(rd)
    assert (state["iter_0_source"], state["iter_0_path"], state["iter_0_step"]) == \
        ("init-from", str(first_dir / "iter_0"), 3)
    it0 = _metrics(rd)["iters"][0]
    assert it0["source"] == "init-from"
    assert it0["eval_acc"] == _metrics(first_dir)["iters"][0]["eval_acc"]
    assert it0["checkpoint"] == str(first_dir / "iter_0" / "prime_out" / "weights" / "step_3")
    # iter_0 was not trained again: the second run launched iter_1 and the controls only
    assert launched == ["iter_1", *ARMS]
    linked = rd / "iter_0" / "prime_out" / "weights" / "step_3"
    assert linked.is_symlink()
    assert linked.resolve() == (first_dir / "iter_0" / "prime_out" / "weights" / "step_3").resolve()
    # iter_1 resumed from the first run's iter_0 checkpoint: resume_step 3, its trees copied
    cfg = tomllib.loads((rd / "iter_1" / "rl.toml").read_text())
    assert cfg["ckpt"]["resume_step"] == 3 and cfg["max_steps"] == 6
    staged = rd / "iter_1" / "prime_out" / "checkpoints" / "step_3"
    origin = first_dir / "iter_0" / "prime_out" / "checkpoints" / "step_3"
    assert staged.is_dir() and not staged.is_symlink()
    cmp = filecmp.dircmp(staged, origin)
    assert cmp.left_list and not (cmp.diff_files or cmp.left_only or cmp.right_only)


@pytest.mark.parametrize("flag,value,theirs", [("--dataset", "model_router", "stock_arithmetic"),
                                              ("--model", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-0.6B")],
                         ids=["hub-env", "model"])
def test_init_from_refuses_another_hub_env_or_model_naming_both(first, flag, value, theirs):
    tmp, first_dir = first
    runs = tmp / f"refused-{flag[2:]}"
    r = driver(["run", "--init-from", str(first_dir), flag, value, *FAST, "--runs-dir", str(runs)],
               driver_env(tmp))
    assert r.returncode == 2
    assert value in r.stderr and theirs in r.stderr
    assert f"Pass {flag} {theirs}" in r.stderr and "without --init-from" in r.stderr
    assert not runs.exists()    # refused before a run directory was created


def test_init_from_refuses_a_directory_that_is_none_of_the_three(first, tmp_path):
    tmp, _ = first
    odd = tmp_path / "odd"
    (odd / "weights").mkdir(parents=True)
    (odd / "notes.txt").write_text("not a run")
    runs = tmp_path / "runs"
    r = driver(["run", "--init-from", str(odd), *FAST, "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 2
    assert "none of what it reuses" in r.stderr
    for kind in ("run directory this driver made", "iter_0/", "prime-rl output directory (prime_out/"):
        assert kind in r.stderr, kind
    assert not runs.exists()


def test_init_from_refuses_an_unfinished_iter_0_and_another_dialect(first, tmp_path):
    tmp, first_dir = first
    fake = tmp_path / "fake"
    (fake / "iter_0").mkdir(parents=True)
    shutil.copy(first_dir / "run.json", fake / "run.json")
    runs = tmp_path / "runs"
    r = driver(["run", "--init-from", str(fake), *FAST, "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 2 and "has not finished" in r.stderr
    assert f"driver resume {fake}" in r.stderr
    for name in ("train_done.json", "eval_summary.json"):
        shutil.copy(first_dir / "iter_0" / name, fake / "iter_0" / name)
    state = _state(first_dir)
    state["dialect"] = "current"
    (fake / "run.json").write_text(json.dumps(state))
    r = driver(["run", "--init-from", str(fake / "iter_0"), *FAST, "--runs-dir", str(runs)],
               driver_env(tmp_path))
    assert r.returncode == 2 and "current dialect" in r.stderr and "classic" in r.stderr
    assert not runs.exists()


# ---- driver resume --budget / --max-iters --------------------------------------------------

@pytest.fixture(scope="module")
def extended(tmp_path_factory):
    """A run that ends on its budget after iter_0, the refusals tried on it, then extended with
    --budget until max_iters ends it, then re-opened once more with --max-iters."""
    tmp = tmp_path_factory.mktemp("extend")
    env = driver_env(tmp)
    out: dict = {"tmp": tmp}
    # iter_0's trainer takes at least its 1-s start-up: the budget is spent at the gate after it
    r = driver(["run", "--budget", "1s", "--max-iters", "5", *FAST, "--runs-dir", str(tmp / "runs")],
               {**env, "DOUBLE_STARTUP_SECONDS": "1"})
    assert r.returncode == 0, r.stderr
    rd = out["rd"] = run_dir_from(r.stdout)
    out["ended"] = _state(rd)
    out["launched_first"] = len(launches(tmp))
    unchanged = (rd / "run.json").read_bytes(), (rd / "metrics.json").read_bytes()
    for name, args in (("budget_spent", ["--budget", "1s"]), ("iters_done", ["--max-iters", "1"]),
                       ("iters_only", ["--max-iters", "9"])):
        out[name] = driver(["resume", str(rd), *args], env)
        out[f"{name}_unchanged"] = ((rd / "run.json").read_bytes(), (rd / "metrics.json").read_bytes()) == unchanged
    out["resumed"] = driver(["resume", str(rd), "--budget", "30m"], env)
    out["after_budget"] = _state(rd), _metrics(rd)
    out["launched_second"] = launches(tmp)[out["launched_first"]:]
    out["budget_only"] = driver(["resume", str(rd), "--budget", "2h"], env)
    before = len(launches(tmp))
    out["reopened"] = driver(["resume", str(rd), "--max-iters", "6"], env)
    out["launched_third"] = launches(tmp)[before:]
    return out


@pytest.mark.extended   # a whole run extended past its end: CI's extended command
def test_resume_with_a_larger_budget_trains_iterations_1_to_4_and_finalizes(extended):
    # before: the loop ended on the budget after iter_0, the controls skipped
    st = extended["ended"]
    assert (st["status"], st["loop_end"], st["phase"], st["iteration"]) == \
        ("budget_exhausted", "budget_exhausted", "done", 0)
    assert len(st["phase4_errors"]) == 3 and all("skipped" in e for e in st["phase4_errors"])
    r = extended["resumed"]
    assert r.returncode == 0, r.stderr
    assert "the loop is open again at the gate" in r.stderr
    assert "[gate] loop ends: max_iters_reached (after iteration 4)" in r.stderr
    st, m = extended["after_budget"]
    assert (st["status"], st["loop_end"], st["phase"]) == ("max_iters_reached", "max_iters_reached", "done")
    assert st["budget_seconds"] == 1800 and st["end_ts"] > st["limit_changes"][0]["ts"]
    assert [i["iter"] for i in m["iters"]] == [0, 1, 2, 3, 4]
    assert [c["run"] for c in m["controls"]] == ["run_a", "run_b", "run_c"]
    assert st["phase4_errors"] == []      # the skipped controls' failures moved into the record
    # nothing before the gate ran again: iterations 1..4, then the controls, one launch each
    assert _arms_launched(extended["launched_second"]) == ["iter_1", "iter_2", "iter_3", "iter_4", *ARMS]
    # the history goes on from the gate after the finished run's finalize
    phases = [h["phase"] for h in st["history"]]
    k = phases.index("finalize")
    assert phases[k + 1] == "gate" and phases[-1] == "finalize" and phases.count("finalize") == 2


@pytest.mark.extended   # a whole run extended past its end: CI's extended command
def test_the_extension_is_recorded_in_run_json(extended):
    st, _ = extended["after_budget"]
    [change] = st["limit_changes"]
    assert change["changed"] == {"budget_seconds": {"old": 1.0, "new": 1800.0}}
    assert (change["phase"], change["reopened"]) == ("done", "budget_exhausted")
    assert change["phase4_errors"] == extended["ended"]["phase4_errors"]
    assert change["set_aside"] == []          # no control had a directory to set aside


@pytest.mark.extended   # a whole run extended past its end: CI's extended command
def test_resume_refuses_limits_that_admit_no_iteration_and_names_the_command_that_works(extended):
    rd = extended["rd"]
    r = extended["budget_spent"]      # not more than the time gone since the start
    assert r.returncode == 2 and "is not more than the" in r.stderr
    assert "teacher's time and any time the run was stopped included" in r.stderr
    assert f"`driver resume {rd} --budget " in r.stderr
    r = extended["iters_done"]        # not more than the iterations done (iter_0)
    assert r.returncode == 2 and f"`driver resume {rd} --max-iters 2`" in r.stderr
    r = extended["iters_only"]        # the budget that ended the loop is still spent
    assert r.returncode == 2 and "ended on budget_exhausted" in r.stderr
    assert f"`driver resume {rd} --budget " in r.stderr and "--max-iters 9`" in r.stderr
    r = extended["budget_only"]       # after the extension, max_iters ended the loop
    assert r.returncode == 2 and "ended on max_iters_reached" in r.stderr
    assert f"`driver resume {rd} --budget 2h --max-iters 6`" in r.stderr
    for name in ("budget_spent", "iters_done", "iters_only"):
        assert extended[f"{name}_unchanged"], name    # nothing was written


@pytest.mark.extended   # a whole run extended past its end: CI's extended command
def test_reopening_sets_the_old_controls_aside_and_runs_them_again_at_the_new_end(extended):
    rd = extended["rd"]
    r = extended["reopened"]
    assert r.returncode == 0, r.stderr
    assert _arms_launched(extended["launched_third"]) == ["iter_5", *ARMS]
    st, m = _state(rd), _metrics(rd)
    change = st["limit_changes"][-1]
    assert change["changed"] == {"max_iters": {"old": 5, "new": 6}}
    assert change["reopened"] == "max_iters_reached"
    assert change["set_aside"] == [f"{a}.before-1" for a in ARMS]
    old_m = extended["after_budget"][1]
    for arm, entry in zip(ARMS, old_m["controls"]):
        kept = json.loads((rd / f"{arm}.before-1" / "eval_summary.json").read_text())
        assert kept["eval_acc"] == entry["eval_acc"]      # the old control's numbers are kept
        assert (rd / arm / "eval_summary.json").exists()  # and the control ran again
    assert [i["iter"] for i in m["iters"]] == [0, 1, 2, 3, 4, 5]
    assert [c["run"] for c in m["controls"]] == ["run_a", "run_b", "run_c"]   # one entry each
    assert (st["status"], st["phase"]) == ("max_iters_reached", "done")
