"""Phase 5: close the run, print the summary table, record the recommended model."""
from __future__ import annotations

from driver.arms.best import record_best
from driver.context import Ctx
from driver.reporting import scratchpad
from driver.reporting.summary import summary_text


def finalize(ctx: Ctx) -> str:
    ctx.closed()
    record_best(ctx)
    text = summary_text(ctx)
    scratchpad.render(ctx, final_table=text)
    return text
