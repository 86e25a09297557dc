"""Phase 1 (introspect the hub env) and Phase 2 (iter_0 baseline, or --init-from)."""
from __future__ import annotations

import os
from pathlib import Path

from driver import envs, faults, scratchpad
from driver.context import Ctx
from driver.errors import DriverError, UsageError
from driver.phases.arm import Arm, evaluate, metrics_entry, train
from driver.state import atomic_write_json, atomic_write_text, read_json


def introspect(ctx: Ctx) -> None:
    if not ctx.rd.metrics_json.exists():
        atomic_write_json(ctx.rd.metrics_json, {"iters": [], "controls": []})
    if not ctx.rd.scratchpad.exists():
        scratchpad.render(ctx)
    if ctx.rd.hub_env_json.exists():
        return
    env_id = ctx.state.dataset
    try:
        info, fingerprints = envs.introspect_with_fingerprints(ctx.backend.python, env_id)
    except DriverError:
        ctx.state.status = "aborted"
        ctx.state.reason = "hub env not found"
        ctx.save()
        raise
    info["hub_id"] = ctx.state.hub_id
    if fingerprints is not None:  # hashes only; the gate's blind decontamination reads them
        atomic_write_json(ctx.rd.path / "eval_fingerprints.json", fingerprints)
    faults.point("introspect:before-write")
    atomic_write_json(ctx.rd.hub_env_json, info)
    ctx._hub = info
    ctx.say(f"[introspect] {env_id}: {info['env_class']} / {info['parser_class']} / "
            f"{info['rubric_class']}; train {info['train_size']}, eval {info['eval_size']}")


def baseline(ctx: Ctx) -> None:
    if ctx.state.init_from:
        return init_from(ctx)
    arm = Arm("iter_0", ctx.iter_dir(0), resume_step=None)
    arm.dir.mkdir(parents=True, exist_ok=True)
    base = Path(ctx.state.base_config) if ctx.state.base_config else arm.dir / "base_rl.toml"
    overlay = arm.dir / "eval_overlay.toml"
    if not ctx.state.base_config and not base.exists():
        text = ctx.dialect.render_base(ctx.hub, ctx.knobs)
        ctx.dialect.check_rendered(text)
        atomic_write_text(base, text)
    if not overlay.exists():
        text = ctx.dialect.render_eval_overlay(ctx.hub, ctx.knobs)
        ctx.dialect.check_rendered(text)
        atomic_write_text(overlay, text)
    train(ctx, arm, [base, overlay], ctx.dialect.iter0_overrides(ctx.knobs, arm.out))
    summary = evaluate(ctx, arm, rows=ctx.hub["train_size"], extra={"source": "trained"})
    ctx.rd.upsert_metric("iters", "iter", metrics_entry(summary, iter=0,
                                                        source="trained"))
    ctx.state.iter_0_source = "trained"
    ctx.state.iter_0_path = str(arm.out)
    ctx.state.iter_0_step = summary["final_step"]
    ctx.save()
    scratchpad.render(ctx)


def init_from(ctx: Ctx) -> None:
    """Phase 2A: reuse a prior run as iter_0, in place (symlinks, no copies of weights)."""
    src = Path(ctx.state.init_from)
    out = src / "prime_out"
    steps = ctx.dialect.steps(out / "weights")
    if not steps:
        raise UsageError(f"--init-from {src}: no weights/step_N under {out}")
    f = steps[-1]
    required = [src / "run.json", src / "metrics.json",
                *(out / "weights" / f"step_{f}" / n for n in ("model.safetensors", "config.json", "tokenizer.json")),
                out / "checkpoints" / f"step_{f}" / "trainer",
                ctx.dialect.train_file(out, f), ctx.dialect.eval_file(out, f)]
    missing = [str(p) for p in required if not p.exists()]
    if missing:
        raise UsageError(f"--init-from {src} is missing: {', '.join(missing)}")
    prior = read_json(src / "metrics.json")
    accs = [i.get("eval_acc") for i in prior.get("iters", []) if i.get("eval_acc") is not None]
    if not accs:
        raise UsageError(f"--init-from {src}: its metrics.json records no eval_acc")
    dst = ctx.iter_dir(0) / "prime_out"
    for tree in ctx.dialect.checkpoint_trees(out, f) + [ctx.dialect.rollouts_dir(out) / f"step_{f}"]:
        if tree.exists():
            link = dst / tree.relative_to(out)
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                os.symlink(tree, link)
    summary = {"eval_acc": accs[-1], "source": "init-from", "final_step": f,
               "checkpoint": str(out / "weights" / f"step_{f}"), "correct_by_example": None}
    atomic_write_json(ctx.iter_dir(0) / "eval_summary.json", summary)
    atomic_write_json(ctx.iter_dir(0) / "train_done.json", {"final_step": f, "source": "init-from"})
    ctx.rd.upsert_metric("iters", "iter", {"iter": 0, "eval_acc": accs[-1], "source": "init-from",
                                           "checkpoint": summary["checkpoint"], "final_step": f})
    ctx.state.iter_0_source, ctx.state.iter_0_path, ctx.state.iter_0_step = "init-from", str(src), f
    ctx.save()
    scratchpad.render(ctx)
