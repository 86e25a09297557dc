"""Measure an arm's final weights with prime-rl's own entrypoints (current generation).

prime-rl's `rl` never evaluates v(max_steps), and its broadcast `broadcasts/step_N` holds weight
shards and STABLE only (no config.json, no tokenizer: vLLM cannot serve it as a model). So this
does what prime-rl's own `evals` online mode is for (rl_contract/current.py SOURCES): it serves
the base model exactly as training served it, `uv run inference --vllm.model MODEL --server.port
P` (MODEL: the evals config's `model`, so the tool-call and reasoning parsers resolve from its
name as they did in training), then runs `uv run evals @ evals.toml`, whose `[online]` block
names the arm's broadcasts dir and final step: evals loads that broadcast into the server
(`/update_weights`) and writes one epoch of every eval source under the step, to
OUT/rollouts/step_N/eval/. Then the server is stopped. Its exit status is evals'.

    python -m rl_contract.final_eval --prime-rl-dir DIR @ evals.toml --output-dir OUT

A SIGTERM (the driver stopping a stalled eval) stops the server before this exits: the server
runs in a session of its own, and nothing else would reach it. Standard library only: it runs
beside the driver.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

from rl_contract.composition import CompositionError, compose, get


def _terminated(signum, frame):
    raise SystemExit(128 + signum)   # unwinds through the finally below


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rl_contract.final_eval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prime-rl-dir", required=True, help="the prime-rl checkout (runs `uv run` there)")
    p.add_argument("evals_args", nargs=argparse.REMAINDER, help="`@ evals.toml [--flags]`, as `evals` takes them")
    a = p.parse_args(argv)
    try:
        cfg = compose(a.evals_args)
    except CompositionError as e:
        print(f"final_eval: {e}", file=sys.stderr)
        return 2
    model = get(cfg, "model")
    broadcasts, step = get(cfg, "online.broadcasts_dir"), get(cfg, "online.resume_step")
    if not model or broadcasts is None or step is None:
        print("final_eval: the evals config needs `model` (the base model's name) and [online] "
              "broadcasts_dir and resume_step (the arm's final step)", file=sys.stderr)
        return 2
    stable = Path(broadcasts) / f"step_{int(step)}" / "STABLE"
    if not stable.exists():
        print(f"final_eval: no stable weight broadcast at {stable.parent} (STABLE missing)", file=sys.stderr)
        return 2
    port = urlparse(get(cfg, "eval.client.base_url", "http://localhost:8000/v1")).port or 8000
    signal.signal(signal.SIGTERM, _terminated)
    server = subprocess.Popen(["uv", "run", "inference", "--vllm.model", str(model),
                               "--server.port", str(port)], cwd=a.prime_rl_dir, start_new_session=True)
    try:   # evals waits for the server itself (eval.client.wait_for_ready_timeout)
        return subprocess.run(["uv", "run", "evals", *a.evals_args], cwd=a.prime_rl_dir).returncode
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # the cleanup is not cut short in turn
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        except ProcessLookupError:
            pass


if __name__ == "__main__":
    sys.exit(main())
