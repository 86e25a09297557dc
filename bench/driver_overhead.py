"""Driver overhead per iteration: everything but training, evaluation and the teacher (the
gate, the generator run, install, the probe, bookkeeping), as a fraction of the iteration's
wall time, side by side with the training it wraps. Read from run.json's phase history.

    python bench/driver_overhead.py RUN_DIR          # a finished run
    python bench/driver_overhead.py                  # runs a 3-iteration local run

The run it starts keeps the probe on but never lets it reject (--probe-min-live 0), so every
iteration trains and the probe's cost is counted as overhead.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

def main() -> None:
    if len(sys.argv) > 1:
        run_dir = Path(sys.argv[1])
    else:
        runs = Path(tempfile.mkdtemp())
        r = subprocess.run([sys.executable, "-m", "driver.cli", "run", "--backend", "local",
                            "--max-iters", "3", "--probe-min-live", "0", "--runs-dir", str(runs)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(r.stderr[-2000:])
        run_dir = next(runs.iterdir())
    hist = json.loads((run_dir / "run.json").read_text())["history"]
    per: dict = {}
    for h in hist:
        if h["iteration"] is None or not h.get("end_ts"):
            continue
        d = per.setdefault(h["iteration"], {"wall": 0.0, "train": 0.0, "teacher": 0.0,
                                            "dataset": 0.0, "environment": 0.0, "probe": 0.0,
                                            "attempts": 0})
        dt = h["end_ts"] - h["start_ts"]
        d["wall"] += dt
        if h["phase"] in ("train", "evaluate"):
            d["train"] += dt
        elif h["phase"] == "weakness":
            d["teacher"] += dt
        elif h["phase"] in ("dataset", "environment", "probe"):
            d[h["phase"]] += dt
            d["attempts"] += h["phase"] == "dataset"
    for d in per.values():
        d["overhead"] = d["wall"] - d["train"] - d["teacher"]
    print(f"run: {run_dir}")
    print(f"{'iteration':<10}{'wall s':>8}{'train+eval s':>14}{'teacher s':>11}{'overhead s':>12}"
          f"{'overhead/wall':>15}{'attempts':>10}{'dataset s':>11}{'install s':>11}{'probe s':>9}"
          "   last dataset phase: generator / hub rubric / gate s")
    for it, d in sorted(per.items()):
        split = json.loads((run_dir / f"iter_{it}" / "gate_report.json").read_text()).get("seconds") \
            if (run_dir / f"iter_{it}" / "gate_report.json").exists() else None
        print(f"iter_{it:<5}{d['wall']:>8.1f}{d['train']:>14.1f}{d['teacher']:>11.1f}"
              f"{d['overhead']:>12.1f}{d['overhead'] / max(d['wall'], 1e-9):>15.3f}{d['attempts']:>10}"
              f"{d['dataset']:>11.1f}{d['environment']:>11.1f}{d['probe']:>9.1f}   "
              + (" / ".join(f"{split.get(k, 0):.2f}" for k in ("generator", "hub_rubric", "gate"))
                 if split else "-"))
    print("overhead = gate + generator run + env install + probe + bookkeeping (phases "
          "dataset, environment, probe, summed over the iteration's attempts); the teacher's "
          "time is excluded from both columns")


if __name__ == "__main__":
    main()
