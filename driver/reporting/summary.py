"""The summary table: one row per arm with its accuracy, 95% interval, per-population
accuracies and paired lift over iter_0; the best iteration against each control the table pairs
with it; and the sentences a reader needs to read the numbers. From numeric records only."""
from __future__ import annotations

from driver.analysis import stats
from driver.analysis.evaluation import DRAWS, GREEDY, deciding_measure, wilson_interval
from driver.arms import table
from driver.arms.best import best_iteration
from driver.context import Ctx
from driver.run.files import read_json
from driver.run.arm_files import ArmFiles


def arm_summary(ctx: Ctx, name: str) -> dict | None:
    p = table.arm_dir(ctx, name) / ArmFiles.EVAL_SUMMARY
    return read_json(p) if p.exists() else None


def eval_setting(summary: dict) -> dict | None:
    """The setting an arm was measured under (its eval_config, less what differs by design:
    how many examples, and the trainer's note on what its eval measures); None when unknown (an
    iter_0 reused from a directory that did not record it)."""
    cfg = summary.get("eval_config")
    if not isinstance(cfg, dict) or cfg.get("unknown"):
        return None
    return {k: v for k, v in cfg.items() if k not in ("examples", "measures")}


def comparable(a: dict, b: dict) -> bool:
    """Were two arms measured under one eval setting? Both known, and equal where both say."""
    sa, sb = eval_setting(a), eval_setting(b)
    return sa is not None and sb is not None and all(sa[k] == sb[k] for k in sa.keys() & sb.keys())


def outcomes(summary: dict, measure: str, split: str = "eval") -> dict:
    """Per-example outcomes of one split on one measurement: 0/1 correctness of the greedy
    rollout, or the mean over the example's draws."""
    s = summary.get("selection") or {} if split == "selection" else summary
    if measure == DRAWS:
        return (s.get("draws") or {}).get("mean_by_example") or {}
    return s.get("correct_by_example") or {}


def compare(measure: str, base: dict, arm: dict) -> dict:
    """The paired test that fits the measurement: exact McNemar on greedy 0/1 outcomes, a paired
    t-test on per-example draw means."""
    return stats.paired_means(base, arm) if measure == DRAWS else stats.paired(base, arm)


def _mean_ci(means: dict[str, float]) -> list[float] | None:
    """The 95% t interval of a per-draw success rate, with the example as the unit."""
    values = list(means.values())
    if len(values) < 2:
        return None
    from scipy.stats import t

    n, mean = len(values), sum(values) / len(values)
    sd = (sum((v - mean) ** 2 for v in values) / (n - 1)) ** 0.5
    half = float(t.ppf(0.975, n - 1)) * sd / n ** 0.5
    return [max(0.0, mean - half), min(1.0, mean + half)]


def summary_rows(ctx: Ctx) -> list[dict]:
    """One row per arm: accuracy with its 95% interval, strict and lenient, per population, and
    the paired comparison with iter_0 (lift, its 95% interval, exact McNemar p), on greedy
    pass@1 and, where the run has them, on the stochastic draws (paired t-test); choices are
    made on the deciding measure (evaluation.deciding_measure)."""
    m = ctx.rd.load_metrics()
    best = best_iteration(ctx)
    arms = [(f"iter_{it['iter']}", it) for it in sorted(m["iters"], key=lambda r: r["iter"])]
    order = {c.name: k for k, c in enumerate(table.CONTROLS)}   # the table's order
    arms += [(c["run"], c) for c in sorted(m["controls"], key=lambda r: order.get(r["run"], len(order)))]
    summaries = {name: arm_summary(ctx, name) or {} for name, _ in arms}   # each read once
    measure = deciding_measure([entry for _, entry in arms])
    base_correct = summaries.get("iter_0", {}).get("correct_by_example") or {}
    best_correct = summaries.get(f"iter_{best['best_iter']}", {}).get("correct_by_example") if best else None
    base_draws = outcomes(summaries.get("iter_0", {}), DRAWS)
    best_draws = outcomes(summaries.get(f"iter_{best['best_iter']}", {}), DRAWS) if best else {}
    names = {c.name: c.label for c in table.CONTROLS}
    paired_with_best = {c.name for c in table.CONTROLS if c.compare_with_best}
    with_hub_rows = {c.name for c in table.CONTROLS if c.with_hub_rows}
    rows = []
    for name, entry in arms:
        s = summaries[name]
        acc, n = entry.get("eval_acc"), s.get("n_eval") or entry.get("n_eval")
        rows_label = entry.get("rows")
        if name in with_hub_rows and rows_label is not None and not entry.get("rows_from"):
            # recorded before metrics.json counted the hub's train rows in `rows`
            rows_label = rows_label + int(ctx.hub.get("train_size") or 0)
        row = {"run": names.get(name, name + (" (real)" if name == "iter_0" else "")), "arm": name,
               "rows": rows_label, "eval_acc": acc, "n": n, "ckpt": entry.get("checkpoint"),
               "skipped": entry.get("skipped", False), "verdict": entry.get("verdict"),
               "lenient_acc": s.get("eval_lenient_acc"),
               "selection_acc": entry.get("selection_acc"),
               "n_selection": entry.get("n_selection"),
               "acc_by_population": s.get("acc_by_population"),
               "train_reward_by_step": s.get("train_reward_by_step") or {},
               "best": bool(best and name == f"iter_{best['best_iter']}"),
               "cost_usd": entry.get("cost_usd"), "n_errored": entry.get("n_errored") or 0,
               "measures": (entry.get("eval_config") or {}).get("measures"),
               "measure": measure, "draws_acc": entry.get("draws_acc"),
               "n_draws": entry.get("n_draws"),
               "draws_per_example": (s.get("draws") or {}).get("per_example"),
               "selection_draws_acc": entry.get("selection_draws_acc"),
               "rows_made": entry.get("rows_made"), "gate_differs": entry.get("gate_differs")}
        if acc is not None and n:
            row["acc_ci"] = list(wilson_interval(round(acc * n), n))
        if outcomes(s, DRAWS):
            row["draws_ci"] = _mean_ci(outcomes(s, DRAWS))
        if name != "iter_0" and s and summaries.get("iter_0") and not comparable(summaries["iter_0"], s):
            # measured under another eval setting than iter_0: a lift would compare the settings
            row["other_setting"] = True
        elif name != "iter_0" and base_correct and s.get("correct_by_example"):
            row["vs_iter0"] = stats.paired(base_correct, s["correct_by_example"])
            if base_draws and outcomes(s, DRAWS):
                row["vs_iter0_draws"] = stats.paired_means(base_draws, outcomes(s, DRAWS))
            pops = s.get("population_by_example") or {}
            if pops:
                row["vs_iter0_by_population"] = {
                    pop: stats.paired({k: v for k, v in base_correct.items() if pops.get(k) == pop},
                                      {k: v for k, v in s["correct_by_example"].items() if pops.get(k) == pop})
                    for pop in sorted(set(pops.values()))}
        if name in paired_with_best and best_correct and s.get("correct_by_example") and \
                comparable(summaries[f"iter_{best['best_iter']}"], s):
            # the best iteration against this control (untargeted rows: did targeting matter?)
            row["best_vs_control"] = stats.paired(s["correct_by_example"], best_correct)
            if best_draws and outcomes(s, DRAWS):
                row["best_vs_control_draws"] = stats.paired_means(outcomes(s, DRAWS), best_draws)
        rows.append(row)
    key = "vs_iter0_draws" if measure == DRAWS else "vs_iter0"
    compared = {r["arm"]: r[key]["p_value"] for r in rows
                if r["arm"].startswith("iter_") and r.get(key, {}).get("n")}
    if compared and not any(r["selection_acc"] is not None for r in rows):
        # no selection split: the best is chosen on the examples it is reported on
        for name, p in stats.holm(compared).items():
            next(r for r in rows if r["arm"] == name)["p_holm"] = p
    choice = recommend(rows, summaries, measure)
    if choice is not None:
        next(r for r in rows if r["arm"] == choice["arm"])["recommended"] = choice["why"]
    return rows


def _selection_outcomes(summary: dict, measure: str = GREEDY) -> dict:
    """Per-example outcomes on the split arms are chosen on: the selection split where the hub
    env has one, else the eval split."""
    return outcomes(summary, measure, "selection" if summary.get("selection") else "eval")


MEASURE_WORDS = {GREEDY: "greedy pass@1", DRAWS: "the per-draw success rate"}
TEST_WORDS = {GREEDY: "McNemar", DRAWS: "paired t"}


def recommend(rows: list[dict], summaries: dict[str, dict], measure: str = GREEDY) -> dict | None:
    """The checkpoint to use, by a rule that never promotes an arm on a difference the split it
    is chosen on cannot resolve: the best iteration when it beats iter_0 there by the paired
    test of the deciding measure at 5% (exact McNemar on greedy outcomes, a paired t-test on
    per-example draw means; Holm-adjusted over the iterations compared where the env has no
    selection split), else iter_0; a control only when it beats that choice there the same way,
    its p Holm-adjusted over the controls compared with it (the one ahead by most when several do).
    Returns {"arm", "why"} (one sentence), or None when iter_0 has no evaluation."""
    if summaries.get("iter_0", {}).get("eval_acc") is None:
        return None
    on = "the selection split" if any(r.get("selection_acc") is not None for r in rows) else \
        "the eval split (the env has no selection split)"
    test = TEST_WORDS[measure]
    measured = f", on {MEASURE_WORDS[measure]} ({test})"

    def _selection_correct(summary: dict) -> dict:
        return _selection_outcomes(summary, measure)

    base = _selection_correct(summaries["iter_0"])
    best = next((r for r in rows if r["best"]), None)
    choice, why = "iter_0", "no iteration was evaluated beyond iter_0"
    if best is not None and best.get("other_setting"):
        why = (f"the best iteration, {best['arm']}, was measured under another eval setting than "
               "iter_0, so no comparison between them is made")
    elif best is not None:
        v = compare(measure, base, _selection_correct(summaries[best["arm"]]))
        p = v.get("p_value", 1.0) if v.get("n") else 1.0
        if "p_holm" in best:   # chosen on the examples it is reported on: Holm over iterations
            p = best["p_holm"]
        lift = f"{100 * v['lift']:+.1f} points (p = {p:.3g}, n = {v['n']}){measured}" if v.get("n") else "n/a"
        if v.get("n") and v["lift"] > 0 and p < stats.ALPHA:
            choice, why = best["arm"], f"it beats iter_0 on {on} by {lift}"
        else:
            why = (f"the best iteration, {best['arm']}, does not beat it on {on} beyond noise "
                   f"({lift})")
    # the controls are one family of tests against the choice: each at 5% alone, one of three
    # would pass by chance about one run in seven, so their p-values are Holm-adjusted together
    chosen = _selection_correct(summaries[choice])
    tested = {}
    for r in rows:
        if r["arm"].startswith("iter_") or r.get("eval_acc") is None or \
                not comparable(summaries[choice], summaries[r["arm"]]):
            continue
        v = compare(measure, chosen, _selection_correct(summaries[r["arm"]]))
        if v.get("n"):
            tested[r["arm"]] = v
    adjusted = stats.holm({a: v["p_value"] for a, v in tested.items()})
    ahead = [a for a, v in tested.items() if v["lift"] > 0 and adjusted[a] < stats.ALPHA]
    if ahead:
        control = max(ahead, key=lambda a: tested[a]["lift"])
        v = tested[control]
        family = f", Holm-adjusted over the {len(tested)} controls compared" if len(tested) > 1 else ""
        choice, why = control, (f"the control beats {choice} on {on} by {100 * v['lift']:+.1f} "
                                f"points (p = {adjusted[control]:.3g}{family}, n = {v['n']}){measured}")
    return {"arm": choice, "why": why}


REPLAY = "run_a"   # the control that trains the best iteration's own rows again, from iter_0


def noise_figure(replayed: dict, replay: dict, measure: str = GREEDY) -> dict:
    """The replay's paired difference from the iteration it replays (replay - replayed), on the
    eval examples both answered, on `measure`: exact McNemar p and Newcombe 95% interval on
    greedy outcomes, a paired t-test and its interval on draw means (driver.analysis.stats).
    Both arms trained on the same rows from the same checkpoint under one config, so whatever
    separates them is the setting's arm-to-arm noise."""
    v = compare(measure, replayed, replay)
    if not v.get("n"):
        return {"n": 0}
    return {"n": v["n"], "difference": v["lift"], "difference_ci": v["lift_ci"],
            "p_value": v["p_value"], "gained": v["gained"], "lost": v["lost"]}


def lift_against_noise(lift: dict, difference: float) -> str:
    """Does a lift exceed the replay noise? One honest, simple rule: `beyond` when the lift's 95%
    interval lies wholly outside the band +-|difference| (so even the interval's near end is further
    from zero than the replay moved); `larger` when its point estimate is outside the band but its
    interval reaches into it; `within` when the point estimate is inside the band. One replay is
    one sample of the noise, not its spread, so `beyond` is no more than "beyond this sample"."""
    band = abs(difference)
    lo, hi = lift["lift_ci"]
    if lo > band or hi < -band:
        return "beyond"
    return "larger" if abs(lift["lift"]) > band else "within"


def _unmeasured(why: str) -> dict:
    return {"measured": False, "why": why}


def _why_no_replay(ctx: Ctx) -> str:
    """Run A's skip or failure as run.json's phase4_errors records it, else that it has no
    evaluation (a run still in its loop)."""
    why = next((e.split(": ", 1)[1] for e in ctx.state.phase4_errors if e.startswith(f"{REPLAY}: ")), None)
    if why is None:
        return f"{REPLAY} has no evaluation"
    if why.startswith(table.SKIPPED):
        return f"{REPLAY} was skipped: {why[len(table.SKIPPED):]}"
    return f"{REPLAY} failed: {why}"


def replay_noise(ctx: Ctx, rows: list[dict]) -> dict:
    """The run's own noise, for the summary, report.md, metrics.json and bench/lift.py: run A
    against the iteration it replays (noise_figure), and the best iteration's lift over iter_0
    judged against it (lift_against_noise). {"measured": False, "why"} where run A did not run,
    or its difference cannot be paired."""
    entry = next((c for c in ctx.rd.load_metrics()["controls"] if c.get("run") == REPLAY), None)
    if entry is None or entry.get("eval_acc") is None:
        return _unmeasured(_why_no_replay(ctx))
    replayed = f"iter_{entry['best_iter']}" if entry.get("best_iter") else None
    replay_s = arm_summary(ctx, REPLAY) or {}
    replayed_s = (arm_summary(ctx, replayed) if replayed else None) or {}
    measure = next((r["measure"] for r in rows if r.get("measure")), GREEDY)
    if not outcomes(replay_s, measure) or not outcomes(replayed_s, measure):
        return _unmeasured(f"{REPLAY} or the iteration it replays has no per-example record")
    if not comparable(replayed_s, replay_s):
        return _unmeasured(f"{REPLAY} was measured under another eval setting than {replayed}")
    figure = noise_figure(outcomes(replayed_s, measure), outcomes(replay_s, measure), measure)
    if not figure["n"]:
        return _unmeasured(f"{REPLAY} and {replayed} answered no eval example in common")
    noise = {"measured": True, "replay": REPLAY, "replayed": replayed, "measure": measure, **figure}
    best = next((r for r in rows if r["best"]), None)
    lift = (best or {}).get("vs_iter0_draws" if measure == DRAWS else "vs_iter0") or {}
    if best is not None and lift.get("n"):
        noise["best"] = best["arm"]
        noise["best_lift"] = lift["lift"]
        noise["best_lift_ci"] = lift["lift_ci"]
        noise["lift_vs_noise"] = lift_against_noise(lift, figure["difference"])
    return noise


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


def noise_sentence(noise: dict) -> str:
    """The replay noise, and whether the best iteration's lift over iter_0 exceeds it, in plain
    words (the rule: lift_against_noise)."""
    if not noise.get("measured"):
        return (f"Replay noise: unmeasured ({noise.get('why', 'no replay')}), so whether the best "
                "iteration's lift over iter_0 exceeds this setting's arm-to-arm noise is unknown.")
    d, (lo, hi) = noise["difference"], noise["difference_ci"]
    band = f"{100 * abs(d):.1f}"
    text = (f"Replay noise: {noise['replay']} ({noise['replayed']}'s rows trained again from iter_0, "
            f"same config) differs from {noise['replayed']} by {_points(d)} [{_points(lo)}, "
            f"{_points(hi)}] points on {MEASURE_WORDS[noise.get('measure', GREEDY)]} "
            f"({TEST_WORDS[noise.get('measure', GREEDY)]} p {noise['p_value']:.3g}, "
            f"n = {noise['n']}), one sample of this setting's arm-to-arm noise.")
    if "lift_vs_noise" not in noise:
        return text + " No best iteration's lift over iter_0 was measured to set beside it."
    lift = (f"{noise['best']}'s lift over iter_0, {_points(noise['best_lift'])} "
            f"[{_points(noise['best_lift_ci'][0])}, {_points(noise['best_lift_ci'][1])}],")
    verdict = {
        "beyond": f"exceeds it: its 95% interval lies wholly outside +-{band}",
        "larger": f"is larger than it (|{_points(noise['best_lift'])}| > {band}) but its 95% "
                  f"interval reaches into +-{band}, so it does not clearly exceed it",
        "within": f"does not exceed it (|{_points(noise['best_lift'])}| <= {band})",
    }[noise["lift_vs_noise"]]
    return f"{text} {lift} {verdict}."


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _lift(v: dict | None) -> tuple[str, str, str]:
    if not v or not v.get("n"):
        return "-", "-", "-"
    return (f"{100 * v['lift']:+.1f} [{100 * v['lift_ci'][0]:+.1f}, {100 * v['lift_ci'][1]:+.1f}]",
            f"{v['p_value']:.3g}", "yes" if v["significant"] else "no")


def table_text(rows: list[dict], noise: dict | None = None) -> str:
    """The table and its sentences; `noise` (replay_noise) adds the replay-noise sentence."""
    selection = any(r.get("selection_acc") is not None for r in rows)
    draws = any(r.get("draws_acc") is not None for r in rows)
    measure = next((r["measure"] for r in rows if r.get("measure")), GREEDY)
    decided = "vs_iter0_draws" if measure == DRAWS else "vs_iter0"
    holm = any("p_holm" in r for r in rows)
    cost = any(r.get("cost_usd") is not None for r in rows)   # a billed (hosted) run
    # one column per population the env's metrics name (evaluation's naming rule), in order
    pop_names = sorted({k for r in rows for k in (r.get("acc_by_population") or {})})
    lenient = any(r.get("lenient_acc") is not None for r in rows)   # where the env measures it
    head = (f"{'run':<27}{'rows':>9} {'n':>5}  " + (f"{'val %':>6}  " if selection else "")
            + f"{'strict % [95% CI]':<20}" + (f"{'lenient %':>9}  " if lenient else "  ")
            + "".join(f"{name + ' %':>{max(6, len(name) + 2)}} " for name in pop_names)
            + f" {'lift vs iter_0 [95% CI]':<26}{'McNemar p':>10}  "
            + (f"{'draws % [95% CI]':<20}{'draws lift [95% CI]':<26}{'t p':>9}  " if draws else "")
            + (f"{'Holm p':>7}  " if holm else "")
            + f"{'sig 5%':<7}{'vs prev':<10}" + (f"{'cost $':>8}  " if cost else "")
            + "ckpt")   # vs prev: verdict against the previous iteration
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
        lift, p, _ = _lift(r.get("vs_iter0"))
        d_lift, d_p, _ = _lift(r.get("vs_iter0_draws"))
        sig = _lift(r.get(decided))[2]
        d_ci = r.get("draws_ci")
        d_acc = (f"{_pct(r.get('draws_acc'))}" + (f" [{_pct(d_ci[0])}, {_pct(d_ci[1])}]" if d_ci else "")
                 if r.get("draws_acc") is not None else "-")
        sel_acc = r.get("selection_draws_acc") if measure == DRAWS else r.get("selection_acc")
        if holm and "p_holm" in r:
            sig = "yes" if r["p_holm"] < stats.ALPHA else "no"
        holm_p = f"{r['p_holm']:.3g}" if "p_holm" in r else "-"
        mark = ("  <- BEST_ITER" if r["best"] else "") + ("  * recommended" if r.get("recommended") else "")
        lines.append(
            f"{r['run']:<27}{str(r['rows'] if r['rows'] is not None else '-'):>9} "
            f"{str(r.get('n') or '-'):>5}  "
            + (f"{_pct(sel_acc):>6}  " if selection else "")
            + f"{acc:<20}" + (f"{_pct(r.get('lenient_acc')):>9}  " if lenient else "  ")
            + "".join(f"{_pct(pops.get(name)):>{max(6, len(name) + 2)}} " for name in pop_names)
            + f" {lift:<26}{p:>10}  "
            + (f"{d_acc:<20}{d_lift:<26}{d_p:>9}  " if draws else "")
            + (f"{holm_p:>7}  " if holm else "")
            + f"{sig:<7}{(r.get('verdict') or '-'):<10}"
            + (f"{'-' if r.get('cost_usd') is None else format(r['cost_usd'], '.2f'):>8}  " if cost else "")
            + f"{r['ckpt'] or '-'}{mark}")
    best = next((r for r in rows if r["best"]), None)
    for c in (r for r in rows if r.get("best_vs_control")) if best else ():
        for key, words in (("best_vs_control", MEASURE_WORDS[GREEDY]),
                           ("best_vs_control_draws", MEASURE_WORDS[DRAWS])):
            if not (c.get(key) or {}).get("n"):
                continue
            lift, p, sig = _lift(c[key])
            test = TEST_WORDS[DRAWS if key.endswith("draws") else GREEDY]
            lines.append(f"{best['arm']} (best) vs {c['arm']} ({table.control(c['arm']).purpose}; "
                         f"same steps), {words}: {lift}, {test} p {p}, significant at 5%: {sig} "
                         f"(n = {c[key]['n']})")
    for c in (r for r in rows if r.get("best_vs_control")) if best else ():
        lines.append(control_rows_sentence(c))
    lines.append(measure_sentence(rows, measure))
    if noise is not None:
        lines.append(noise_sentence(noise))
    if selection:
        n_sel = next((r["n_selection"] for r in rows if r.get("n_selection")), None)
        lines.append(f"val %: the hub env's selection split (n = {n_sel}), {MEASURE_WORDS[measure]}, "
                     "on which the best iteration and the recommended checkpoint are chosen; every "
                     "other column is the eval split, which played no part in choosing.")
    else:
        lines.append("The hub env has no selection split: the best iteration is chosen on the same "
                     "examples its lift is reported on" + (
                         f"; Holm p adjusts each iteration's {TEST_WORDS[measure]} p (the deciding "
                         "measurement's) for the number compared."
                         if holm else "."))
    rec = next((r for r in rows if r.get("recommended")), None)
    if rec is not None:
        lines.append(f"Recommended checkpoint: {rec['arm']} ({rec['ckpt'] or 'no checkpoint'}): "
                     f"{rec['recommended']}.")
    other = [r["arm"] for r in rows if r.get("other_setting")]
    if other:
        lines.append(f"Measured under another eval setting than iter_0 (eval_config in metrics.json), "
                     f"so no lift is computed against it: {', '.join(other)}.")
    errored = [f"{r['arm']} {r['n_errored']}" for r in rows if r.get("n_errored")]
    if errored:
        lines.append("Errored eval episodes (a model or env-server error: no answer was scored), "
                     "counted apart and left out of n, accuracy and every paired test: "
                     + ", ".join(errored) + ".")
    measured = sorted({r["measures"] for r in rows if r.get("measures")})
    if measured:
        lines.append("Each arm's eval measures " + "; or ".join(measured) + ".")
    lines.append("strict: the env's reward" + ("; lenient: the right number in any format (a "
                 "zero-weight metric)" if lenient else "") + ". rows: the arm's training rows "
                 "(the hub's train rows + the generated ones, where a control trains on both). "
                 "Lift: paired on the eval examples both arms answered (every arm is evaluated on "
                 "the same examples); greedy: exact McNemar p, Newcombe CI"
                 + ("; draws: paired t-test over each example's mean over its draws, t CI" if draws
                    else "") + ". sig 5%: on the measurement the summary decides on. "
                 "vs prev: the seed's verdict against the previous iteration.")
    return "\n".join(lines)


def control_rows_sentence(c: dict) -> str:
    """How a compared control's rows were made, and every way besides aim they differ from the
    teacher's: the gate lines not about aim they fail (controls.held_to_gate)."""
    made = f"{c['arm']}'s rows: {c['rows_made']}." if c.get("rows_made") else \
        f"{c['arm']}'s rows: how they were made was not recorded."
    if c.get("gate_differs") is None:
        return made + " They were not held to the teacher's gate, so best - C may mix aim with other differences."
    if not c["gate_differs"]:
        return (made + " Held to the teacher's gate on its lines not about aim (wording and "
                "duplicates, prior rows, full reward, decontamination), they pass every one: "
                "best - C differs in aim, not in what the gate asks of rows.")
    return (made + " Held to the teacher's gate on its lines not about aim, they fail "
            + "; ".join(c["gate_differs"]) + ": best - C mixes aim with these differences.")


def measure_sentence(rows: list[dict], measure: str) -> str:
    """Which measurement the choices were made on, and the other one beside it."""
    k = next((r["draws_per_example"] for r in rows if r.get("draws_per_example")), None)
    n_draws = next((r["n_draws"] for r in rows if r.get("n_draws")), None)
    if measure == DRAWS:
        return (f"Decided on: the per-draw success rate over {k} stochastic draws per example "
                f"({n_draws} responses per arm; temperature 1.0; seed 003's second measurement), "
                "the less noisy of the two: the best iteration, the recommendation and the replay "
                "noise use it. Greedy pass@1 is shown beside it.")
    why = ("not every arm has draws" if any(r.get("draws_acc") is not None for r in rows)
           else "the run has no draws (--eval-draws 0, or a backend whose eval cannot sample them)")
    return f"Decided on: greedy pass@1 ({why})."


def cost_line(ctx: Ctx) -> str:
    """"\nCost: $X spent ..." where the run's launches are billed (hosted), else ""."""
    from driver.backends import spent_usd

    spent = spent_usd(ctx.rd.path)
    if not spent and ctx.state.max_cost_usd is None:
        return ""
    cap = f" of --max-cost ${ctx.state.max_cost_usd:g}" if ctx.state.max_cost_usd is not None else ""
    return (f"\nCost: ${spent:.2f} spent{cap} on Hosted Training (every run, failed attempts, eval "
            "runs and probes included: the larger of its GPU-hours at its dispatch rate and `prime "
            "train usage`; both are in cost.json); cost $: each arm's share.")


def summary_text(ctx: Ctx, rows: list[dict] | None = None) -> str:
    """The summary table, then what a reader must know to read its numbers: a stand-in trainer
    made them; the hub's full reward is not 1."""
    st = ctx.state
    rows = summary_rows(ctx) if rows is None else rows
    text = table_text(rows, replay_noise(ctx, rows))
    for c in table.CONTROLS:   # a control not run, and why
        why = next((e.split(": ", 1)[1][len(table.SKIPPED):] for e in st.phase4_errors
                    if e.startswith(f"{c.name}: {table.SKIPPED}")), None)
        if why:
            text += f"\n{c.label} was not run: {why}."
    if st.trainer_stand_in:
        text += (f"\nTrainer: a stand-in for prime-rl ({st.trainer_stand_in}, from "
                 f"DRIVER_RL_COMMAND); the model name {st.model} was only passed to it.")
    text += cost_line(ctx)
    ceiling = sum(f["weight"] for f in ctx.hub.get("rubric_funcs", []) if f["weight"] > 0)
    if ceiling and abs(ceiling - 1.0) > 1e-9:
        text += (f"\nShaped reward: the hub rubric's full reward is {ceiling:g}, not 1. A rollout "
                 "counts as correct (strict %) when its is_correct metric is >= 0.5, else when its "
                 f"reward is >= 0.5 of the {ceiling:g} available.")
    return text
