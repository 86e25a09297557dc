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
same recipe; `--anchor-only` stops after the anchor. `--arms` picks the arms (`hub`, `fresh`,
`hard`, `three_digit`; `kind*3` trains at 3x the lr); `--temperature`, `--group`, `--batch` and
`--kl` set the rollout temperature, group size, rollouts per step and KL to the anchor for
every arm. Accuracy is also split by whether a validation problem's running stock reaches 100
(the weakness a streamed warm start can plant), read from the validation problem, never from a
completion. Prints the student's own accuracy, then each arm's greedy validation accuracy with its Wilson 95% interval and its paired lift
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
from generators.stock_arithmetic import running  # noqa: E402
from stock_arithmetic.data import build_splits  # noqa: E402

LAYOUT = ClassicDialect()
CONFIG = """max_steps = {max_steps}
seq_len = 2048
[model]
name = "{model}"
[ckpt]
interval = {max_steps}
{resume}
[orchestrator]
batch_size = {batch}
rollouts_per_example = {group}
[orchestrator.train.sampling]
max_completion_tokens = 96
temperature = {temperature}
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
[embedded]
kl_beta = {kl}
"""


def default_model() -> Path:
    built = sorted(p.parent for p in (ROOT / "embedded_trainer" / "prebuilt").glob("*/DONE"))
    if not built:
        sys.exit("no prebuilt student under embedded_trainer/prebuilt; pass --model DIR")
    return built[0]


def resolve_model(name: str | None) -> Path:
    """A model directory: the prebuilt student, a directory, or a recipe built (and cached) for
    the stock_arithmetic env exactly as the driver's embedded trainer builds it, so the bench and
    a `driver run --model RECIPE` share one cached student."""
    if not name:
        return default_model()
    if not name.startswith("builtin:"):
        return Path(name).resolve()
    import verifiers as vf

    from embedded_trainer import recipe

    key = json.dumps({"args": {}, "id": "stock_arithmetic"}, sort_keys=True)
    return recipe.materialize(name, vf.load_environment("stock_arithmetic"), key)


def correct(rows: list[dict]) -> dict[str, int]:
    """example id -> 1/0 from the reward alone (no completion text is read)."""
    return {str(x["example_id"]): int(float(x["reward"]) >= 0.5) for x in rows}


# validation example id -> does its running stock reach 100 (from the problem, not a rollout)
THREE_DIGIT = {str(i): max(running(r["info"]["problem"])) >= 100
               for i, r in enumerate(build_splits(0)["validation"])}


def train(out: Path, model, kind: str, lr: float, max_steps: int, resume: int | None, a) -> dict:
    out.mkdir(parents=True, exist_ok=True)   # a resuming arm already holds the anchor's trees
    cfg = out / "rl.toml"
    cfg.write_text(CONFIG.format(max_steps=max_steps, model=model, kind=kind, lr=lr,
                                 resume=f"resume_step = {resume}" if resume else "",
                                 batch=a.batch, group=a.group, temperature=a.temperature, kl=a.kl))
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


def share(res: dict, three: bool) -> str:
    got = [v for k, v in res.items() if THREE_DIGIT[k] == three]
    return f"{sum(got) / max(1, len(got)):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="student directory or builtin:tiny-char-qwen2?... "
                    "recipe (default: the prebuilt student)")
    ap.add_argument("--anchor-only", action="store_true", help="stop after the anchor")
    ap.add_argument("--steps", type=int, default=30, help="GRPO steps per arm (default 30, the driver's)")
    ap.add_argument("--anchor-steps", type=int, default=None, help="the anchor's steps (default --steps)")
    ap.add_argument("--lr", type=float, default=1e-4, help="learning rate (default 1e-4, the driver's)")
    ap.add_argument("--temperature", type=float, default=1.0, help="train rollout temperature (default 1.0)")
    ap.add_argument("--group", type=int, default=4, help="completions per prompt (default 4)")
    ap.add_argument("--batch", type=int, default=64, help="rollouts per step (default 64)")
    ap.add_argument("--kl", type=float, default=0.0, help="KL to the student before RL (default 0)")
    ap.add_argument("--arms", default="hub,fresh,hard,fresh*3",
                    help="comma-separated arms after the anchor: hub, fresh, hard, three_digit, "
                    "plain, plain_three_digit; kind*3 for 3x lr (default hub,fresh,hard,fresh*3)")
    a = ap.parse_args()
    model = resolve_model(a.model)
    anchor_steps = a.anchor_steps or a.steps
    work = Path(tempfile.mkdtemp(prefix="rl-headroom-"))
    try:
        print(f"student {getattr(model, 'name', model)}; anchor {anchor_steps} steps, {a.steps} per arm; "
              f"lr {a.lr}, temperature {a.temperature}, {a.batch // a.group} prompts x {a.group}, "
              f"kl {a.kl}; eval: validation split, greedy", flush=True)
        anchor = train(work / "anchor", model, "hub", a.lr, anchor_steps, None, a)
        results = {"student (no RL)": {"correct": anchor["before"], "train_reward_first5": None},
                   "anchor (hub train)": anchor}
        arms = [] if a.anchor_only else [x.strip() for x in a.arms.split(",") if x.strip()]
        for arm in arms:
            kind, _, mult = arm.partition("*")
            lr = a.lr * float(mult or 1)
            out = work / arm.replace("*", "x")
            for tree in LAYOUT.checkpoint_trees(work / "anchor", anchor_steps):
                shutil.copytree(tree, out / tree.relative_to(work / "anchor"))
            print(f"  training: {arm} ...", flush=True)
            results[arm] = train(out, model, kind, lr, anchor_steps + a.steps, anchor_steps, a)
        print(f"\n{'arm':<20} {'val acc':>8} {'95% CI':>15} {'>=100':>6} {'<100':>6} "
              f"{'lift vs anchor':>15} {'95% CI':>17} {'p':>6}  train reward first5 -> last5")
        base = anchor["correct"]
        for label, res in results.items():
            k, n = sum(res["correct"].values()), len(res["correct"])
            lo, hi = wilson_interval(k, n)
            line = (f"{label:<20} {k / n:>8.3f} [{lo:.3f}, {hi:.3f}] {share(res['correct'], True):>6} "
                    f"{share(res['correct'], False):>6}")
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
        n3 = sum(THREE_DIGIT.values())
        print(f"(>=100: the {n3} validation problems whose running stock reaches 100; <100: the "
              f"other {len(THREE_DIGIT) - n3})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
