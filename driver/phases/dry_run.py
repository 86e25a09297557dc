"""`driver run --dry-run`: introspect the hub env, then render and check every config the run
would launch with (iter_0's, an iteration's, each control's), as prime-rl's own `--dry-run`
writes its resolved configs and stops.

iter_0's files are written where the baseline phase reads them (it reuses what is there), so a
dry run that is then resumed trains on exactly the configs it showed. An iteration's and the
controls' configs depend on datasets not yet written: they go to dry_run/ as examples, with
iter_0's final step as their resume step.
"""
from __future__ import annotations

from pathlib import Path

from driver.arms import table
from driver.arms.render import ITERATION_PURPOSE, write_config
from driver.context import Ctx
from driver.phases import setup
from driver.run.arm_files import ArmFiles
from rl_contract import composition


def render(ctx: Ctx) -> list[Path]:
    st = ctx.state
    setup.introspect(ctx)
    written = setup.iter0_configs(ctx)
    # iter_0's launch exactly as it will be composed (files, then flags)
    args = [x for p in written for x in ("@", str(p))]
    args += ctx.dialect.iter0_overrides(ctx.knobs.for_iter0(), ctx.iter_dir(0) / ArmFiles.OUT)
    ctx.dialect.check_effective(composition.compose(args))
    anchor = st.steps_per_run   # iter_0's final step, which every anchored arm resumes from
    examples = [(table.iteration(ctx, 1), ITERATION_PURPOSE, None)]
    examples += [(table.control_arm(ctx, c), c.purpose, c) for c in table.CONTROLS]
    for arm, purpose, spec in examples:
        arm.resume_step = None if spec is not None and spec.start == "base" else anchor
        written.append(write_config(ctx, arm, purpose, ctx.rd.path / "dry_run" / arm.name / ArmFiles.CONFIG,
                                    with_hub_rows=spec is not None and spec.with_hub_rows, keep=False))
    ctx.rendered_only()
    return written
