"""rl_contract.final_eval, the current generation's final-weights eval launch, against the `uv`
double of a prime-rl v0.8.1.dev67 checkout (tests/prime_rl_bin/uv): `uv run inference` serves
until SIGTERM and, as vLLM does, cannot serve a directory without a config.json; `uv run evals`
waits for the server, then in online mode loads the broadcast it names into it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from conftest import PRIME_RL_BIN, ROOT


def _setup(tmp_path: Path, model: str = "Qwen/Qwen3-0.6B"):
    from driver.dialects import get
    from driver.run.model import Knobs

    dialect = get("current")
    broadcasts = tmp_path / "arm" / "run" / "broadcasts"
    b = broadcasts / "step_6"
    b.mkdir(parents=True)
    # a weights-only broadcast, as transports/weights/filesystem.py writes it
    (b / "model.safetensors").write_text(json.dumps({"step": 6, "skill": 0.9}))
    (b / "STABLE").write_text("")
    hub = {"env_id": "stock_arithmetic", "eval_size": 200, "train_args": {"split": "train"},
           "eval_args": {"split": "test"}}
    knobs = Knobs.for_backend("prime_rl", model=model, eval_examples=20)
    cfg = tmp_path / "evals.toml"
    cfg.write_text(dialect.render_final_eval(hub, knobs, broadcasts, 6, tmp_path / "OUT"))
    env = {**os.environ, "PATH": f"{PRIME_RL_BIN}{os.pathsep}{os.environ['PATH']}",
           "DOUBLE_SERVER_DIR": str(tmp_path / "servers"), "DOUBLE_READY_TIMEOUT_SECONDS": "5"}
    return broadcasts, cfg, env


def _cmd(tmp_path, cfg):
    return [sys.executable, "-m", "rl_contract.final_eval", "--prime-rl-dir", str(tmp_path),
            "@", str(cfg), "--output-dir", str(tmp_path / "OUT")]


def test_it_serves_the_base_model_loads_the_final_broadcast_and_stops_the_server(tmp_path):
    broadcasts, cfg, env = _setup(tmp_path)
    r = subprocess.run(_cmd(tmp_path, cfg), env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = (tmp_path / "OUT" / "rollouts" / "step_6" / "eval" / "all" / "traces.jsonl").read_text().splitlines()
    assert len(rows) == 20 and all(json.loads(x)["run"]["work"]["step"] == 6 for x in rows)
    assert not list((tmp_path / "servers").glob("ready-*"))      # the server was stopped


def test_serving_the_broadcast_itself_fails_as_vllm_does(tmp_path):
    """What the driver did before: a weights-only broadcast named as the served model. The
    server cannot start, and evals gives up after waiting for it."""
    broadcasts, cfg, env = _setup(tmp_path, model=str(tmp_path / "arm" / "run" / "broadcasts" / "step_6"))
    r = subprocess.run(_cmd(tmp_path, cfg), env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode != 0
    assert "Could not detect config format" in r.stderr and "did not become ready" in r.stderr


def test_a_missing_broadcast_is_refused_and_the_exit_status_is_evals(tmp_path):
    broadcasts, cfg, env = _setup(tmp_path)
    (broadcasts / "step_6" / "STABLE").unlink()
    r = subprocess.run(_cmd(tmp_path, cfg), env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2 and "no stable weight broadcast" in r.stderr


def test_sigterm_stops_its_server_too(tmp_path):
    """The server runs in a session of its own: a SIGTERM to the eval (the driver stopping a
    stalled one) must not leave it holding the GPU and the port."""
    broadcasts, cfg, env = _setup(tmp_path)
    env["DOUBLE_READY_TIMEOUT_SECONDS"] = "600"
    (broadcasts / "step_6" / "STABLE").unlink()   # evals waits: the eval is "stalled"
    (broadcasts / "step_6" / "STABLE").touch()
    env["DOUBLE_SERVER_START_SECONDS"] = "600"     # the server never becomes ready
    p = subprocess.Popen(_cmd(tmp_path, cfg), env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    server = []
    while not server and time.monotonic() < deadline:
        server = [c for c in psutil.Process(p.pid).children(recursive=True)
                  if "inference" in " ".join(c.cmdline())]
        time.sleep(0.1)
    assert server, "the server never started"
    os.kill(p.pid, signal.SIGTERM)
    p.wait(timeout=90)
    gone = psutil.wait_procs(server, timeout=10)[1] == []
    assert gone, "the inference server outlived the eval"
