"""Measure an arm's final weights with prime-rl's own entrypoints (current generation).

prime-rl's `rl` never evaluates v(max_steps), and its broadcast `broadcasts/step_N` holds weight
shards and STABLE only (no config.json, no tokenizer: vLLM cannot serve it as a model). So this
does what prime-rl's own `evals` online mode is for (rl_contract/current.py SOURCES): it serves
the base model exactly as training served it, then runs `uv run evals @ evals.toml`, whose
`[online]` block names the arm's broadcasts dir and final step: evals loads that broadcast into
the server (`/update_weights`, or `/load_lora_adapter` for an adapter) and writes one epoch of
every eval source under the step, to OUT/rollouts/step_N/eval/. Then the server is stopped. Its
exit status is evals'.

    python -m rl_contract.final_eval --prime-rl-dir DIR [--inference-config FILE] @ evals.toml --output-dir OUT

The server is started as `rl` started training's: `uv run inference @ FILE`, FILE being the
inference config `rl` resolved and wrote for the arm (R/configs/inference.json:
src/prime_rl/entrypoints/rl.py:46,87-95,122-123,195@559b447), so the eval server has the arm's
whole [inference] table, its router and engine ports, and the LoRA settings `rl` adds when the
trainer trains an adapter (packages/prime-rl-configs/src/prime_rl/configs/rl.py:576-578).
Without FILE (a launch with no [inference]) it is `uv run inference --vllm.model MODEL
--server.port P`, MODEL the evals config's `model` so the parsers resolve from its name.

The server's output goes to OUT/inference.log. A server that exits while evals runs ends the
eval at once (evals would otherwise wait for it up to its 30-minute ready timeout), with the
log's last lines. A SIGTERM (the driver stopping a stalled eval) stops both before this exits:
each runs in a session of its own, and nothing else would reach them. Standard library only: it
runs beside the driver.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

from rl_contract.composition import CompositionError, compose, get


SERVER_LOG = "inference.log"
TAIL_LINES = 30


def _terminated(signum, frame):
    raise SystemExit(128 + signum)   # unwinds through the finally below


def _stop(proc: subprocess.Popen) -> None:
    """TERM the process's session, KILL it after a minute."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def _tail(path: Path, n: int = TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


def server_command(model: str, port: int, inference_config: str | None) -> list[str]:
    if inference_config:
        return ["uv", "run", "inference", "@", inference_config]
    return ["uv", "run", "inference", "--vllm.model", model, "--server.port", str(port)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rl_contract.final_eval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prime-rl-dir", required=True, help="the prime-rl checkout (runs `uv run` there)")
    p.add_argument("--inference-config", default=None,
                   help="the arm's resolved inference config (R/configs/inference.json, as `rl` wrote "
                        "it): the eval server is started from it, as `rl` started training's")
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
    if a.inference_config:
        try:
            json.loads(Path(a.inference_config).read_text())
        except (OSError, ValueError) as e:
            print(f"final_eval: cannot read the inference config {a.inference_config}: {e}", file=sys.stderr)
            return 2
    port = urlparse(get(cfg, "eval.client.base_url", "http://localhost:8000/v1")).port or 8000
    out = Path(get(cfg, "output_dir", "outputs"))
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / SERVER_LOG
    signal.signal(signal.SIGTERM, _terminated)
    with open(log_path, "ab") as log:
        server = subprocess.Popen(server_command(str(model), port, a.inference_config), cwd=a.prime_rl_dir,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    evals = None
    try:   # evals waits for the server itself (eval.client.wait_for_ready_timeout)
        evals = subprocess.Popen(["uv", "run", "evals", *a.evals_args], cwd=a.prime_rl_dir,
                                 start_new_session=True)
        while True:
            rc = evals.poll()
            if rc is not None:
                return rc
            if server.poll() is not None:
                print(f"final_eval: the inference server exited with status {server.returncode} "
                      f"before the eval finished; the last lines of {log_path}:\n{_tail(log_path)}",
                      file=sys.stderr, flush=True)
                return 1
            time.sleep(0.5)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # the cleanup is not cut short in turn
        if evals is not None and evals.poll() is None:
            _stop(evals)
        _stop(server)


if __name__ == "__main__":
    sys.exit(main())
