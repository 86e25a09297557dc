"""Does more GRPO move the embedded student, and does fresh data help more than the hub's own
train rows? Measured on the hub env's *validation* split, never the test split.

    python bench/rl_headroom.py [--model DIR|RECIPE] [--steps 30] [--anchor-only]

1. anchor: the default student, `--steps` GRPO steps on the hub's train rows with the driver's
   local defaults (what iter_0 is).
2. From the anchor's checkpoint, `--steps` more steps on each of: the hub's train rows again;
   fresh problems in the train rows' exact register (the best case for any teacher: new
   problems the student can read); fresh problems with >= 3 structural features (what the
   dataset gate asks 40% of a teacher's rows to be); fresh problems at 3x the learning rate.

`--model builtin:tiny-char-qwen2?sft_steps=400` builds (and caches) another warm start by the
same recipe; `--anchor-only` stops after the anchor. Prints the student's own accuracy, then each arm's greedy validation accuracy with its Wilson 95% interval and its paired lift
over the anchor (Newcombe 95% interval, exact McNemar p), side by side. Only example ids and
rewards are read from the eval files. About 5 minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from driver.dialects.classic import ClassicDialect  # noqa: E402
from driver.evaluation import wilson_interval  # noqa: E402
from driver.stats import paired  # noqa: E402

LAYOUT = ClassicDialect()
CONFIG = """max_steps = {max_steps}
seq_len = 2048
[model]
name = "{model}"
[ckpt]
interval = {max_steps}
{resume}
[orchestrator]
batch_size = 64
rollouts_per_example = 4
[orchestrator.train.sampling]
max_completion_tokens = 96
[[orchestrator.train.env]]
id = "headroom_env"
args = {{kind = "{kind}"}}
[orchestrator.eval]
interval = {max_steps}
[orchestrator.eval.sampling]
max_completion_tokens = 96
[[orchestrator.eval.env]]
id = "headroom_env"
args = {{kind = "hub"}}
[trainer.optim]
lr = {lr}
"""


def default_model() -> Path:
    built = sorted(p.parent for p in (ROOT / "embedded_trainer" / "prebuilt").glob("*/DONE"))
    if not built:
        sys.exit("no prebuilt student under embedded_trainer/prebuilt; pass --model DIR")
    return built[0]


def correct(rows: list[dict]) -> dict[str, int]:
    """example id -> 1/0 from the reward alone (no completion text is read)."""
    return {str(x["example_id"]): int(float(x["reward"]) >= 0.5) for x in rows}


def train(out: Path, model: Path | str, kind: str, lr: float, max_steps: int, resume: int | None) -> dict:
    out.mkdir(parents=True, exist_ok=True)   # a resuming arm already holds the anchor's trees
    cfg = out / "rl.toml"
    cfg.write_text(CONFIG.format(max_steps=max_steps, model=model, kind=kind, lr=lr,
                                 resume=f"resume_step = {resume}" if resume else ""))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT)])}
    r = subprocess.run([sys.executable, "-m", "embedded_trainer.rl", "@", str(cfg),
                        "--output-dir", str(out)], capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"{out.name}: trainer failed\n{r.stderr[-2000:]}")
    rows = [json.loads(x) for x in LAYOUT.eval_file(out, max_steps).read_text().splitlines() if x]
    train_r = [float(line.split()[3]) for line in r.stdout.splitlines() if line.startswith("step ")]
    first = LAYOUT.eval_file(out, resume or 0)
    before = [json.loads(x) for x in first.read_text().splitlines() if x] if resume is None else None
    return {"correct": correct(rows), "before": correct(before) if before else None,
            "train_reward_first5": sum(train_r[:5]) / 5,
            "train_reward_last5": sum(train_r[-5:]) / 5}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="student directory or builtin:tiny-char-qwen2?... "
                    "recipe (default: the prebuilt student)")
    ap.add_argument("--anchor-only", action="store_true", help="stop after the anchor")
    ap.add_argument("--steps", type=int, default=30, help="GRPO steps per arm (default 30, the driver's)")
    ap.add_argument("--lr", type=float, default=1e-4, help="learning rate (default 1e-4, the driver's)")
    a = ap.parse_args()
    model = a.model if a.model and a.model.startswith("builtin:") else \
        Path(a.model or default_model()).resolve()
    work = Path(tempfile.mkdtemp(prefix="rl-headroom-"))
    try:
        print(f"student {getattr(model, 'name', model)}; {a.steps} steps per arm; eval: validation split, greedy", flush=True)
        anchor = train(work / "anchor", model, "hub", a.lr, a.steps, None)
        results = {"student (no RL)": {"correct": anchor["before"], "train_reward_first5": None},
                   "anchor (hub train)": anchor}
        arms = [] if a.anchor_only else [("hub train again", "hub", a.lr), ("fresh, train register", "fresh", a.lr),
                ("fresh, >=3 features", "hard", a.lr), ("fresh, lr x3", "fresh", 3 * a.lr)]
        for label, kind, lr in arms:
            out = work / kind / str(lr)
            for tree in LAYOUT.checkpoint_trees(work / "anchor", a.steps):
                shutil.copytree(tree, out / tree.relative_to(work / "anchor"))
            print(f"  training: {label} ...", flush=True)
            results[label] = train(out, model, kind, lr, 2 * a.steps, a.steps)
        print(f"\n{'arm':<24} {'val acc':>8} {'95% CI':>15} {'lift vs anchor':>15} {'95% CI':>17} "
              f"{'p':>6}  train reward first5 -> last5")
        base = anchor["correct"]
        for label, res in results.items():
            k, n = sum(res["correct"].values()), len(res["correct"])
            lo, hi = wilson_interval(k, n)
            line = f"{label:<24} {k / n:>8.3f} [{lo:.3f}, {hi:.3f}]"
            if res["train_reward_first5"] is None:
                print(line)
                continue
            if res is anchor:
                line += f" {'':>15} {'':>17} {'':>6}"
            else:
                p = paired(base, res["correct"])
                line += (f" {p['lift']:>+15.3f} [{p['lift_ci'][0]:+.3f}, {p['lift_ci'][1]:+.3f}]"
                         f" {p['p_value']:>6.3f}")
            print(line + f"  {res['train_reward_first5']:.3f} -> {res['train_reward_last5']:.3f}  (n={n})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
