"""What the gradient probe costs on prime-rl, where it is a one-step launch of `rl` from iter_0's
checkpoint: the probe phase's wall time against the iteration's training (train + evaluate),
side by side, per iteration, from run.json's phase history. Run on the trainer double shaped like
a GPU arm (a start-up, seconds per step, an eval written once at the end), scaled down:

    python bench/probe_cost.py [--startup 3] [--step 0.5] [--eval 2] [--steps 20] [--iters 3]

The ratio is what the shape makes it (start-up + 1 step against start-up + steps + eval): on a
GPU node with prime-rl's defaults, a few minutes of start-up against a 60-90 minute arm. The
double does no learning, so only the times mean anything here.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--startup", type=float, default=3.0, help="seconds before a launch's first step")
    p.add_argument("--step", type=float, default=0.5, help="seconds per train step")
    p.add_argument("--eval", type=float, default=2.0, help="seconds the final eval takes")
    p.add_argument("--steps", type=int, default=20, help="steps per arm")
    p.add_argument("--iters", type=int, default=3, help="iterations including iter_0")
    a = p.parse_args()
    runs = Path(tempfile.mkdtemp())
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("DRIVER_", "DOUBLE_"))},
           "DRIVER_RL_COMMAND": f"{sys.executable} {ROOT / 'tests' / 'trainer_double.py'}",
           "DRIVER_POLL_INTERVAL": "0.2", "DOUBLE_STARTUP_SECONDS": str(a.startup),
           "DOUBLE_STEP_SECONDS": str(a.step), "DOUBLE_EVAL_SECONDS": str(a.eval),
           "PYTHONPATH": str(ROOT / "tests")}
    r = subprocess.run([sys.executable, "-m", "driver.cli", "run", "--max-iters", str(a.iters),
                        "--steps-per-run", str(a.steps), "--batch-size", "256",
                        "--probe-min-live", "0", "--runs-dir", str(runs)],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(r.stderr[-2000:])
    run_dir = next(runs.iterdir())
    per: dict = {}
    for h in json.loads((run_dir / "run.json").read_text())["history"]:
        if h["iteration"] and h.get("end_ts"):
            d = per.setdefault(h["iteration"], {"probe": 0.0, "arm": 0.0})
            key = "probe" if h["phase"] == "probe" else "arm" if h["phase"] in ("train", "evaluate") else None
            if key:
                d[key] += h["end_ts"] - h["start_ts"]
    print(f"shape: start-up {a.startup:g} s, {a.step:g} s/step x {a.steps} steps, eval {a.eval:g} s "
          "(trainer double)")
    print(f"{'iteration':<10}{'probe s':>9}{'arm s':>9}{'probe/arm':>11}")
    for n, d in sorted(per.items()):
        print(f"iter_{n:<5}{d['probe']:>9.1f}{d['arm']:>9.1f}{d['probe'] / d['arm']:>11.2f}")


if __name__ == "__main__":
    main()
