"""Phase 5: close the run, print the summary table, record the recommended model."""
from __future__ import annotations

from driver import scratchpad
from driver.context import Ctx
from driver.phases.controls import best_iteration
from driver.state import now


def summary_rows(ctx: Ctx) -> list[dict]:
    m = ctx.rd.load_metrics()
    best = best_iteration(ctx)
    rows = []
    for it in sorted(m["iters"], key=lambda r: r["iter"]):
        label = f"iter_{it['iter']}" + (" (real)" if it["iter"] == 0 else "")
        rows.append({"run": label, "rows": it.get("rows"), "eval_acc": it.get("eval_acc"),
                     "ckpt": it.get("checkpoint"), "skipped": it.get("skipped", False),
                     "best": bool(best and it["iter"] == best["best_iter"])})
    names = {"run_a": "run_a (best @iter0)", "run_b": "run_b (real+best @base)"}
    for c in sorted(m["controls"], key=lambda r: r["run"]):
        rows.append({"run": names.get(c["run"], c["run"]), "rows": c.get("rows"),
                     "eval_acc": c.get("eval_acc"), "ckpt": c.get("checkpoint"),
                     "skipped": False, "best": False})
    scored = [r for r in rows if r["eval_acc"] is not None]
    if scored:
        top = max(scored, key=lambda r: r["eval_acc"])
        top["recommended"] = True
    return rows


def table(rows: list[dict]) -> str:
    lines = [f"{'run':<26}{'rows':>7}  {'eval_acc':>8}  ckpt"]
    for r in rows:
        acc = "skipped" if r["skipped"] else ("-" if r["eval_acc"] is None else f"{r['eval_acc']:.4f}")
        mark = ("  <- BEST_ITER" if r["best"] else "") + ("  * recommended" if r.get("recommended") else "")
        lines.append(f"{r['run']:<26}{str(r['rows'] if r['rows'] is not None else '-'):>7}  "
                     f"{acc:>8}  {r['ckpt'] or '-'}{mark}")
    return "\n".join(lines)


def finalize(ctx: Ctx) -> str:
    st = ctx.state
    if st.end_ts is None:
        st.end_ts = now()
        st.total_duration_s = st.end_ts - st.start_ts
    st.status = st.loop_end or "completed"
    ctx.save()
    text = table(summary_rows(ctx))
    scratchpad.render(ctx, final_table=text)
    return text
