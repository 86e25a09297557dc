"""Phase 4: two control runs, after the budget, on their own time.

Run A replays the best dataset from iter_0's checkpoint (does the lift reproduce?). Run B trains
from the base model on the hub env's train data plus the best dataset (does mixing beat either?).
A control that fails is recorded in run.json's phase4_errors and the run goes on.
"""
from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

from driver import envs, scratchpad, training
from driver.context import Ctx
from driver.errors import DriverError
from driver.phases.arm import Arm, evaluate, install_env, metrics_entry, train
from driver.state import atomic_write_json, atomic_write_text, read_json

ARMS = {"run_a": "run_a_best_from_iter0", "run_b": "run_b_combined_from_base"}


def best_iteration(ctx: Ctx) -> dict | None:
    iters = [m for m in ctx.rd.load_metrics()["iters"]
             if m.get("iter", 0) >= 1 and m.get("eval_acc") is not None]
    if not iters:
        return None
    best = max(iters, key=lambda m: (m["eval_acc"], -m["iter"]))  # ties: the earliest
    d = ctx.iter_dir(best["iter"])
    rel = d.relative_to(ctx.rd.path)  # paths relative to the run directory: it can move
    record = {"best_iter": best["iter"], "eval_acc": best["eval_acc"],
              "dataset": str(rel / "dataset.jsonl"),
              "env_dir": str(rel / envs.package_name(ctx.state.dataset, f"iter_{best['iter']}", ctx.state.env_tag)),
              "rl_toml": str(rel / "rl.toml")}
    path = ctx.rd.path / "best_iter.json"
    if not path.exists() or read_json(path) != record:
        atomic_write_json(path, record)
    return record


def _hub_train_block(ctx: Ctx) -> dict:
    """Run B's first train env: the exact block iter_0 trained on (canonical config if given)."""
    base = Path(ctx.state.base_config) if ctx.state.base_config else ctx.iter_dir(0) / "base_rl.toml"
    if base.exists():
        blocks = tomllib.loads(base.read_text()).get("orchestrator", {}).get("train", {}).get("env", [])
        if blocks:
            block = dict(blocks[0])
            block.setdefault("name", "hub-train")
            return block
    return ctx.dialect.train_env_block(ctx.hub["env_id"], ctx.hub.get("env_args"), name="hub-train")


def run_control(ctx: Ctx, which: str) -> None:
    best = best_iteration(ctx)
    if best is None:
        msg = f"{which}: skipped, no iteration produced an evaluated model"
        if msg not in ctx.state.phase4_errors:
            ctx.state.phase4_errors.append(msg)
            ctx.save()
        return
    d = ctx.rd.path / ARMS[which]
    d.mkdir(parents=True, exist_ok=True)
    data = d / "dataset.jsonl"
    if not data.exists():
        shutil.copyfile(ctx.rd.path / best["dataset"], d / "dataset.jsonl.tmp")
        (d / "dataset.jsonl.tmp").rename(data)
    resume = ctx.state.iter_0_step if which == "run_a" else None
    arm = Arm(which, d, resume_step=resume,
              package=envs.package_name(ctx.state.dataset, which, ctx.state.env_tag), dataset=data)
    try:
        install_env(ctx, arm)
        cfg = d / "rl.toml"
        if not cfg.exists():
            gen_block = ctx.dialect.train_env_block(arm.package, name=arm.package)
            train_envs = [gen_block] if which == "run_a" else [_hub_train_block(ctx), gen_block]
            purpose = ("best dataset replayed from iter_0" if which == "run_a"
                       else "hub train data + best dataset, from the base model")
            text = ctx.dialect.render_run(arm=which, purpose=purpose, hub=ctx.hub, knobs=ctx.knobs,
                                          train_envs=train_envs, resume_step=resume)
            ctx.dialect.check_rendered(text)
            atomic_write_text(cfg, text)
        train(ctx, arm, [cfg], ["--output-dir", str(arm.out)])
        summary = evaluate(ctx, arm, rows=training.count_lines(data))
    except DriverError as e:
        msg = f"{which}: {str(e).splitlines()[0]}"
        if msg not in ctx.state.phase4_errors:
            ctx.state.phase4_errors.append(msg)
            ctx.save()
        ctx.say(f"[{which}] failed, recorded in run.json phase4_errors: {msg}")
        return
    ctx.rd.upsert_metric("controls", "run", metrics_entry(summary, run=which,
                                                           best_iter=best["best_iter"]))
    scratchpad.render(ctx)
