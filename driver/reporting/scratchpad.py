"""scratchpad.md, rendered whole from what is on disk each time it changes.

The teacher's pre-iteration entries (iter_N/scratchpad_entry.md) and the measured results are
the sources; rendering from them makes every update idempotent, so a resumed run never appends
an entry twice.
"""
from __future__ import annotations

import re

from driver.run.files import atomic_write_text, read_json
from driver.run.arm_files import ArmFiles

# section (5) of a teacher's entry, the one the driver fills: "### (5) Results" as TEACHER.md
# asks, and the spellings teachers use for it ("### 5. Results", "## (5) Results: pending")
_RESULTS = re.compile(r"(#{2,4}[ \t]*\(?5[).:]?[ \t]*Results)[^\n]*\n?(.*)\Z", re.S)


def _trajectory(summary: dict, buckets: int = 5) -> str:
    by_step = summary.get("train_reward_by_step") or {}
    if not by_step:
        return "no train rollouts"
    steps = sorted(by_step, key=int)
    size = max(1, len(steps) // buckets)
    parts = []
    for i in range(0, len(steps), size):
        chunk = steps[i:i + size]
        mean = sum(by_step[s] for s in chunk) / len(chunk)
        parts.append(f"steps {chunk[0]}-{chunk[-1]}: {mean:.3f}")
    return "; ".join(parts)


def _diagnose_line(summary: dict) -> list[str]:
    d = summary.get("train_diagnose")
    if not d or d.get("verdict") == "n/a":
        return []
    corr = "n/a" if d["effort_correlation"] is None else f"{d['effort_correlation']:+.2f}"
    return [f"- train rollouts at step {d['step']}: live fraction {d['live_fraction_outcome']:.2f} "
            f"(raw reward {d['live_fraction_reward']:.2f}), groups "
            f"{'uniform' if d['uniform_groups'] else 'MIXED'}, effort correlation {corr}, "
            f"truncation {d['truncation_rate']:.2f}: {d['verdict']}"]


def _results(metric: dict, summary: dict | None) -> str:
    if metric.get("skipped"):
        return f"skipped: {metric.get('reason')}\n"
    if summary is None:
        return "pending\n"
    lines = [f"- eval_acc: {summary['eval_acc']:.4f} (n={summary['n_eval']})"]
    if metric.get("delta_vs_prev") is not None:
        lines.append(f"- delta vs previous: {metric['delta_vs_prev']:+.4f}; verdict: {metric.get('verdict')}")
    lines.append(f"- train reward trajectory: {_trajectory(summary)}")
    lines += _diagnose_line(summary)
    if metric.get("probe") and not metric["probe"].get("skipped"):
        p = metric["probe"]
        lines.append(f"- gradient probe before training: live fraction {p['live_fraction']:.2f} on "
                     f"{p['prompts']} prompts x {p['k']}")
    if metric.get("hparams"):
        lines.append("- this iteration's hyperparameters (hparams.json): "
                     + ", ".join(f"{k} = {v}" for k, v in metric["hparams"].items()))
    return "\n".join(lines) + "\n"


def _diff_results(ctx, n: int) -> str:
    """Iteration n's buckets before and after its training, once a later brief measured them
    (the next trained iteration's teacher_input/weakness_diff.json: train rollouts only)."""
    from driver.analysis import weakness_diff

    m = n + 1
    while ctx.iter_dir(m).exists():
        p = ctx.iter_dir(m) / ArmFiles.TEACHER_INPUT / weakness_diff.FILE
        if p.exists():
            diff = read_json(p)
            if diff.get("iteration") == n:
                return "\n".join([f"- this iteration's buckets, train failure rate before -> after "
                                  f"its training (iter_{m}'s brief):",
                                  *("  " + x for x in weakness_diff.brief_lines(diff))]) + "\n"
            return ""
        m += 1
    return ""


def render(ctx, final_table: str | None = None) -> None:
    st, rd = ctx.state, ctx.rd
    out = [f"# Scratchpad — {st.dataset}",
           f"model {st.model} · backend {st.backend} · teacher {st.teacher} · budget "
           f"{st.budget_seconds:.0f}s · max_iters {st.max_iters} · batch {st.batch_size} · seed {st.seed}",
           *([f"trainer: a stand-in ({st.trainer_stand_in}), not prime-rl"] if st.trainer_stand_in else []),
           ""]
    metrics = {m["iter"]: m for m in rd.load_metrics()["iters"]}
    s0 = ctx.iter_dir(0) / ArmFiles.EVAL_SUMMARY
    if s0.exists():
        s = read_json(s0)
        out += ["## Iteration 0 — baseline",
                f"Source: {'inherited via --init-from' if s.get('source') == 'init-from' else 'trained on the hub env'}",
                f"- eval_acc: {s['eval_acc']:.4f}" + (f" (n={s['n_eval']})" if "n_eval" in s else ""),
                f"- train reward trajectory: {_trajectory(s)}", *_diagnose_line(s), ""]
    n = 1
    while ctx.iter_dir(n).exists():
        d = ctx.iter_dir(n)
        entry_path = d / ArmFiles.SCRATCHPAD_ENTRY
        if entry_path.exists():
            entry = entry_path.read_text()
            summary = read_json(d / ArmFiles.EVAL_SUMMARY) if (d / ArmFiles.EVAL_SUMMARY).exists() else None
            results = _results(metrics.get(n, {}), summary) + _diff_results(ctx, n)
            entry = _RESULTS.sub(lambda m: m.group(1) + "\n" + results, entry) if _RESULTS.search(entry) \
                else entry + "\n### (5) Results\n" + results
            out += [entry.rstrip(), ""]
        elif n in metrics and metrics[n].get("skipped"):
            out += [f"## Iteration {n}", _results(metrics[n], None)]
        n += 1
    if final_table:
        out += [f"## Final summary — {st.status}", "```", final_table, "```"]
        if st.phase4_errors:
            out += ["Control-run errors:"] + [f"- {e}" for e in st.phase4_errors]
        out.append("")
    atomic_write_text(rd.scratchpad, "\n".join(out) + "\n")
