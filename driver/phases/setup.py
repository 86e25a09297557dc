"""Phase 1 (introspect the hub env) and Phase 2 (iter_0 baseline, or --init-from)."""
from __future__ import annotations

import os
from pathlib import Path

from driver.envs import hub as envs
from driver.analysis import evaluation
from driver import faults
from driver.reporting import scratchpad
from driver import teachers
from driver.context import Ctx
from driver.errors import DriverError, UsageError
from driver.arms.arm import Arm
from driver.arms.evaluate import evaluate, metrics_entry
from driver.arms.train import train
from driver.run.files import atomic_write_json, atomic_write_text


def introspect(ctx: Ctx) -> None:
    if not ctx.rd.metrics_json.exists():
        atomic_write_json(ctx.rd.metrics_json, {"iters": [], "controls": []})
    if not ctx.rd.scratchpad.exists():
        scratchpad.render(ctx)
    if not ctx.rd.hub_env_json.exists():
        _introspect(ctx)
    # before anything trains: a teacher that cannot teach on this env stops the run here (exit
    # 2), resumable with another teacher, instead of after hours of iter_0
    teachers.preflight(ctx.state, ctx.hub)
    warning = think_parser_warning(ctx.state.model, ctx.hub)
    if warning:
        ctx.say(f"[introspect] warning: {warning}")


def think_parser_warning(model: str, hub: dict) -> str | None:
    """A Qwen3 student writes <think>...</think> before its answer; a hub parser that strips
    think blocks (ThinkParser and its kin) changes what the rubric sees. The generated env mirrors
    the hub's parser regardless (the hub author's call), so the run says so before iter_0."""
    parser = str(hub.get("parser_class", ""))
    if "qwen3" in model.lower() and "think" in parser.lower():
        return (f"the student {model} emits <think>...</think> blocks and the hub parser "
                f"{parser} strips them before the rubric scores the answer. The generated envs "
                "mirror the hub's parser, as they must; check on iter_0's train rollouts that "
                "answers after the think block earn reward (a think block cut off by the token "
                "limit leaves no answer).")
    return None


def _introspect(ctx: Ctx) -> None:
    env_id = ctx.state.dataset
    try:
        info, fingerprints = envs.introspect_with_fingerprints(
            ctx.trainer.python, env_id, ctx.state.env_args, hub_id=ctx.state.hub_id,
            kind=ctx.dialect.env_kind)
    except DriverError:
        ctx.aborted("hub env not found")
        raise
    info["hub_id"] = ctx.state.hub_id
    if fingerprints is not None:  # hashes only; the gate's blind decontamination reads them
        atomic_write_json(ctx.rd.path / "eval_fingerprints.json", fingerprints)
    faults.point("introspect:before-write")
    atomic_write_json(ctx.rd.hub_env_json, info)
    ctx._hub = info
    ctx.say(f"[introspect] {env_id}: {info['env_class']} / {info['parser_class']} / "
            f"{info['rubric_class']}; train {info['train_size']}, eval {info['eval_size']}")


def iter0_configs(ctx: Ctx) -> list[Path]:
    """iter_0's config files, rendered once (the canonical config when one was given, else the
    base template) with the eval overlay beside it."""
    d = ctx.iter_dir(0)
    d.mkdir(parents=True, exist_ok=True)
    base = Path(ctx.state.base_config) if ctx.state.base_config else d / "base_rl.toml"
    overlay = d / "eval_overlay.toml"
    if not ctx.state.base_config and not base.exists():
        text = ctx.dialect.render_base(ctx.hub, ctx.knobs)
        ctx.dialect.check_rendered(text)
        atomic_write_text(base, text)
    if not overlay.exists():
        text = ctx.dialect.render_eval_overlay(ctx.hub, ctx.knobs)
        ctx.dialect.check_rendered(text)
        atomic_write_text(overlay, text)
    return [base, overlay]


def baseline(ctx: Ctx) -> None:
    if ctx.state.init_from:
        return init_from(ctx)
    arm = Arm("iter_0", ctx.iter_dir(0), resume_step=None)
    train(ctx, arm, iter0_configs(ctx), ctx.dialect.iter0_overrides(ctx.knobs, arm.out))
    summary = evaluate(ctx, arm, rows=ctx.hub["train_size"], extra={"source": "trained"})
    ctx.rd.upsert_metric("iters", "iter", metrics_entry(summary, iter=0,
                                                        source="trained"))
    ctx.anchored("trained", str(arm.out), summary["final_step"])
    scratchpad.render(ctx)


def init_from_problems(dialect, src: Path) -> tuple[int | None, list[str]]:
    """(final step, what is missing) for a prior run reused as iter_0: its run.json and
    metrics.json, the final step's weights files, all four checkpoint trees a resuming arm
    pre-stages, and its train and eval rollouts. Checked by `driver run` before anything starts."""
    out = Path(src) / "prime_out"
    steps = dialect.steps(out / "weights")
    if not steps:
        return None, [f"no weights/step_N under {out}"]
    f = steps[-1]
    required = [Path(src) / "run.json", Path(src) / "metrics.json",
                *(out / "weights" / f"step_{f}" / n for n in ("model.safetensors", "config.json", "tokenizer.json")),
                *dialect.checkpoint_trees(out, f),
                dialect.train_file(out, f), dialect.eval_file(out, f)]
    return f, [str(p) for p in required if not p.exists()]


def init_from(ctx: Ctx) -> None:
    """Phase 2A: reuse a prior run as iter_0, in place (symlinks, no copies of weights). Its
    final eval is aggregated like any arm's (numbers only), so the inherited baseline carries
    per-example results and every later arm gets a paired lift against it."""
    src = Path(ctx.state.init_from)
    out = src / "prime_out"
    f, missing = init_from_problems(ctx.dialect, src)
    if missing:
        raise UsageError(f"--init-from {src} is missing: {', '.join(missing)}")
    dst = ctx.iter_dir(0) / "prime_out"
    for tree in ctx.dialect.checkpoint_trees(out, f) + [ctx.dialect.rollouts_dir(out) / f"step_{f}"]:
        if tree.exists():
            link = dst / tree.relative_to(out)
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                os.symlink(tree, link)
    summary = evaluation.aggregate(ctx.dialect.eval_file(out, f), selection_env=ctx.dialect.selection_env)
    summary.update({"source": "init-from", "final_step": f, "rows": None,
                    "checkpoint": str(out / "weights" / f"step_{f}")})
    atomic_write_json(ctx.iter_dir(0) / "eval_summary.json", summary)
    atomic_write_json(ctx.iter_dir(0) / "train_done.json", {"final_step": f, "source": "init-from"})
    ctx.rd.upsert_metric("iters", "iter", metrics_entry(summary, iter=0, source="init-from"))
    ctx.anchored("init-from", str(src), f)
    scratchpad.render(ctx)
