"""An arm's config (rl_toml), rendered and checked one way wherever an arm is launched (an
iteration, a control, the gradient probe) or shown before it is (`driver run --dry-run`), so
what a dry run writes is what the arm launches with."""
from __future__ import annotations

import tomllib
from pathlib import Path

from driver.arms.arm import Arm, eval_knobs, train_knobs
from driver.context import Ctx
from driver.run.arm_files import ArmFiles
from driver.run.files import atomic_write_text
from driver.run.model import Knobs


def hub_train_block(ctx: Ctx) -> dict:
    """The hub's own train block, exactly as iter_0 trained on it (the canonical config's when
    one was given), for an arm that trains on the hub's rows beside its own."""
    base = Path(ctx.state.base_config) if ctx.state.base_config else ctx.iter_dir(0) / "base_rl.toml"
    if base.exists():
        blocks = ctx.dialect.train_blocks(tomllib.loads(base.read_text()))
        if blocks:
            block = dict(blocks[0])
            block.setdefault("name", "hub-train")
            return block
    return {**ctx.dialect.hub_train_block(ctx.hub), "name": "hub-train"}


def rl_toml(ctx: Ctx, arm: Arm, purpose: str, *, knobs: Knobs, eval_knobs: Knobs | None,
           with_hub_rows: bool = False) -> str:
    """The arm's rl.toml: its generated env (and the hub's rows where `with_hub_rows`), resumed
    from iter_0's checkpoint at arm.resume_step (None: from the base model), checked as prime-rl
    would check it before it is written anywhere."""
    text = ctx.dialect.render_run(
        arm=arm.name, purpose=purpose, hub=ctx.hub, knobs=knobs, eval_knobs=eval_knobs,
        train_envs=ctx.dialect.train_sources(arm.package or "", hub_train_block(ctx) if with_hub_rows else None,
                                             arm.source_name, fork_name=ctx.state.iter_0_train_source),
        resume_step=arm.resume_step, resume_from=ctx.iter_dir(0) / ArmFiles.OUT)
    ctx.dialect.check_rendered(text, expect_resume=arm.resume_step, fork_name=ctx.state.iter_0_train_source)
    return text


# what an iteration's config says it is (its header), in the launch and in the dry run alike
ITERATION_PURPOSE = "resume from iter_0 on the generated env; eval on the hub env"
PROBE_PURPOSE = "gradient probe: one step from iter_0 on the generated env"


def write_config(ctx: Ctx, arm: Arm, purpose: str, dest: Path, *, with_hub_rows: bool = False,
                 knobs: Knobs | None = None, evaluate: bool = True, keep: bool = True) -> Path:
    """Write the config `arm` launches with to `dest`: the one way an iteration, a control, the
    dry run and the gradient probe get theirs. `knobs`: the arm's training knobs unless given
    (the probe's one step); `evaluate`: with the arm's eval (the probe has none); `keep`: a
    config already at `dest` stays (a resumed arm launches with the config it was given),
    else it is rewritten where it differs."""
    if keep and dest.exists():
        return dest
    text = rl_toml(ctx, arm, purpose, knobs=knobs or train_knobs(ctx, arm),
                   eval_knobs=eval_knobs(ctx, arm) if evaluate else None, with_hub_rows=with_hub_rows)
    if not dest.exists() or dest.read_text() != text:
        atomic_write_text(dest, text)
    return dest
