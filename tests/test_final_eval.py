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
import pytest
import shutil

from conftest import PRIME_RL_BIN, ROOT


def _setup(tmp_path: Path, model: str = "Qwen/Qwen3-0.6B", adapter: bool = False, served: dict | None = None,
           draws: int = 0):
    from driver.dialects import get
    from driver.run.model import Knobs

    dialect = get("current")
    broadcasts = tmp_path / "arm" / "run" / "broadcasts"
    b = broadcasts / "step_6"
    b.mkdir(parents=True)
    # a weights-only broadcast, as transports/weights/filesystem.py writes it; a LoRA run's holds
    # the adapter and its config (:35-62@559b447)
    shard = "adapter_model.safetensors" if adapter else "model.safetensors"
    (b / shard).write_text(json.dumps({"step": 6, "skill": 0.9}))
    if adapter:
        (b / "adapter_config.json").write_text(json.dumps({"r": 32, "lora_alpha": 64}))
    (b / "STABLE").write_text("")
    hub = {"env_id": "stock_arithmetic", "eval_size": 200, "train_args": {"split": "train"},
           "eval_args": {"split": "test"}}
    knobs = Knobs.for_backend("prime_rl", model=model, eval_examples=20, eval_draws=draws)
    cfg = tmp_path / "evals.toml"
    cfg.write_text(dialect.render_final_eval(hub, knobs, broadcasts, 6, tmp_path / "OUT", served=served))
    env = {**os.environ, "PATH": f"{PRIME_RL_BIN}{os.pathsep}{os.environ['PATH']}",
           "DOUBLE_SERVER_DIR": str(tmp_path / "servers"), "DOUBLE_READY_TIMEOUT_SECONDS": "5"}
    return broadcasts, cfg, env


def _cmd(tmp_path, cfg, served: Path | None = None):
    return [sys.executable, "-m", "rl_contract.final_eval", "--prime-rl-dir", str(tmp_path),
            *(["--inference-config", str(served)] if served else []),
            "@", str(cfg), "--output-dir", str(tmp_path / "OUT")]


def _rows(tmp_path) -> list[str]:
    path = tmp_path / "OUT" / "rollouts" / "step_6" / "eval" / "all" / "traces.jsonl"
    return path.read_text().splitlines() if path.exists() else []


# what the current `rl` double writes for a LoRA canonical config (configs/basic/alphabet-sort:
# [trainer.model.lora] rank 32), as prime-rl's launcher resolves it (configs/rl.py:576-578@559b447)
LORA_SERVED = {"server": {"port": 8000}, "backend_port": 8100, "router": {"type": "vllm-router"},
               "vllm": {"model": "Qwen/Qwen3-0.6B", "enable_lora": True, "max_lora_rank": 32,
                        "gpu_memory_utilization": 0.85}}


def test_it_serves_the_base_model_loads_the_final_broadcast_and_stops_the_server(tmp_path):
    broadcasts, cfg, env = _setup(tmp_path, draws=4)
    r = subprocess.run(_cmd(tmp_path, cfg), env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = (tmp_path / "OUT" / "rollouts" / "step_6" / "eval" / "all" / "traces.jsonl").read_text().splitlines()
    # the greedy rollout of each of the 20 examples, and its 4 stochastic draws
    assert len(rows) == 20 * (1 + 4) and all(json.loads(x)["run"]["work"]["step"] == 6 for x in rows)
    names = [json.loads(x)["env"]["name"] for x in rows]
    assert (names.count("hub-eval"), names.count("hub-eval-draws")) == (20, 80)
    assert not list((tmp_path / "servers").glob("ready-*"))      # the server was stopped


def test_serving_the_broadcast_itself_fails_at_once_with_the_servers_log(tmp_path):
    """What the driver did before: a weights-only broadcast named as the served model. The
    server cannot start; the eval ends as soon as the server has exited (evals would wait for
    it up to its ready timeout), and says why with the server's own last lines."""
    broadcasts, cfg, env = _setup(tmp_path, model=str(tmp_path / "arm" / "run" / "broadcasts" / "step_6"))
    env["DOUBLE_READY_TIMEOUT_SECONDS"] = "600"
    t0 = time.monotonic()
    r = subprocess.run(_cmd(tmp_path, cfg), env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 1 and time.monotonic() - t0 < 60
    assert "inference server exited with status 1 before the eval finished" in r.stderr
    assert "Could not detect config format" in r.stderr          # the server log's tail
    assert (tmp_path / "OUT" / "inference.log").is_file()


def test_a_server_that_dies_mid_eval_ends_the_eval_with_its_log(tmp_path):
    broadcasts, cfg, env = _setup(tmp_path)
    env.update(DOUBLE_SERVER_EXIT_AFTER_SECONDS="2", DOUBLE_EVALS_SECONDS="600")
    t0 = time.monotonic()
    r = subprocess.run(_cmd(tmp_path, cfg), env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 1 and time.monotonic() - t0 < 60
    assert "exited with status 1 before the eval finished" in r.stderr
    assert "Engine core initialization failed" in r.stderr
    assert _rows(tmp_path) == []


def test_a_lora_arm_is_measured_on_the_server_its_launch_resolved(tmp_path):
    """A LoRA run broadcasts an adapter, which evals loads with /load_lora_adapter
    (evals.py:350-357@559b447): into a server started from the arm's inference.json (LoRA on,
    at the trainer's rank) it loads and every eval row is written; into the bare base-model
    server the driver used to start, the load fails, evals skips the step and writes nothing
    (:356-364)."""
    served = tmp_path / "inference.json"
    served.write_text(json.dumps(LORA_SERVED))
    broadcasts, cfg, env = _setup(tmp_path, adapter=True, served=LORA_SERVED)
    r = subprocess.run(_cmd(tmp_path, cfg, served), env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert len(_rows(tmp_path)) == 20
    assert "with LoRA" in (tmp_path / "OUT" / "inference.log").read_text()

    shutil.rmtree(tmp_path / "OUT")
    r = subprocess.run(_cmd(tmp_path, cfg), env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0 and _rows(tmp_path) == []
    assert "load_lora_adapter" in r.stderr and "skipping evals" in r.stderr


# a forwarding router in the extended command (the main suite's 5 minutes), the other in the main suite
@pytest.mark.parametrize("forwards", [pytest.param("1", marks=pytest.mark.extended), "0"])
def test_admin_calls_reach_the_engine_whether_or_not_the_router_forwards_them(tmp_path, forwards):
    """Whether the pinned vllm-router forwards /pause, /update_weights, /metrics is open to a
    GPU (bench/gpu_facts.sh): the rendered eval sends them to the engine port either way, as
    rl's launcher does (configs/rl.py:816-824@559b447). Sent to the router instead, they are
    measured only where it forwards them."""
    served = tmp_path / "inference.json"
    plain = {**LORA_SERVED, "vllm": {"model": "Qwen/Qwen3-0.6B"}, "server": {"port": 8000}}
    served.write_text(json.dumps(plain))
    broadcasts, cfg, env = _setup(tmp_path, served=plain)
    env["DOUBLE_ROUTER_FORWARDS_ADMIN"] = forwards
    text = cfg.read_text()
    assert "admin_base_url = [ \"http://localhost:8100/v1\",]" in text or "http://localhost:8100/v1" in text
    r = subprocess.run(_cmd(tmp_path, cfg, served), env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0 and len(_rows(tmp_path)) == 20, r.stderr

    shutil.rmtree(tmp_path / "OUT")
    cfg.write_text(text.replace("http://localhost:8100/v1", "http://localhost:8000/v1"))   # admin to the router
    r = subprocess.run(_cmd(tmp_path, cfg, served), env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0
    assert len(_rows(tmp_path)) == (20 if forwards == "1" else 0), r.stderr


def test_the_eval_client_follows_the_served_ports(tmp_path):
    """An arm served on another port, or without a router (one bare engine on server.port),
    is measured on the ports its own launch used."""
    from driver.dialects import get
    from driver.run.model import Knobs

    dialect, knobs = get("current"), Knobs.for_backend("prime_rl", eval_examples=4)
    hub = {"env_id": "stock_arithmetic", "eval_size": 200, "eval_args": {"split": "test"}}
    import tomllib
    routed = tomllib.loads(dialect.render_final_eval(hub, knobs, tmp_path, 3, tmp_path / "O",
                                                     served={"server": {"port": 9000}, "backend_port": 9050}))
    assert routed["eval"]["client"] == {"base_url": "http://localhost:9000/v1",
                                        "admin_base_url": ["http://localhost:9050/v1"]}
    bare = tomllib.loads(dialect.render_final_eval(hub, knobs, tmp_path, 3, tmp_path / "O",
                                                   served={"server": {"port": 9000, "host": "10.0.0.2"},
                                                           "router": None}))
    assert bare["eval"]["client"] == {"base_url": "http://10.0.0.2:9000/v1",
                                      "admin_base_url": ["http://10.0.0.2:9000/v1"]}


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
