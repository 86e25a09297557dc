"""Phase 5: close the run, print the summary table, record the recommended model."""
from __future__ import annotations

from driver.arms.best import record_best
from driver.context import Ctx
from driver.reporting import scratchpad
from driver.reporting.summary import replay_noise, summary_rows, summary_text


def finalize(ctx: Ctx) -> str:
    ctx.closed()
    record_best(ctx)
    rows = summary_rows(ctx)
    # metrics.json carries the run's own noise for readers that never render the summary
    ctx.rd.put_run_figure("replay_noise", replay_noise(ctx, rows))
    text = summary_text(ctx, rows)
    scratchpad.render(ctx, final_table=text)
    return text
