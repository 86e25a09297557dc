"""Measure an arm's final weights with prime-rl's own entrypoints (current generation).

prime-rl's `rl` never evaluates v(max_steps), so the driver launches this after an arm:
`python -m rl_contract.final_eval --prime-rl-dir DIR --tokenizer MODEL @ evals.toml --output-dir
OUT`. It serves the weights named by the evals config's `model` (the arm's final
`broadcasts/step_N`, a Hugging Face model directory) with `uv run inference --vllm.model W
--vllm.tokenizer MODEL --server.port P` (P: the config's client port; the tokenizer is the
student's, in case a broadcast holds weights only), runs `uv run evals` standalone (one epoch of
every eval source, written to OUT/rollouts/step_0/eval/), then stops the server. Its exit status
is evals'. Standard library only: it runs beside the driver.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from urllib.parse import urlparse

from rl_contract.composition import CompositionError, compose, get


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rl_contract.final_eval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prime-rl-dir", required=True, help="the prime-rl checkout (runs `uv run` there)")
    p.add_argument("--tokenizer", help="the tokenizer to serve with (the student's model name)")
    p.add_argument("evals_args", nargs=argparse.REMAINDER, help="`@ evals.toml [--flags]`, as `evals` takes them")
    a = p.parse_args(argv)
    try:
        cfg = compose(a.evals_args)
    except CompositionError as e:
        print(f"final_eval: {e}", file=sys.stderr)
        return 2
    model = get(cfg, "model")
    port = urlparse(get(cfg, "eval.client.base_url", "http://localhost:8000/v1")).port or 8000
    if not model or not os.path.isdir(model):
        print(f"final_eval: the evals config's model {model!r} is not a weights directory", file=sys.stderr)
        return 2
    serve = ["uv", "run", "inference", "--vllm.model", model, "--server.port", str(port)]
    if a.tokenizer:   # any vLLM argument passes through [inference.vllm]
        serve += ["--vllm.tokenizer", a.tokenizer]
    server = subprocess.Popen(serve, cwd=a.prime_rl_dir, start_new_session=True)
    try:   # evals waits for the server itself (eval.client.wait_for_ready_timeout)
        return subprocess.run(["uv", "run", "evals", *a.evals_args], cwd=a.prime_rl_dir).returncode
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
