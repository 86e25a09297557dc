"""Phase 4: three control runs, after the budget, on their own time.

Run A replays the best dataset from iter_0's checkpoint (does the lift reproduce?). Run B trains
from the base model on the hub env's train data plus the best dataset (does mixing beat either?).
Run C trains from iter_0's checkpoint on as many rows as the best dataset, drawn without any
targeting: the family generator's plain distribution where the env has one, else a resample of
the hub's train rows (is it the teacher's analysis that helped, or any more RL on new rows?).
A control that fails is recorded in run.json's phase4_errors and the run goes on.
"""
from __future__ import annotations

import tomllib
from pathlib import Path

from driver.envs import hub as envs
from driver.reporting import scratchpad
from driver.backends import process as training
from driver.context import Ctx
from driver.errors import DriverError
from driver.arms.arm import ARMS, Arm, arm_knobs, best_iteration, evaluate, install_env, metrics_entry, train
from driver.run.files import atomic_write_text, read_json

PURPOSES = {"run_a": "best dataset replayed from iter_0",
            "run_b": "hub train data + best dataset, from the base model",
            "run_c": "untargeted rows (as many as the best dataset) from iter_0"}


def _hub_train_block(ctx: Ctx) -> dict:
    """Run B's first train env: the exact block iter_0 trained on (canonical config if given)."""
    base = Path(ctx.state.base_config) if ctx.state.base_config else ctx.iter_dir(0) / "base_rl.toml"
    if base.exists():
        blocks = ctx.dialect.train_blocks(tomllib.loads(base.read_text()))
        if blocks:
            block = dict(blocks[0])
            block.setdefault("name", "hub-train")
            return block
    return ctx.dialect.train_env_block(ctx.hub["env_id"], {**(ctx.hub.get("env_args") or {}),
                                                           **(ctx.hub.get("train_args") or {})},
                                       name="hub-train")


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
    resume = None if which == "run_b" else ctx.state.iter_0_step
    try:
        if not data.exists():
            if which == "run_c":
                untargeted_rows(ctx, best, data)
            else:
                atomic_write_text(data, (ctx.rd.path / best["dataset"]).read_text(encoding="utf-8"))
    except (DriverError, RuntimeError, ValueError) as e:
        _record_failure(ctx, which, e)
        return
    arm = Arm(which, d, resume_step=resume,
              package=envs.package_name(ctx.state.dataset, which, ctx.state.env_tag), dataset=data,
              full_eval=True)
    try:
        install_env(ctx, arm)
        cfg = d / "rl.toml"
        if not cfg.exists():
            train_envs = ctx.dialect.control_sources(
                which, _hub_train_block(ctx) if which == "run_b" else {}, arm.package)
            text = ctx.dialect.render_run(arm=which, purpose=PURPOSES[which], hub=ctx.hub,
                                          knobs=arm_knobs(ctx, arm), train_envs=train_envs,
                                          resume_step=resume, resume_from=ctx.iter_dir(0) / "prime_out")
            ctx.dialect.check_rendered(text)
            atomic_write_text(cfg, text)
        train(ctx, arm, [cfg], ["--output-dir", str(arm.out)])
        summary = evaluate(ctx, arm, rows=training.count_lines(data))
    except DriverError as e:
        _record_failure(ctx, which, e)
        return
    ctx.rd.upsert_metric("controls", "run", metrics_entry(summary, run=which,
                                                           best_iter=best["best_iter"]))
    scratchpad.render(ctx)


def _record_failure(ctx: Ctx, which: str, e: Exception) -> None:
    msg = f"{which}: {str(e).splitlines()[0]}"
    if msg not in ctx.state.phase4_errors:
        ctx.state.phase4_errors.append(msg)
        ctx.save()
    ctx.say(f"[{which}] failed, recorded in run.json phase4_errors: {msg}")


def untargeted_rows(ctx: Ctx, best: dict, dest: Path) -> None:
    """Control C's dataset: as many rows as the best iteration's, with nothing aimed at a
    weakness. The family generator's `untargeted` (in the best iteration's surface style and
    surface shares, so wording is not what differs) where the env has one, else a seeded
    resample of the hub's train rows."""
    import importlib

    from generators import FAMILIES, family_of

    count = training.count_lines(ctx.rd.path / best["dataset"])
    fam_name = FAMILIES.get(family_of(ctx.hub))
    fam = importlib.import_module(fam_name) if fam_name else None
    if fam is not None and hasattr(fam, "untargeted"):
        weakness = ctx.rd.path / Path(best["dataset"]).parent / "weakness.json"
        spec = read_json(weakness) if weakness.exists() else {}
        kept = {k: spec[k] for k in ("style", "surface") if spec.get(k)}
        # both writers write beside `dest` and rename into place
        fam.untargeted(count, out=str(dest), seed=ctx.state.seed, **kept)
        source = f"{fam_name}.untargeted" + "".join(f" ({k} {v})" for k, v in kept.items())
    else:
        envs.sample_train_rows(ctx.backend.python, ctx.hub, count, f"run_c|{ctx.state.seed}", dest)
        source = "a resample of the hub env's train rows"
    ctx.say(f"[run_c] {count} untargeted rows from {source}")
