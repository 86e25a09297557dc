"""The pre-training gradient probe: a dataset the anchor student always solves, or never
solves, goes back to the teacher before training; a live one trains, with its figures in
metrics.json. And the real probe (embedded_trainer.probe) on a toy env."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import FAST, ROOT, driver, driver_env, launches, run_dir_from

PROBE = f"{sys.executable} {ROOT / 'tests' / 'probe_double.py'}"


def _groups(rows: list[dict]) -> list[list[float]]:
    """Rewards grouped by prompt, in the order the prompts first appear."""
    by: dict = {}
    for r in rows:
        by.setdefault(json.dumps(r["prompt"], sort_keys=True), []).append(r["reward"])
    return list(by.values())


@pytest.mark.parametrize("rate,word", [("1", "all solved: 32"),
                                       pytest.param("0", "none solved: 32", marks=pytest.mark.extended)])
def test_probe_sends_a_dataset_without_gradient_back_and_skips_after_the_retries(tmp_path, runs, rate, word):
    env = driver_env(tmp_path, DRIVER_PROBE_COMMAND=PROBE, PROBE_DOUBLE_SOLVE_RATE=rate)
    r = driver(["run", "--max-iters", "2", "--teacher-retries", "2", "--runs-dir", str(runs), *FAST], env)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    d = rd / "iter_1"
    assert (d / "probe.json.rejected-1").exists() and (d / "probe.json.rejected-2").exists()
    first = json.loads((d / "probe.json.rejected-1").read_text())
    # each attempt's rollouts are kept beside its record (the teacher reads them all)
    assert (d / "probe_rollouts.jsonl.rejected-1").exists() and (d / "probe_rollouts.jsonl.rejected-2").exists()
    assert first["live_fraction"] == 0.0 and first["passed"] is False and first["prompts"] == 32
    # the built-in teacher's second attempt answers the probe's numbers: rows nobody solved
    # come back in the plain style, rows everybody solved keep the story style
    second = json.loads((d / "weakness.json.rejected-2").read_text())
    assert second["style"] == ("plain" if rate == "0" else "stories")
    m = json.loads((rd / "metrics.json").read_text())
    it1 = next(i for i in m["iters"] if i["iter"] == 1)
    assert it1["skipped"] is True
    assert "carries no gradient" in it1["failures"][0] and word in it1["failures"][0]
    assert "carries no gradient" in r.stderr
    # iter_1 never trained; with no iteration to carry forward, no control trains either
    assert not (d / "prime_out").exists()
    assert [l["output_dir"].split("/")[-2] for l in launches(tmp_path)] == ["iter_0"]


@pytest.mark.extended   # a whole run (~35 s); the probe's other verdicts, and a live one on the real trainer (test_local_backend), stay in the main suite
def test_a_live_dataset_trains_with_the_probe_figures_in_metrics(tmp_path, runs):
    env = driver_env(tmp_path, DRIVER_PROBE_COMMAND=PROBE)
    r = driver(["run", "--max-iters", "2", "--runs-dir", str(runs), "--temperature", "0.7", *FAST], env)
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    # the probe samples at the temperature the arms train at
    assert "at temperature 0.7" in (rd / "iter_1" / "probe.log").read_text()
    it1 = next(i for i in json.loads((rd / "metrics.json").read_text())["iters"] if i["iter"] == 1)
    p = it1["probe"]
    assert p["passed"] is True and p["prompts"] == 32 and p["k"] == 16
    rows = [json.loads(x) for x in (rd / "iter_1" / "probe_rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == 32 * 16
    # the figures are the rows' own: recounted here from the rollouts the probe wrote (the
    # double solves a fixed half of them, so with 16 rollouts a prompt every group is mixed)
    groups = _groups(rows)
    assert len(groups) == 32
    assert p["all_solved"] == sum(set(g) == {1.0} for g in groups) == 0
    assert p["none_solved"] == sum(set(g) == {0.0} for g in groups) == 0
    assert p["live_fraction"] == sum(len(set(g)) > 1 for g in groups) / 32 == 1.0
    # every arm's last train step is diagnosed too (256 rollouts / 16 per group = 16 groups),
    # with the same figures a recount of that step's rollouts gives
    td = it1["train_diagnose"]
    assert td["step"] == 6 and td["groups"] == 16 and td["uniform_groups"] is True
    from rl_contract.classic import ClassicLayout

    layout = ClassicLayout()   # trained step 6's batch sits where classic writes it (step_5)
    step6_file = layout.train_file(rd / "iter_1" / "prime_out", layout.rows_step(6))
    step6 = [json.loads(x) for x in step6_file.read_text().splitlines()]
    train_groups = _groups(step6)
    assert td["live_fraction_outcome"] == round(sum(len(set(g)) > 1 for g in train_groups) / 16, 4)
    assert td["live_fraction_reward"] == td["live_fraction_outcome"]   # 0/1 rewards
    pad = (rd / "scratchpad.md").read_text()
    assert "train rollouts at step 6: live fraction" in pad
    assert f"gradient probe before training: live fraction {p['live_fraction']:.2f}" in pad


def embedded_probe(args: list, env: dict) -> subprocess.CompletedProcess:
    """`python -m embedded_trainer.probe ARGS` as the driver runs it on the embedded backend
    (arms/probe.py): forked from the warm worker that holds torch (driver/envs/worker.py)."""
    from driver.envs import worker

    return worker.run_py(sys.executable, worker.RUN_MODULE, ["embedded_trainer.probe", *map(str, args)],
                         timeout=600, env=env, torch=True)


@pytest.mark.extended   # keeps the main suite inside its 5 minutes
def test_the_embedded_probe_samples_and_scores_with_the_env_rubric(tmp_path):
    from test_embedded_trainer import TOY, trainer_env

    out = tmp_path / "probe.jsonl"
    r = embedded_probe(["--model", TOY, "--env-id", "parity_toy", "--prompts", "10", "--k", "4",
                        "--max-tokens", "6", "--seed", "3", "--output", out], trainer_env(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 40 and len({json.dumps(x["prompt"]) for x in rows}) == 10
    assert {x["reward"] for x in rows} <= {0.0, 1.0}
    assert all(x["completion"][0]["role"] == "assistant" for x in rows)
    d = subprocess.run([sys.executable, "-m", "driver.cli", "diagnose", str(out), "--json"],
                       capture_output=True, text=True)
    assert json.loads(d.stdout)["groups"] == 10
    r2 = embedded_probe(["--model", tmp_path / "nope", "--env-id", "parity_toy", "--prompts", "2", "--k", "2",
                         "--max-tokens", "4", "--output", out], trainer_env(tmp_path))
    assert r2.returncode == 1 and "neither a model directory" in r2.stderr


def test_the_probes_verdict_is_clear_once_its_wilson_interval_lies_on_one_side_of_the_floor():
    """The rule the embedded probe stops on (the whole probe stopping is the extended test
    below): after n groups, the live fraction's Wilson 95% interval wholly above or below F."""
    from embedded_trainer.probe import CHUNK, clear

    assert CHUNK == 16
    assert clear(0, 16, 1.0) and clear(15, 16, 1.0)     # F = 1: any group that does not vary
    assert not clear(16, 16, 1.0)                        # all live: never below 1
    assert clear(16, 16, 0.1) and clear(8, 16, 0.1)      # clearly above the driver's floor
    assert not clear(2, 16, 0.1) and not clear(0, 16, 0.1)
    # 0 live of 32 is not yet clearly below 0.1 (its interval tops out at 0.107): the probe
    # samples all 32, and the driver's floor then reads the fraction itself
    assert not clear(0, 32, 0.1) and clear(0, 48, 0.1)
    assert clear(1, 16, 0.0) and not clear(0, 16, 0.0)   # floor 0: any live group settles it


@pytest.mark.extended   # a torch worker's start (about 10 s); the rule it stops on is tested above
def test_the_embedded_probe_stops_early_once_its_verdict_is_clear(tmp_path):
    """--min-live F: after each chunk of 16 prompts the probe stops when the live fraction's
    Wilson 95% interval lies wholly on one side of F. At F = 1 that is as soon as a chunk holds a
    group whose outcome does not vary, so of 40 prompts only the first 16 are sampled."""
    from test_embedded_trainer import TOY, trainer_env

    out = tmp_path / "probe.jsonl"
    r = embedded_probe(["--model", TOY, "--env-id", "parity_toy", "--prompts", "40", "--k", "4",
                        "--max-tokens", "6", "--seed", "3", "--min-live", "1.0", "--output", out],
                       trainer_env(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    groups = _groups(rows)
    assert not all(len(set(g)) > 1 for g in groups)   # the toy student is not live everywhere
    assert len(groups) == 16 and len(rows) == 16 * 4
    assert "probe: 16 of 40 prompts x 4" in r.stdout + r.stderr
