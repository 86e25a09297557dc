"""A hosted run's outputs read back from its volume, against tests/prime_double.py: files that
reach the volume after the run's end (the CLI promises them only "once it ends",
commands/volumes.py:1297@0.18.0), and prime-rl's trees under different roots of the run's tree.
Verified through the double only."""
from __future__ import annotations

import json
import re

import pytest

from conftest import driver, run_dir_from
from driver.dialects import get
from test_hosted import SHORT, hosted_env, platform_runs, submissions


# whole hosted runs that wait out the lag: CI's extended command; the different-roots reading stays in the main suite
@pytest.mark.extended
@pytest.mark.parametrize("lag", ["3", "3:partial"])
def test_a_volume_that_trails_the_runs_end_costs_no_retrain(tmp_path, runs, lag):
    """Each of iter_0's runs reaches the volume 3 s after it ends: none of its files meanwhile
    (its prefix "No such file or directory", exit 1), or all but its checkpoints. Listed once at
    the first COMPLETED poll, the first escaped the poll unsettled and the second retired the arm
    to be trained, and billed, again; re-listed with backoff, each run is read back once."""
    r = driver([*SHORT, "--runs-dir", str(runs)],
               hosted_env(tmp_path, PRIME_DOUBLE_VOLUME_LAG=f"-iter_0-:{lag}"))
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    assert submissions(tmp_path)[("iter_0", "train")] == 1 and submissions(tmp_path)[("iter_0", "eval")] == 1
    log = (run_dir / "iter_0" / "train.log").read_text()
    assert re.search(r"the volume does not hold .*checkpoints/step_\d+/trainer.* yet", log), log[-2000:]
    assert "the volume holds the run's outputs" in log
    assert json.loads((run_dir / "metrics.json").read_text())["iters"][0]["eval_acc"] is not None


@pytest.mark.extended   # waits out the lag: about 20 s
def test_a_volume_that_trails_past_the_wait_stops_the_driver_billed_and_resume_reads_it_back(tmp_path, runs):
    """Past DRIVER_HOSTED_SYNC_WAIT_S the driver stops rather than retrain: the run is in the
    ledger already (its bill is settled before anything is read back), and `driver resume` lists
    it again and reads it back without a second submission."""
    env = hosted_env(tmp_path, PRIME_DOUBLE_VOLUME_LAG="-iter_0-train-:8", DRIVER_HOSTED_SYNC_WAIT_S="2")
    r = driver([*SHORT, "--runs-dir", str(runs)], env)
    assert r.returncode != 0
    assert "Nothing is retrained: `driver resume` lists it again" in " ".join(r.stderr.split()), r.stderr[-2000:]
    run_dir = run_dir_from(r.stdout)
    (train,) = [p for p in platform_runs(tmp_path) if "-iter_0-train-" in p["name"]]
    ledger = json.loads((run_dir / "cost.json").read_text())["launches"]
    assert [e["run_ids"] for e in ledger.values()] == [[train["id"]]] and all(e["billed_s"] > 0 for e in ledger.values())
    import time
    time.sleep(max(0.0, train["completed_at"] + 8.5 - time.time()))
    r = driver(["resume", str(run_dir)], hosted_env(tmp_path, DRIVER_HOSTED_SYNC_WAIT_S="2"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert submissions(tmp_path)[("iter_0", "train")] == 1


def test_rollouts_and_checkpoints_under_different_roots_are_both_read_back(tmp_path, runs):
    """PRIME_DOUBLE_LAYOUT=split: rollouts/ under runs/<id>/run/, checkpoints/ and broadcasts/
    under runs/<id>/. One root (the shortest) lost the rollouts without a word; each kind is now
    found under its own root, and the eval run's model path names the weights where they are."""
    r = driver([*SHORT, "--runs-dir", str(runs)], hosted_env(tmp_path, PRIME_DOUBLE_LAYOUT="split"))
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = run_dir_from(r.stdout)
    out, dialect = run_dir / "iter_0" / "prime_out", get("current")
    (train,) = [p for p in platform_runs(tmp_path) if "-iter_0-train-" in p["name"]]
    assert all(dialect.train_file(out, s).exists() for s in (1, 2, 3))
    remote = json.loads((dialect.weights_dir(out, 3) / "REMOTE.json").read_text())
    assert remote["path"] == f"runs/{train['id']}/broadcasts/step_3"
    (ev,) = [p for p in platform_runs(tmp_path) if "-iter_0-eval-" in p["name"]]
    assert ev["config"]["model"]["name"] == f"/volume/runs/{train['id']}/broadcasts/step_3"
    assert json.loads((run_dir / "metrics.json").read_text())["iters"][0]["eval_acc"] is not None
