"""rl_contract.final_eval, the current generation's final-weights eval launch, against a `uv` double
that speaks the two prime-rl entrypoints it calls: `uv run inference` (serves until SIGTERM)
and `uv run evals` (writes its epoch and exits). prime-rl v0.8.1.dev67's InferenceConfig
accepts `--vllm.model`, `--vllm.tokenizer` and `--server.port` (and rejects `--model.name`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

UV = r'''#!/usr/bin/env python3
import json, os, signal, sys, time
log = os.environ["UV_LOG"]
with open(log, "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd()}) + "\n")
if sys.argv[2] == "inference":
    def stop(*_):
        with open(log, "a") as f:
            f.write(json.dumps({"stopped": "inference"}) + "\n")
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    with open(log, "a") as f:
        f.write(json.dumps({"ready": "inference"}) + "\n")
    while True:
        time.sleep(0.1)
if sys.argv[2] == "evals":
    # as prime-rl's evals does (eval.client.wait_for_ready_timeout): wait for the server
    deadline = time.time() + 30
    while time.time() < deadline and '"ready"' not in open(log).read():
        time.sleep(0.05)
    sys.exit(int(os.environ.get("EVALS_RC", "0")))
sys.exit(2)
'''


def _setup(tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "uv").write_text(UV)
    (bin_dir / "uv").chmod(0o755)
    weights = tmp_path / "run" / "broadcasts" / "step_6"
    weights.mkdir(parents=True)
    cfg = tmp_path / "evals.toml"
    cfg.write_text(f'model = "{weights}"\n[eval.client]\nbase_url = "http://localhost:8123/v1"\n')
    checkout = tmp_path / "prime-rl"
    checkout.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "UV_LOG": str(tmp_path / "uv.jsonl")}
    return weights, cfg, checkout, env


def _run(checkout, cfg, env, **extra):
    return subprocess.run([sys.executable, "-m", "rl_contract.final_eval", "--prime-rl-dir", str(checkout),
                           "--tokenizer", "Qwen/Qwen3-0.6B", "@", str(cfg), "--output-dir", "OUT"],
                          env={**env, **extra}, capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[1])


def test_it_serves_the_final_weights_runs_evals_and_stops_the_server(tmp_path):
    weights, cfg, checkout, env = _setup(tmp_path)
    r = _run(checkout, cfg, env)
    assert r.returncode == 0, r.stderr
    calls = [json.loads(x) for x in (tmp_path / "uv.jsonl").read_text().splitlines()]
    serve = next(c for c in calls if c.get("argv", [None, None])[1] == "inference")
    assert serve["argv"] == ["run", "inference", "--vllm.model", str(weights), "--server.port", "8123",
                             "--vllm.tokenizer", "Qwen/Qwen3-0.6B"]
    assert serve["cwd"] == str(checkout)
    evals = next(c for c in calls if c.get("argv", [None, None])[1] == "evals")
    assert evals["argv"] == ["run", "evals", "@", str(cfg), "--output-dir", "OUT"]
    assert {"stopped": "inference"} in calls          # the server does not outlive the eval


def test_its_exit_status_is_evals_and_a_missing_weights_dir_is_refused(tmp_path):
    weights, cfg, checkout, env = _setup(tmp_path)
    assert _run(checkout, cfg, env, EVALS_RC="3").returncode == 3
    weights.rmdir()
    r = _run(checkout, cfg, env)
    assert r.returncode == 2 and "is not a weights directory" in r.stderr
