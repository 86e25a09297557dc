"""The built-in teacher: deterministic, no LLM.

The weakness analysis is computed from train rollouts alone: reward by completion-length
quartile, and failure rates by structural features of the problem; from iteration 2, a bucket
the last iteration's training fixed (the brief's weakness diff) keeps only the allocation floor.
The dataset comes from the hub env's family generator. An environment without one needs the
agent or the LLM teacher: this teacher says so rather than weaken the gate.
"""
from __future__ import annotations

import json
import statistics

from driver import resources
from driver.errors import DriverError
from driver.gates.rules import MIN_FEATURE_SHARE
from driver.run.files import atomic_write_json, atomic_write_text
from driver.teachers import Brief, builtin_refusal, outputs_present
from driver.run.arm_files import ArmFiles
from generators import Family, family_for
from rl_contract.classic import (
    SUCCESS_THRESHOLD,  # a rollout passes at a reward >= this
)

TARGET_ROWS = 600


def _completion_text(row: dict) -> str:
    """The student's own text: a multi-turn episode's replies, not the env's messages."""
    comp = row.get("completion")
    if isinstance(comp, str):
        return comp
    return " ".join(str(m.get("content", "")) for m in comp or []
                    if isinstance(m, dict) and m.get("role", "assistant") == "assistant")


def length_quartiles(rows: list[dict]) -> list[float | None]:
    """Mean reward per completion-length quartile (shortest first)."""
    if not rows:
        return [None] * 4
    ranked = sorted(rows, key=lambda r: len(_completion_text(r)))
    q = max(1, len(ranked) // 4)
    chunks = [ranked[i * q:(i + 1) * q] if i < 3 else ranked[3 * q:] for i in range(4)]
    return [round(statistics.fmean(float(r.get("reward", 0)) for r in c), 4) if c else None
            for c in chunks]


def metric_means(rows: list[dict]) -> dict[str, list]:
    """Each numeric reward component (the row's `metrics`) averaged over failed and passed
    rollouts: a format component far lower among failures points at format, not reasoning."""
    out = {}
    names = sorted({k for r in rows for k, v in (r.get("metrics") or {}).items()
                    if isinstance(v, (int, float))})
    for k in names:
        pair = []
        for group in ([r for r in rows if failed(r)], [r for r in rows if not failed(r)]):
            vals = [float(r["metrics"][k]) for r in group
                    if isinstance((r.get("metrics") or {}).get(k), (int, float))]
            pair.append(round(statistics.fmean(vals), 4) if vals else None)
        out[k] = pair
    return out


def allocate(severities: dict[str, float], total: int = TARGET_ROWS, floor: float = 0.04) -> dict[str, int]:
    """Rows per bucket proportional to severity, every bucket at least `floor` of the total."""
    keys = list(severities)
    base = {k: max(severities[k], 1e-6) for k in keys}
    s = sum(base.values())
    alloc = {k: max(int(total * floor), round(total * base[k] / s)) for k in keys}
    # trim or pad the largest bucket so the total is exact
    biggest = max(alloc, key=alloc.get)
    alloc[biggest] += total - sum(alloc.values())
    return alloc


def failed(row: dict) -> bool:
    return float(row.get("reward", 0)) < SUCCESS_THRESHOLD


def choose_style(brief: Brief, fam: Family) -> str | None:
    """The family's default surface style, or "plain" once the gradient probe has shown that
    the student solves none of the story-style rows (in this iteration, or in an earlier one
    that then trained on plain rows). Evidence from the probe only: never from eval results."""
    styles = fam.styles
    if "plain" not in styles:
        return None
    p = brief.last_probe
    if p and not p.get("passed", True) and p.get("all_solved") == 0:
        return "plain"
    for k in range(1, brief.iteration):
        w = brief.run_dir / f"iter_{k}" / ArmFiles.WEAKNESS
        if w.exists() and json.loads(w.read_text()).get("style") == "plain":
            return "plain"
    return styles[0]


NEVER_SOLVED = 0.97   # a structure failed this often is out of reach: no group would vary
SURFACE_EVIDENCE = 16  # probe rollouts a surface feature needs before its solve rate counts
# A surface is left out at this solve rate or below: a group of 4 then varies less than one
# time in five, and the surface is drawn on rows whatever their structure, so it dilutes the aim.
SURFACE_OFF = 0.05
# A surface with too little evidence either way (the hub's own rows may carry none) is drawn on
# this share of the rows, the gate's per-feature floor with a margin, until the probe has seen
# it: a surface the student cannot read turns every row it is drawn on into a row without gradient.
SURFACE_TRIAL = round(1.5 * MIN_FEATURE_SHARE, 2)


def surface_reach(brief: Brief, fam: Family) -> dict[str, dict]:
    """Each surface feature the family draws at a rate (fam.surface_shares: distractors,
    interleaving) with its solve rate over every gradient-probe rollout of this run so far
    (every attempt of every iteration: the student on the teacher's own rows, never eval rows),
    and `off` when it was seen often enough and (almost) never solved: such rows carry no
    gradient, so the next dataset draws none; `trial` while it has too little evidence. The
    evidence stays, so a later iteration keeps it off."""
    names = list(fam.surface_shares)
    if not names:
        return {}
    rewards: dict[str, list[float]] = {k: [] for k in names}
    # every attempt's: a rejected one's are set aside as probe_rollouts.jsonl.rejected-N
    paths = [p for k in range(1, brief.iteration + 1)
             for p in sorted((brief.run_dir / f"iter_{k}").glob("probe_rollouts.jsonl*"))]
    for path in paths:
        for line in path.read_text().splitlines():
            row = json.loads(line) if line.strip() else {}
            feats = set((row.get("info") or {}).get("structural_features") or [])
            for name in names:
                if name in feats:
                    rewards[name].append(float(row.get("reward", 0)))
    out = {}
    for name, got in rewards.items():
        solved = sum(r >= SUCCESS_THRESHOLD for r in got)
        out[name] = {"probe_rollouts": len(got), "solved": solved,
                     "off": len(got) >= SURFACE_EVIDENCE and solved <= SURFACE_OFF * len(got),
                     "trial": len(got) < SURFACE_EVIDENCE}
    return out


AIM_SHARE = 0.6      # rows drawn inside a failing range; the rest keep the buckets' spread
AIM_EVIDENCE = 12    # clean train rollouts a range needs inside it, and outside it
AIM_P = 1e-3         # one-sided Fisher exact p a range must beat: many cuts are compared
AIM_RATIO = 2.0      # and its failure rate must be at least this multiple of the rest's


def _clean(r: dict, surfaces: set) -> bool:
    return not surfaces & set((r.get("info") or {}).get("structural_features") or [])


def failing_range(sample: list[tuple[dict, dict]], fam: Family) -> dict | None:
    """Where along a magnitude of the problem (fam.magnitudes: the peak stock, the closing
    stock) the student's train rollouts fail far more often than elsewhere: the cut ("at least
    t" or "at most t") whose inside fails most clearly more than its outside, by a one-sided
    Fisher exact test; then, while a narrower cut on the same side fails clearly more than the
    margin it leaves out (the same test and bars), that narrower one. The first step finds the
    edge with the most evidence, which can take in a margin where the student fails only
    sometimes (more rollouts, so a smaller p); the second keeps the aim off that margin, where
    rows would go to problems the student mostly solves. Only rollouts without a surface
    feature count (a distractor fails a row whatever its numbers). `sample` holds (train
    rollout, problem) pairs; None when no cut has the evidence (AIM_EVIDENCE each side, p <
    AIM_P, a failure rate AIM_RATIO times the rest's)."""
    from scipy.stats import fisher_exact

    def clearer(inside: list[int], rest: list[int]) -> float | None:
        """The one-sided p that `inside` fails more than `rest`, where the bars are met."""
        n_in, f_in, n_out, f_out = len(inside), sum(inside), len(rest), sum(rest)
        if min(n_in, n_out) < AIM_EVIDENCE or f_in * n_out < AIM_RATIO * f_out * n_in:
            return None
        p = fisher_exact([[f_in, n_in - f_in], [f_out, n_out - f_out]], alternative="greater")[1]
        return float(p) if p < AIM_P else None

    def within(v, side: str, t) -> bool:
        return v >= t if side == "at_least" else v <= t

    surfaces = set(fam.surface_shares)
    clean = [(p, failed(r)) for r, p in sample if _clean(r, surfaces)]
    best = None
    for name, measure in fam.magnitudes.items():
        values = [(measure(p), f) for p, f in clean]
        for t in sorted({v for v, _ in values}):
            for side in ("at_least", "at_most"):
                p = clearer([f for v, f in values if within(v, side, t)],
                            [f for v, f in values if not within(v, side, t)])
                if p is not None and (best is None or p < best["p"]):
                    best = {"magnitude": name, "side": side, "t": t, "p": p}
    if best is None:
        return None
    values = [(fam.magnitudes[best["magnitude"]](p), f) for p, f in clean]
    side = best["side"]
    while True:   # narrow the cut while its core fails clearly more than its margin
        inside = [(v, f) for v, f in values if within(v, side, best["t"])]
        sharper = None
        for t in sorted({v for v, _ in inside}):
            if t == best["t"]:
                continue
            p = clearer([f for v, f in inside if within(v, side, t)],
                        [f for v, f in inside if not within(v, side, t)])
            if p is not None and (sharper is None or p < sharper[1]):
                sharper = (t, p)
        if sharper is None:
            break
        best["t"] = sharper[0]
    inside = [f for v, f in values if within(v, side, best["t"])]
    outside = [f for v, f in values if not within(v, side, best["t"])]
    return {"magnitude": best["magnitude"], side: best["t"],
            "p": clearer(inside, outside) or best["p"],
            "inside": {"rollouts": len(inside), "failed": sum(inside)},
            "outside": {"rollouts": len(outside), "failed": sum(outside)}}


def earlier_aim(brief: Brief) -> dict | None:
    """The first aim an earlier iteration's report found. Every iteration trains from iter_0's
    checkpoint, and iteration 1 reads that very student on the hub's own rows; a later one reads
    a student that the next arm does not start from, on rows the teacher chose (already bunched
    in the range, so their failures say more about that choice than about the student's edge)."""
    for k in range(1, brief.iteration):
        w = brief.run_dir / f"iter_{k}" / ArmFiles.WEAKNESS
        aim = json.loads(w.read_text()).get("aim") if w.exists() else None
        if aim:
            return {**aim, "found_in": aim.get("found_in", f"iter_{k}")}
    return None


def difficulty_shift(brief: Brief) -> int:
    """Which way the last rejected attempt points: -1 (easier) when the probe found groups the
    student never solves dominating, +1 (harder) when it found always-solved groups
    dominating, 0 otherwise or on a first attempt. The probe's numbers only."""
    p = brief.last_probe
    if not p or p.get("passed", True):
        return 0
    none, every = p.get("none_solved", 0), p.get("all_solved", 0)
    return -1 if none > every else 1 if every > none else 0


def edge_weight(fail_rate: float, shift: int = 0) -> float:
    """How many rows a structure gets, from its train failure rate: the edge of competence.
    Rows go where the student fails most *and still sometimes succeeds* (weight = fail rate
    cubed); a structure it never solves keeps only the floor. After a probe rejection the aim
    moves: easier (-1) peaks at a 50% failure rate, harder (+1) is the failure rate to the 6th."""
    if fail_rate >= NEVER_SOLVED and shift <= 0:
        return 1e-6
    if shift < 0:
        return fail_rate * (1 - fail_rate)
    return fail_rate ** (6 if shift > 0 else 3)


# A bucket of the last trained iteration's report is fixed when its failure rate over that
# iteration's last train steps (the brief's weakness diff: train rollouts only) is at or below
# FIXED_RATE on at least FIXED_EVIDENCE rollouts. There a group of 4 is all solved about two times
# in three (0.9^4), so its rows carry little gradient, and 10% failed of 64 rollouts has a 95%
# Wilson interval topping out under 20%: well short of the edge of competence the rows aim at
# (edge_weight). A fixed bucket keeps only the allocation floor; its rows go where the student
# still fails.
FIXED_RATE = 0.10
FIXED_EVIDENCE = 64


def fixed_buckets(brief: Brief) -> dict[str, dict]:
    """The buckets ("domain / sub_domain") the brief's weakness diff shows fixed, each with its
    row of the diff (before, after, verdict); empty in iteration 1."""
    diff = brief.weakness_diff()
    if not diff:
        return {}
    return {f"{r['domain']} / {r['sub_domain']}": {**r, "iteration": diff["iteration"]}
            for r in diff["buckets"] if r["after"]["rollouts"] >= FIXED_EVIDENCE
            and r["after"]["failure_rate"] <= FIXED_RATE}


def skeleton_source(brief: Brief, i: int, row: dict) -> str:
    """The failed rollout a skeleton row paraphrases, as TEACHER.md tells a teacher to cite it:
    its step and its idx in failures.jsonl (a brief made by hand may carry neither)."""
    if "step" in row and "idx" in row:
        return f"train_step_{row['step']}_idx_{row['idx']}"
    return f"{brief.failures_step}_idx_{i}"


class BuiltinTeacher:
    name = "builtin"

    def teach(self, brief: Brief) -> None:
        if outputs_present(brief.iter_dir):
            return
        refusal = builtin_refusal(brief.hub)   # None exactly where family_for finds a family
        if refusal:
            raise DriverError(refusal, exit_code=2)
        self._teach(brief, family_for(brief.hub))

    def _teach(self, brief: Brief, fam: Family) -> None:
        rows = brief.failures()
        n_failed = sum(map(failed, rows))
        style = choose_style(brief, fam)
        reach = surface_reach(brief, fam)
        surface = {}
        for k, v in reach.items():
            want = 0.0 if v["off"] else SURFACE_TRIAL if v["trial"] else None
            # only what this style can leave out, or turn down (plain rows keep their
            # distractors: clone rule)
            if (want is not None and fam.shares(style, {k: want})[k] == want
                    and (v["off"] or want < fam.shares(style)[k])):
                surface[k] = want
        probs = [(r, fam.structure_of(r.get("info") or {})) for r in rows]
        probs = [(i, r, p) for i, (r, p) in enumerate(probs) if p is not None]
        # failure rate of each bucket's structure over every rollout of the last train steps
        # (+1 smoothing): the 200 lowest-reward rows alone would make every bucket look failed
        sample = [(r, fam.structure_of(r.get("info") or {})) for r in brief.train_sample()]
        sample = [(r, p) for r, p in sample if p is not None]
        severity, evidence = {}, {}
        for key, constraint in fam.buckets.items():
            hits = [r for r, p in sample if constraint(p)]
            fails = sum(map(failed, hits))
            severity[key] = (fails + 1) / (len(hits) + 2)
            evidence[key] = fails
        shift = difficulty_shift(brief)
        # a failing range of a magnitude (a learned threshold): the first one found in this run
        # (earlier_aim says why), else from this sample; a probe that found the rows out of reach
        # halves its share
        aim = earlier_aim(brief) or failing_range(sample, fam)
        if aim:
            aim.setdefault("found_in", f"iter_{brief.iteration}")
            aim["share"] = AIM_SHARE / 2 if shift < 0 else AIM_SHARE
        domains: dict = {}
        for (d, s), sev in severity.items():
            domains.setdefault(d, []).append((s, sev))
        ranked = sorted(domains.items(), key=lambda kv: -max(v for _, v in kv[1]))

        def level(v):
            return "high" if v >= 0.6 else "med" if v >= 0.3 else "low"

        # a bucket the last iteration fixed keeps only the floor (a weight of 0: allocate's floor)
        fixed = {k: v for k, v in fixed_buckets(brief).items() if tuple(k.split(" / ", 1)) in severity}
        alloc = allocate({f"{d} / {s}": 0.0 if f"{d} / {s}" in fixed else edge_weight(v, shift)
                          for (d, s), v in severity.items()})
        prev = brief.eval_accs.get(f"iter_{brief.iteration - 1}", brief.eval_accs.get("iter_0"))
        weakness = {
            "prev_eval_acc": prev,
            "reward_by_length_quartile": length_quartiles(rows),
            "domains": [{
                "name": d, "severity": level(max(v for _, v in subs)),
                "evidence": (f"{sum(evidence[(d, s)] for s, _ in subs)} failed train rollouts "
                             "match this domain's structures"),
                "sub_domains": [{"name": s, "failure_rate": round(v, 3),
                                 **({"fixed": True} if f"{d} / {s}" in fixed else {})}
                                for s, v in subs],
            } for d, subs in ranked],
            "allocations": alloc,
            "structural_features": [{"name": k, "definition": v}
                                    for k, v in fam.features(style, surface).items()],
            "style": style,
            "surface": surface,
            "surface_reach": reach,
            "aim": aim,
            "difficulty_shift": shift,
            "train_rollouts_read": len(sample),
            "fixed": {k: {"by": f"iter_{v['iteration']}", "before": v["before"], "after": v["after"]}
                      for k, v in fixed.items()},
            "metrics_failed_vs_passed": metric_means(rows),
        }
        skeletons = [fam.skeleton(skeleton_source(brief, i, r), r.get("info") or {})
                     for i, r, _ in probs if failed(r)]
        d = brief.iter_dir
        atomic_write_json(d / ArmFiles.WEAKNESS, weakness)
        atomic_write_json(d / "skeletons.json", skeletons)
        atomic_write_text(d / ArmFiles.WEAKNESS_REPORT, self._report(brief, weakness, len(rows), n_failed)
                          + self._diff_section(brief, weakness))
        atomic_write_text(d / ArmFiles.GENERATOR, gen_script(
            fam.module, seed=brief.seed * 1000 + brief.iteration * 10 + brief.attempt,
            prior=[str(p.parent / ArmFiles.DATASET) for p in brief.prior_reports],
            style=style, surface=surface))
        atomic_write_text(d / ArmFiles.SCRATCHPAD_ENTRY,
                          self._entry(brief, weakness, len(rows), n_failed, fam.data_plan))

    def _report(self, brief: Brief, w: dict, n: int, n_failed: int) -> str:
        lines = [f"# Weakness report — iteration {brief.iteration}", "",
                 f"- Eval accuracy of the previous iteration: {w['prev_eval_acc']}",
                 f"- Train rollouts read: {n} (lowest reward first), failed: {n_failed}",
                 f"- Reward by completion-length quartile (short→long): {w['reward_by_length_quartile']}",
                 "", "## Domains (by severity)"]
        for dom in w["domains"]:
            lines.append(f"- **{dom['name']}** ({dom['severity']}): {dom['evidence']}")
            for s in dom["sub_domains"]:
                lines.append(f"  - {s['name']}: failure rate {s['failure_rate']}"
                             + (" — fixed by the last iteration's training: allocation floor only"
                                if s.get("fixed") else ""))
        lines += ["", "## Bucket allocations"]
        lines += [f"- {k}: {v}" for k, v in w["allocations"].items()]
        if w["metrics_failed_vs_passed"]:
            lines += ["", "## Reward components (mean over failed / passed rollouts)"]
            lines += [f"- {k}: {a} / {b}" for k, (a, b) in w["metrics_failed_vs_passed"].items()]
        if w.get("surface_reach"):
            lines += ["", "## Surface features in the gradient probe's rollouts (this run so far)"]
            for k, v in w["surface_reach"].items():
                verdict = (f" — too few to judge: drawn on {round(100 * w['surface'][k])}% of "
                           "the rows until the probe has seen it" if v["trial"] and k in w["surface"]
                           else "" if not v["off"] else
                           " — (almost) never solved, so no group varies: left out of this dataset"
                           if k in w["surface"] else
                           f" — (almost) never solved, but kept: {w['style']} rows need it")
                lines.append(f"- {k}: {v['solved']} of {v['probe_rollouts']} solved{verdict}")
        aim = w.get("aim")
        if aim:
            side = "at least" if "at_least" in aim else "at most"
            t = aim.get("at_least", aim.get("at_most"))
            i, o = aim["inside"], aim["outside"]
            lines += ["", "## Aim: a failing range", (
                f"- {aim['magnitude']} {side} {t}: {i['failed']} of {i['rollouts']} clean train "
                f"rollouts failed there against {o['failed']} of {o['rollouts']} elsewhere "
                f"(one-sided Fisher exact p = {aim['p']:.2g}; found by {aim['found_in']}'s teacher"
                f"). {round(100 * aim['share'])}% of the rows are drawn in this range.")]
        lines += ["", "## structural_features"]
        lines += [f"- {f['name']}: {f['definition']}" for f in w["structural_features"]]
        return "\n".join(lines) + "\n"

    def _diff_section(self, brief: Brief, w: dict) -> str:
        """Iteration 2 on: the last trained iteration's buckets before and after its training
        (the brief's weakness diff), and which of them this report drops as fixed."""
        table = brief.weakness_diff_table()
        if not table:
            return ""
        lines = ["", "## The last report's buckets, before and after training on them", "", table]
        for k, v in w.get("fixed", {}).items():
            a = v["after"]
            lines.append(f"- **{k}: fixed**: {a['failed']} of {a['rollouts']} train rollouts failed "
                         f"after {v['by']}'s training ({a['failure_rate']:.2f}; fixed at or below "
                         f"{FIXED_RATE:.2f} on at least {FIXED_EVIDENCE} rollouts), so this "
                         "report drops it: its bucket gets only the allocation floor.")
        if not w.get("fixed"):
            lines.append(f"- No bucket is fixed (a failure rate at or below {FIXED_RATE:.2f} on at "
                         f"least {FIXED_EVIDENCE} rollouts after training): each keeps the rows "
                         "its failure rate earns.")
        return "\n".join(lines) + "\n"

    def _entry(self, brief: Brief, w: dict, n: int, n_failed: int, plan: str) -> str:
        top = w["domains"][0]
        return "\n".join([
            f"## Iteration {brief.iteration} — built-in teacher",
            "### (1) Understanding from traces",
            (f"{n_failed} of {n} train rollouts read failed; the most severe structure is "
             f"'{top['name']}' ({top['severity']}). Reward by length quartile: "
             f"{w['reward_by_length_quartile']}."),
            "### (2) Buckets and target counts",
            *[f"- {k}: {v}" + (" (fixed by the last iteration: floor only)" if k in w["fixed"] else "")
              for k, v in w["allocations"].items()],
            "### (3) Plan for the data",
            plan,
            "### (4) Hyperparameter / reward changes",
            "None: the hub rubric is mirrored as is; no auxiliary reward.",
            "### (5) Results",
            "pending",
        ]) + "\n"


def gen_script(family: str, seed: int, prior: list[str], style: str | None = None,
               surface: dict | None = None) -> str:
    """The gen_dataset.py the built-in teacher writes: it calls the family module's `generate`
    with this iteration's seed, the earlier datasets (their clones are avoided) and, where the
    family has styles, the style and surface shares chosen (templates/teacher_builtin)."""
    return resources.jinja().get_template("teacher_builtin/gen_dataset.py.j2").render(
        family=family, seed=seed, prior=prior, style=style, surface=surface)
