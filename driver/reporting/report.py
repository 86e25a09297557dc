"""`driver report RUN_DIR`: report.md and two PNG plots, from the run's numeric records only
(metrics.json, each arm's eval_summary.json); no eval row is ever opened."""
from __future__ import annotations

import json
from pathlib import Path

from driver.backends import spent_usd
from driver.context import Ctx
from driver.reporting import summary
from driver.run.files import atomic_write_text
from driver.run.arm_files import ArmFiles


def _plot_accuracy(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r.get("eval_acc") is not None]
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(shown) + 2), 3.6))
    xs = range(len(shown))
    accs = [100 * r["eval_acc"] for r in shown]
    lo = [100 * (r["eval_acc"] - r["acc_ci"][0]) if r.get("acc_ci") else 0 for r in shown]
    hi = [100 * (r["acc_ci"][1] - r["eval_acc"]) if r.get("acc_ci") else 0 for r in shown]
    colors = ["#777777" if r["arm"] == "iter_0" else "#2b6cb0" if r["arm"].startswith("iter_")
              else "#c05621" for r in shown]
    ax.bar(xs, accs, color=colors, yerr=[lo, hi], capsize=4)
    ax.set_xticks(list(xs), [r["arm"] for r in shown], rotation=20)
    ax.set_ylabel("eval accuracy, % (95% CI)")
    if shown and shown[0]["arm"] == "iter_0":
        ax.axhline(accs[0], color="#777777", linestyle="--", linewidth=1)
    ax.set_title("Eval accuracy per arm (hub env, strict)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_train_reward(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for r in rows:
        by_step = r["train_reward_by_step"]
        if by_step:
            steps = sorted(map(int, by_step))
            ax.plot(steps, [by_step[str(k)] for k in steps], marker=".", label=r["arm"])
    ax.set_xlabel("training step (absolute)")
    ax.set_ylabel("mean train reward")
    ax.set_title("Train reward per step")
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _weakness_diffs(ctx: Ctx, m: dict) -> list[str]:
    """Each brief's weakness diff (iter_N/teacher_input/weakness_diff.json): did the buckets
    the previous iteration trained on shrink? Train rollouts only."""
    from driver.analysis import weakness_diff

    out = []
    for it in sorted(m["iters"], key=lambda x: x["iter"]):
        p = ctx.iter_dir(it["iter"]) / ArmFiles.TEACHER_INPUT / weakness_diff.FILE
        if p.exists():
            diff = json.loads(p.read_text())
            out += ["", f"### iter_{it['iter']}'s brief: iter_{diff['iteration']}'s weaknesses, "
                        "before and after training on them", "", weakness_diff.table_markdown(diff)]
    return (["", "## Did the named weaknesses shrink? (train rollouts only)"] + out) if out else []


def _replay_noise_lines(noise: dict) -> list[str]:
    """The run's own noise (summary.replay_noise) under its own heading: the yardstick every
    lift in the table is read against."""
    return ["## Replay noise", "", summary.noise_sentence(noise), ""]


def write(ctx: Ctx) -> Path:
    rows = summary.summary_rows(ctx)
    rd = ctx.rd.path
    _plot_accuracy(rows, rd / "eval_accuracy.png")
    _plot_train_reward(rows, rd / "train_reward.png")
    st = ctx.state
    m = ctx.rd.load_metrics()
    lines = [f"# Run report — {st.dataset}", "",
             f"- model `{st.model}` · backend `{st.backend}` · teacher `{st.teacher}` · seed {st.seed}",
             *([f"- **trainer: a stand-in** (`{st.trainer_stand_in}`, DRIVER_RL_COMMAND), not prime-rl: "
                f"the numbers below are its, and `{st.model}` is only the name passed to it"]
               if st.trainer_stand_in else []),
             *([f"- cost: ${spent_usd(ctx.rd.path):.2f} spent on Hosted Training"
                + (f" (--max-cost ${st.max_cost_usd:g})" if st.max_cost_usd is not None else "")]
               if st.backend == "hosted" or st.max_cost_usd is not None else []),
             f"- status **{st.status}** · phase {st.phase} · iterations run {st.iteration}"
             + (f" · loop ended: {' and '.join(st.limits_reached())}" if st.loop_end else ""),
             f"- wall time {((st.end_ts or 0) - st.start_ts) / 60:.1f} min" if st.end_ts else "- still running",
             "", "## Summary", "", "```", summary.summary_text(ctx, rows), "```", "",
             *_replay_noise_lines(summary.replay_noise(ctx, rows)),
             "![eval accuracy](eval_accuracy.png)", "", "![train reward](train_reward.png)", ""]
    for r in rows:
        v = r.get("vs_iter0_by_population") or {}
        if v:
            parts = [f"{pop}: {100 * x['lift']:+.1f} points [{100 * x['lift_ci'][0]:+.1f}, "
                     f"{100 * x['lift_ci'][1]:+.1f}], p={x['p_value']:.3g} (n={x['n']})"
                     for pop, x in v.items() if x.get("n")]
            if parts:
                lines.append(f"- {r['arm']} vs iter_0 by population — " + "; ".join(parts))
    lines += ["", "## Iterations", ""]
    for it in sorted(m["iters"], key=lambda x: x["iter"]):
        if it.get("skipped"):
            lines.append(f"- iter_{it['iter']}: skipped — {it.get('reason')}: "
                         + "; ".join(it.get("failures", [])[:3]))
            continue
        extra = []
        if it.get("train_diagnose"):
            d = it["train_diagnose"]
            extra.append(f"train step {d.get('step')}: live {d.get('live_fraction_outcome')}, "
                         f"{d.get('verdict')}")
        if it.get("probe") and not it["probe"].get("skipped"):
            extra.append(f"probe live {it['probe']['live_fraction']}")
        if it.get("cost_usd") is not None:
            extra.append(f"hosted runs ${it['cost_usd']:.2f}"
                         + (f" ({it['env_hub_ref']})" if it.get("env_hub_ref") else ""))
        if it.get("teacher_usage"):
            u = it["teacher_usage"]
            extra.append(f"teacher {u['calls']} calls, {u['input_tokens']}+{u['output_tokens']} tokens"
                         + (f", ${u['cost_usd']}" if u.get("cost_usd") is not None else ""))
        acc, sel = it.get("eval_acc"), it.get("selection_acc")
        lines.append(f"- iter_{it['iter']}: eval {'-' if acc is None else f'{acc:.4f}'}, "
                     + (f"selection {sel:.4f}, " if sel is not None else "") +
                     f"rows {it.get('rows') or '-'}" + ("; " + "; ".join(extra) if extra else ""))
    lines += _weakness_diffs(ctx, m)
    if st.compact_warnings:   # recorded by the teacher with `driver compact-warning`
        lines += ["", "## Teacher context compaction warnings", ""] + [f"- {w}" for w in st.compact_warnings]
    lines += ["", "Numbers only: this report is built from metrics.json and eval_summary.json "
              "(and the briefs' weakness_diff.json, from train rollouts); "
              "eval rollouts are read by the numeric aggregator alone.", ""]
    path = rd / "report.md"
    atomic_write_text(path, "\n".join(lines))
    atomic_write_text(rd / "report.json", json.dumps(rows, indent=2) + "\n")
    return path
