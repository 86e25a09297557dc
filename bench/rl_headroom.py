"""Does GRPO move the embedded student, and does targeted data move it more than untargeted
data? Measured on the hub env's *selection* split and on two fresh sets (none of their problems in
any split): 200 train-range problems whose running stock reaches 100 (the planted skill), and
200 OOD100-shaped ones (operands up to 100); never on the test split.

    python bench/rl_headroom.py [--model DIR|RECIPE] [--steps 30] [--anchor-only]
    python bench/rl_headroom.py --sweep [--model ...]      # the RL settings sweep (README)

1. anchor: `--anchor-steps` GRPO steps on the hub's train rows (what iter_0 is).
2. From the anchor's checkpoint, `--steps` more steps on each arm of `--arms`:
   hub (the hub's train rows again), fresh (new problems in the train rows' register),
   hard (fresh, >= 3 structural features), three_digit (fresh, every running stock reaching
   100: the planted weakness, perfectly targeted), plain / plain_three_digit (the same in the
   family generator's plain wording, what the built-in teacher writes); `kind*3` trains at 3x
   the lr.

`--sweep` runs the anchor alone under each of a fixed list of RL settings (temperature, lr,
KL, group size, steps) and prints one row per setting: how far iter_0's GRPO moves greedy
accuracy from the student it starts from. Every other flag (`--temperature`, `--lr`, `--group`,
`--batch`, `--kl`, `--updates`, `--no-scale`, `--length-norm`, `--optimizer`, `--filter`,
`--refills`) sets every arm's rollouts and optimiser; `--anchor-kind` trains the anchor on any
arm's rows instead of the hub's (what RL on those rows does to the student itself).
`--draws N` also samples every wide problem N times at temperature 1.0 and prints the per-draw
success rate beside the greedy accuracy (and its paired difference from the reference).

Accuracy is printed on both eval sets, selection split by whether a problem's running stock
reaches 100 (read from the problem, never from a completion), each with its Wilson 95%
interval, and every arm's paired lift over the anchor (Newcombe 95% interval, exact McNemar p).
Only example ids and rewards are read from the eval files.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from driver.dialects.classic import ClassicDialect  # noqa: E402
from driver.analysis.evaluation import wilson_interval  # noqa: E402
from driver.analysis.stats import paired  # noqa: E402
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
[orchestrator.buffer]
online_difficulty_filtering = {filtering}
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
name = "val"
args = {{kind = "hub", eval_kind = "selection"}}
[[orchestrator.eval.env]]
id = "headroom_env"
name = "three"
args = {{kind = "hub", eval_kind = "three"}}
[[orchestrator.eval.env]]
id = "headroom_env"
name = "wide"
args = {{kind = "hub", eval_kind = "wide"}}
{draws_block}[trainer.optim]
lr = {lr}
[embedded]
kl_beta = {kl}
updates_per_batch = {updates}
seed = {seed}
scale_advantages = {scale}
freeze_embeddings = {freeze}
length_normalization = "{length_norm}"
optimizer = "{optimizer}"
max_refills = {refills}
"""

# The sweep: one anchor per row, each changing one or two settings from the first.
SWEEP = [
    {"temperature": 1.0, "lr": 1e-4},
    {"temperature": 0.7, "lr": 1e-4},
    {"temperature": 0.5, "lr": 1e-4},
    {"temperature": 0.7, "lr": 3e-5},
    {"temperature": 0.7, "lr": 1e-5},
    {"temperature": 0.7, "lr": 1e-4, "kl": 0.05},
    {"temperature": 0.7, "lr": 1e-4, "group": 8},
    {"temperature": 0.7, "lr": 1e-4, "updates": 1},
    {"temperature": 0.7, "lr": 3e-5, "anchor_steps": 60},
]


STOCK_KEY = json.dumps({"args": {}, "id": "stock_arithmetic"}, sort_keys=True)


def default_model(name: str | None = None) -> Path:
    """The shipped student of a recipe (default: the demo student, the bare recipe name)."""
    from embedded_trainer import recipe

    built = recipe.PREBUILT / recipe.model_dir_name(name or recipe.RECIPE_PREFIX, STOCK_KEY)
    if not (built / "DONE").exists():
        sys.exit(f"no prebuilt student {built.name} under {recipe.PREBUILT}; pass --model DIR")
    return built


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

    return recipe.materialize(name, vf.load_environment("stock_arithmetic"), STOCK_KEY)


DRAWS_BLOCK = """[[orchestrator.eval.env]]
id = "headroom_env"
name = "draws"
rollouts_per_example = {draws}
args = {{kind = "hub", eval_kind = "wide"}}
"""


def per_draw(rows: list[dict], env: str) -> dict[str, float]:
    """example id -> the share of its stochastic draws (temperature 1.0) that were right."""
    got: dict[str, list[int]] = {}
    for x in rows:
        if x["env_name"] == env:
            got.setdefault(str(x["example_id"]), []).append(int(float(x["reward"]) >= 0.5))
    return {k: sum(v) / len(v) for k, v in got.items()}


def correct(rows: list[dict], env: str) -> dict[str, int]:
    """example id -> 1/0 from the reward alone (no completion text is read)."""
    return {str(x["example_id"]): int(float(x["reward"]) >= 0.5) for x in rows if x["env_name"] == env}


# selection example id -> does its running stock reach 100 (from the problem, not a rollout)
THREE_DIGIT = {str(i): max(running(r["info"]["problem"])) >= 100
               for i, r in enumerate(build_splits(0)["selection"])}
# selection example id -> its population (ID50 or OOD100: the selection split is drawn from the
# test split's distribution, so its OOD100 half is where a lift on the test split's shows)
POPULATION = {str(i): r["info"]["population"] for i, r in enumerate(build_splits(0)["selection"])}


def read_eval(path: Path) -> dict:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x]
    return {"val": correct(rows, "val"), "three": correct(rows, "three"), "wide": correct(rows, "wide"),
            "draws": per_draw(rows, "draws")}


def train(out: Path, model, kind: str, s: dict, max_steps: int, resume: int | None) -> dict:
    out.mkdir(parents=True, exist_ok=True)   # a resuming arm already holds the anchor's trees
    cfg = out / "rl.toml"
    cfg.write_text(CONFIG.format(max_steps=max_steps, model=model, kind=kind,
                                 resume=f"resume_step = {resume}" if resume else "",
                                 draws_block=DRAWS_BLOCK.format(draws=s["draws"]) if s["draws"] else "",
                                 **{k: v for k, v in s.items() if k != "draws"}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "bench"), str(ROOT)])}
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "embedded_trainer.rl", "@", str(cfg),
                        "--output-dir", str(out)], capture_output=True, text=True, env=env, cwd=ROOT)
    if r.returncode != 0:
        sys.exit(f"{out.name}: trainer failed\n{r.stderr[-2000:]}")
    steps = [line.split() for line in r.stdout.splitlines() if line.startswith("step ")]
    train_r = [float(w[3]) for w in steps]
    # "zero-variance groups Z/P" and, with --filter, "filtered F": live groups trained per step,
    # and groups sampled but left out as all right or all wrong
    zero_of = [w[w.index("groups") + 1].split("/") for w in steps]
    live = [int(of) - int(zero) for zero, of in zero_of]
    filtered = [int(w[w.index("filtered") + 1]) for w in steps if "filtered" in w]
    before = read_eval(LAYOUT.eval_file(out, 0)) if resume is None else None
    return {"correct": read_eval(LAYOUT.eval_file(out, max_steps)), "before": before,
            "train_reward_first5": sum(train_r[:5]) / 5, "train_reward_last5": sum(train_r[-5:]) / 5,
            "live_per_step": sum(live) / max(1, len(live)),
            "filtered_per_step": sum(filtered) / len(filtered) if filtered else None,
            "seconds": time.time() - t0}


def share(res: dict, three: bool) -> str:
    got = [v for k, v in res.items() if THREE_DIGIT[k] == three]
    return f"{sum(got) / max(1, len(got)):.3f}"


def pop_share(res: dict, pop: str) -> str:
    got = [v for k, v in res.items() if POPULATION[k] == pop]
    return f"{sum(got) / max(1, len(got)):.3f}"


def acc(res: dict) -> str:
    k, n = sum(res.values()), len(res)
    lo, hi = wilson_interval(k, n)
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}]"


def lift(base: dict, res: dict) -> str:
    p = paired(base, res)
    return f"{p['lift']:+.3f} [{p['lift_ci'][0]:+.3f}, {p['lift_ci'][1]:+.3f}] p={p['p_value']:.3f}"


HEADER = (f"{'arm':<22} {'val acc [95% CI]':>22} {'ID50':>6} {'OOD100':>6} {'>=100':>6} {'<100':>6} "
          f"{'three acc [95% CI]':>22} "
          f"{'wide acc [95% CI]':>22}  {'val lift vs ref [95% CI] p':>34}  {'three lift vs ref':>34}  "
          f"{'wide lift vs ref':>34}  train reward first5 -> last5")


def draws_text(res: dict, ref: dict | None) -> str:
    """The wide set's per-draw success rate (--draws draws per problem at temperature 1.0) and,
    against a reference, the paired difference of the per-problem rates (normal 95% interval)."""
    if not res:
        return ""
    rate = sum(res.values()) / len(res)
    out = f"  wide per-draw {rate:.3f}"
    if ref:
        d = [res[k] - ref[k] for k in res if k in ref]
        m = sum(d) / len(d)
        sd = (sum((x - m) ** 2 for x in d) / max(1, len(d) - 1)) ** 0.5
        half = 1.96 * sd / len(d) ** 0.5
        out += f" ({m:+.3f} [{m - half:+.3f}, {m + half:+.3f}])"
    return out


def line(label: str, res: dict, ref: dict | None, r: dict | None) -> str:
    c = res
    out = (f"{label:<22} {acc(c['val']):>22} {pop_share(c['val'], 'ID50'):>6} "
           f"{pop_share(c['val'], 'OOD100'):>6} {share(c['val'], True):>6} {share(c['val'], False):>6} "
           f"{acc(c['three']):>22} {acc(c['wide']):>22}")
    if ref is not None:
        out += "".join(f"  {lift(ref[k], c[k]):>34}" for k in ("val", "three", "wide"))
    out += draws_text(c.get("draws") or {}, (ref or {}).get("draws"))
    if r is not None:
        out += (f"  {r['train_reward_first5']:.3f} -> {r['train_reward_last5']:.3f} "
                f"(live {r['live_per_step']:.1f}/step"
                + (f", filtered {r['filtered_per_step']:.1f}/step" if r["filtered_per_step"] is not None else "")
                + f"; {r['seconds']:.0f} s)")
    return out


def settings(a, **over) -> dict:
    s = {"temperature": a.temperature, "lr": a.lr, "group": a.group, "batch": a.batch,
         "kl": a.kl, "updates": a.updates, "seed": a.seed,
         "scale": "false" if a.no_scale else "true",
         "freeze": "true" if a.freeze_embeddings else "false",
         "length_norm": a.length_norm, "optimizer": a.optimizer,
         "filtering": "true" if a.filter else "false", "refills": a.refills, "draws": a.draws}
    s.update({k: v for k, v in over.items() if k in s})
    return s


def sweep(a, model, work: Path) -> None:
    print("one anchor per setting (GRPO on the hub's train rows from the student); lift vs the "
          "student itself\n" + HEADER, flush=True)
    student = None
    for i, over in enumerate(SWEEP):
        s = settings(a, **over)
        steps = over.get("anchor_steps", a.anchor_steps or a.steps)
        res = train(work / f"sweep_{i}", model, "hub", s, steps, None)
        if student is None:
            student = res["before"]
            print(line("student (no RL)", student, None, None), flush=True)
        label = " ".join(f"{k}={v}" for k, v in over.items()) + (
            "" if "anchor_steps" in over else f" steps={steps}")
        print(line(label, res["correct"], student, res), flush=True)
        shutil.rmtree(work / f"sweep_{i}", ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="student directory or builtin:tiny-char-qwen2?... "
                    "recipe (default: the prebuilt student)")
    ap.add_argument("--anchor-only", action="store_true", help="stop after the anchor")
    ap.add_argument("--anchor-kind", default="hub",
                    help="the rows the anchor trains on (default hub, what iter_0 is; any arm kind)")
    ap.add_argument("--sweep", action="store_true", help="run the fixed sweep of anchor settings")
    ap.add_argument("--steps", type=int, default=30, help="GRPO steps per arm (default 30, the driver's)")
    ap.add_argument("--anchor-steps", type=int, default=None, help="the anchor's steps (default --steps)")
    ap.add_argument("--lr", type=float, default=1e-4, help="learning rate (default 1e-4)")
    ap.add_argument("--temperature", type=float, default=1.0, help="train rollout temperature (default 1.0)")
    ap.add_argument("--group", type=int, default=4, help="completions per prompt (default 4)")
    ap.add_argument("--batch", type=int, default=64, help="rollouts per step (default 64)")
    ap.add_argument("--kl", type=float, default=0.0, help="KL to the student before RL (default 0)")
    ap.add_argument("--updates", type=int, default=2, help="optimiser steps per batch (default 2)")
    ap.add_argument("--seed", type=int, default=0, help="the trainer's seed (default 0)")
    ap.add_argument("--freeze-embeddings", action="store_true",
                    help="leave the (tied) token embeddings out of the RL update")
    ap.add_argument("--no-scale", action="store_true",
                    help="advantages r - mean, not divided by the group's std (Dr. GRPO)")
    ap.add_argument("--length-norm", choices=("response", "constant"), default="response",
                    help="each response's loss over its own tokens (seed 003) or over the "
                    "generation limit (Dr. GRPO; no length bias)")
    ap.add_argument("--optimizer", choices=("adamw", "sgd"), default="adamw",
                    help="adamw (prime-rl's) or sgd with momentum 0.9 (give it a larger --lr)")
    ap.add_argument("--filter", action="store_true",
                    help="prime-rl's online difficulty filtering: groups all right or all wrong "
                    "leave the batch and further draws fill it (up to --refills)")
    ap.add_argument("--refills", type=int, default=3, help="further draws per step with --filter")
    ap.add_argument("--arms", default="hub,fresh,hard,fresh*3",
                    help="comma-separated arms after the anchor: hub, fresh, hard, three_digit, "
                    "plain, plain_three_digit; kind*3 for 3x lr (default hub,fresh,hard,fresh*3)")
    ap.add_argument("--draws", type=int, default=0,
                    help="also sample each wide problem this many times at temperature 1.0 and "
                    "print the per-draw success rate (default 0: greedy only)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep every arm's output (eval rollouts included) under this directory")
    a = ap.parse_args()
    model = resolve_model(a.model)
    work = a.keep.resolve() if a.keep else Path(tempfile.mkdtemp(prefix="rl-headroom-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if a.sweep:
            print(f"student {getattr(model, 'name', model)}; eval: selection split and 200 fresh "
                  "wide problems, greedy", flush=True)
            return sweep(a, model, work)
        anchor_steps = a.anchor_steps or a.steps
        s = settings(a)
        print(f"student {getattr(model, 'name', model)}; anchor {anchor_steps} steps, {a.steps} per arm; "
              f"{s}; eval: selection split and 200 fresh wide problems, greedy", flush=True)
        anchor = train(work / "anchor", model, a.anchor_kind, s, anchor_steps, None)
        print(HEADER)
        print(line("student (no RL)", anchor["before"], None, None))
        print(line(f"anchor ({a.anchor_kind})", anchor["correct"], anchor["before"], anchor), flush=True)
        arms = [] if a.anchor_only else [x.strip() for x in a.arms.split(",") if x.strip()]
        got = {}
        for arm in arms:
            kind, _, mult = arm.partition("*")
            out = work / arm.replace("*", "x")
            for tree in LAYOUT.checkpoint_trees(work / "anchor", anchor_steps):
                shutil.copytree(tree, out / tree.relative_to(work / "anchor"))
            res = train(out, model, kind, {**s, "lr": a.lr * float(mult or 1)},
                        anchor_steps + a.steps, anchor_steps)
            print(line(arm, res["correct"], anchor["correct"], res), flush=True)
            got[arm] = res["correct"]
        for arm in arms[1:]:   # the first arm against each other one, paired (targeted vs not)
            print(line(f"{arms[0]} vs {arm}", got[arms[0]], got[arm], None), flush=True)
        n3 = sum(THREE_DIGIT.values())
        print(f"(lifts: the student's for the anchor, the anchor's for every arm, the second arm's "
              f"for 'A vs B' lines; ID50 / OOD100: selection's two halves; >=100: the {n3} "
              f"selection problems whose running stock reaches 100; <100: the other "
              f"{len(THREE_DIGIT) - n3}; three: 200 fresh train-range problems reaching 100; wide: 200 "
              "fresh problems with an operand above 50)")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
