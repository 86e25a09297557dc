"""Phase 5: close the run, print the summary table, record the recommended model."""
from __future__ import annotations

from driver import scratchpad, stats
from driver.context import Ctx
from driver.evaluation import wilson_interval
from driver.phases.controls import ARMS, best_iteration
from driver.state import now, read_json


def _arm_dir(ctx: Ctx, name: str):
    if name.startswith("iter_"):
        return ctx.iter_dir(int(name.split("_")[1]))
    return ctx.rd.path / ARMS[name]


def arm_summary(ctx: Ctx, name: str) -> dict | None:
    p = _arm_dir(ctx, name) / "eval_summary.json"
    return read_json(p) if p.exists() else None


def summary_rows(ctx: Ctx) -> list[dict]:
    """One row per arm: accuracy with its 95% interval, strict and lenient, per population, and
    the paired comparison with iter_0 (lift, its 95% interval, exact McNemar p)."""
    m = ctx.rd.load_metrics()
    best = best_iteration(ctx)
    base = arm_summary(ctx, "iter_0") or {}
    base_correct = base.get("correct_by_example") or {}
    arms = [(f"iter_{it['iter']}", it) for it in sorted(m["iters"], key=lambda r: r["iter"])]
    arms += [(c["run"], c) for c in sorted(m["controls"], key=lambda r: r["run"])]
    names = {"run_a": "run_a (best @iter0)", "run_b": "run_b (real+best @base)"}
    rows = []
    for name, entry in arms:
        s = arm_summary(ctx, name) or {}
        acc, n = entry.get("eval_acc"), s.get("n_eval") or entry.get("n_eval")
        row = {"run": names.get(name, name + (" (real)" if name == "iter_0" else "")), "arm": name,
               "rows": entry.get("rows"), "eval_acc": acc, "n": n, "ckpt": entry.get("checkpoint"),
               "skipped": entry.get("skipped", False), "verdict": entry.get("verdict"),
               "lenient_acc": s.get("eval_lenient_acc"),
               "acc_by_population": s.get("acc_by_population"),
               "train_reward_by_step": s.get("train_reward_by_step") or {},
               "best": bool(best and name == f"iter_{best['best_iter']}")}
        if acc is not None and n:
            row["acc_ci"] = list(wilson_interval(round(acc * n), n))
        if name != "iter_0" and base_correct and s.get("correct_by_example"):
            row["vs_iter0"] = stats.paired(base_correct, s["correct_by_example"])
            pops = s.get("population_by_example") or {}
            if pops:
                row["vs_iter0_by_population"] = {
                    pop: stats.paired({k: v for k, v in base_correct.items() if pops.get(k) == pop},
                                      {k: v for k, v in s["correct_by_example"].items() if pops.get(k) == pop})
                    for pop in sorted(set(pops.values()))}
        rows.append(row)
    scored = [r for r in rows if r["eval_acc"] is not None]
    if scored:
        top = max(scored, key=lambda r: r["eval_acc"])
        top["recommended"] = True
    return rows


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def table(rows: list[dict]) -> str:
    head = (f"{'run':<24}{'rows':>6} {'n':>5}  {'strict % [95% CI]':<20}{'lenient %':>9}  "
            f"{'ID50 %':>6} {'OOD100 %':>8}  {'lift vs iter_0 [95% CI]':<26}{'McNemar p':>10}  "
            f"{'sig 5%':<7}{'verdict':<10}ckpt")
    lines = [head]
    for r in rows:
        if r["skipped"]:
            acc = "skipped"
        elif r["eval_acc"] is None:
            acc = "-"
        else:
            ci = r.get("acc_ci")
            acc = f"{_pct(r['eval_acc'])}" + (f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else "")
        pops = r.get("acc_by_population") or {}
        v = r.get("vs_iter0")
        if v and v.get("n"):
            lift = f"{100 * v['lift']:+.1f} [{100 * v['lift_ci'][0]:+.1f}, {100 * v['lift_ci'][1]:+.1f}]"
            p, sig = f"{v['p_value']:.3g}", "yes" if v["significant"] else "no"
        else:
            lift, p, sig = "-", "-", "-"
        mark = ("  <- BEST_ITER" if r["best"] else "") + ("  * recommended" if r.get("recommended") else "")
        lines.append(
            f"{r['run']:<24}{str(r['rows'] if r['rows'] is not None else '-'):>6} "
            f"{str(r.get('n') or '-'):>5}  {acc:<20}{_pct(r.get('lenient_acc')):>9}  "
            f"{_pct(pops.get('ID50')):>6} {_pct(pops.get('OOD100')):>8}  {lift:<26}{p:>10}  "
            f"{sig:<7}{(r.get('verdict') or '-'):<10}{r['ckpt'] or '-'}{mark}")
    lines.append("strict: the env's reward; lenient: the right number in any format (a zero-weight "
                 "metric). Lift: paired on the same eval examples; p: exact McNemar; CI: Newcombe.")
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
