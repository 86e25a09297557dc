"""The trainer double in a thread (tests/inprocess_trainer.py) is the double run as a process,
less the processes: the same launch writes the same files and the same exit status, a stop
ends it where it waits and leaves no status (as a SIGTERMed wrapper leaves none), and a launch
that needs processes gets them."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from conftest import DOUBLE, driver_env, launches
from driver.backends import Command
from driver.backends import process
from inprocess_trainer import ThreadRunner, running

LIMITS = process.Limits(startup_s=60, stall_s=60, eval_s=60)

CONFIG = """max_steps = 2

[trainer]

[orchestrator]
batch_size = 32
rollouts_per_example = 8

[orchestrator.train]
env = [{ id = "stock_arithmetic" }]

[ckpt]
interval = 2

[[orchestrator.eval.env]]
id = "stock_arithmetic"
num_examples = 20
"""

TRAINER = Command((sys.executable, str(DOUBLE)))


@pytest.fixture
def shell(tmp_path, monkeypatch):
    """The in-process driver's environment, as conftest.driver gives it: driver_env's."""
    env = driver_env(tmp_path)
    for k in [k for k in os.environ if k not in env]:
        monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cfg = tmp_path / "rl.toml"
    cfg.write_text(CONFIG)
    return cfg


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_a_launch_in_a_thread_writes_what_the_same_launch_as_a_process_writes(shell, tmp_path):
    from rl_contract.classic import ClassicLayout

    eval_file = ClassicLayout().eval_file(Path("x"), 2).relative_to("x")
    outcomes = {}
    for name, runner in (("thread", ThreadRunner()), ("process", process.ProcessRunner())):
        out = tmp_path / name
        log = tmp_path / f"{name}.log"
        tp = runner.launch(TRAINER, ["@", str(shell), "--output-dir", str(out)], out, log)
        res = runner.poll(tp, log, out / eval_file, 20, limits=LIMITS, steps=2,
                          progress=lambda: 0, interval=0.05, on_tick=None)
        outcomes[name] = (res.outcome, res.returncode, runner.exit_status(log), _files(out),
                          log.read_text().splitlines()[-1])
        assert (tp.pid >= 1 << 22) == (name == "thread")
    assert outcomes["thread"][:3] == ("done", 0, 0)
    assert outcomes["thread"] == outcomes["process"]


def test_a_stop_ends_a_hung_launch_where_it_waits_and_leaves_no_exit_status(shell, tmp_path, monkeypatch):
    monkeypatch.setenv("DOUBLE_HANG_AT_STEP", "2")
    runner, out, log = ThreadRunner(), tmp_path / "out", tmp_path / "out.log"
    tp = runner.launch(TRAINER, ["@", str(shell), "--output-dir", str(out)], out, log)
    from rl_contract.classic import ClassicLayout

    first_step = ClassicLayout().train_file(out, 0)   # step 1's batch (rows_step 0)
    res = runner.poll(tp, log, out / "none.jsonl", 20, limits=process.Limits(60, 0.5, 60), steps=2,
                      progress=lambda: int(first_step.exists()), interval=0.05, on_tick=None)
    assert res.outcome == "stalled" and running(tp.pid) and runner.find(None, out) == tp
    # a launch beside it (one that does not hang) is a process, and sees the thread's launch
    # running (alive_before)
    monkeypatch.delenv("DOUBLE_HANG_AT_STEP")
    beside = _launch_to_end(runner, shell, tmp_path / "beside")
    assert beside.pid < 1 << 22 and _alive_before(tmp_path, "beside") == [tp.pid]
    runner.stop(tp)
    assert not running(tp.pid) and runner.exit_status(log) is None and runner.find(tp, out) is None
    after = _launch_to_end(runner, shell, tmp_path / "after")   # a thread again; tp is gone
    assert after.pid >= 1 << 22 and _alive_before(tmp_path, "after") == []


def _launch_to_end(runner, shell, out: Path):
    log = out.with_suffix(".log")
    tp = runner.launch(TRAINER, ["@", str(shell), "--output-dir", str(out)], out, log)
    try:
        assert runner.poll(tp, log, out / "none.jsonl", 20, limits=LIMITS, steps=2, progress=lambda: 0,
                           interval=0.05, on_tick=None).returncode == 0
    finally:
        runner.stop(tp)
    return tp


def _alive_before(tmp_path, name: str) -> list[int]:
    """What the double recorded as still running when the launch writing to `name` started."""
    [record] = [x for x in launches(tmp_path) if x["output_dir"] == str(tmp_path / name)]
    return record["alive_before"]


@pytest.mark.parametrize("knob", ["DOUBLE_IGNORE_TERM", "DOUBLE_BIND_PORTS", "DOUBLE_RANK_TEARDOWN_SECONDS"])
def test_a_launch_whose_knobs_shape_its_processes_is_a_process(shell, tmp_path, monkeypatch, knob):
    monkeypatch.setenv(knob, "1")
    runner, out, log = ThreadRunner(grace_s=0.5), tmp_path / "out", tmp_path / "out.log"
    tp = runner.launch(TRAINER, ["@", str(shell), "--output-dir", str(out)], out, log)
    try:
        assert tp.pid < 1 << 22 and process.is_alive(tp)
    finally:
        runner.stop(tp)
