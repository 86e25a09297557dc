"""What did the teacher's rows look like to the student? For finished StockArithmetic runs: per
iteration, the share of each dataset's rows at a peak stock of `--peak` or more and with each
surface feature, the failing range the teacher aimed at (weakness.json's `aim`) with the share
of the dataset inside it, and the gradient probe's rollouts (the student on those rows, every attempt)
solved by surface and peak; and iter_0's own train rollouts at that peak (the hub's rows):
how many groups met it over iter_0's steps and how many of them were live (some rollouts right,
some wrong), the only groups a GRPO step learns from, so how much of a planted habit iter_0 had
the chance to flip before any teacher row. Reads train-side files only (dataset.jsonl*,
probe_rollouts.jsonl*, iter_0's train rollouts): rows' info and rollouts' rewards, never an eval
file.

    python bench/teacher_rows.py RUN_DIR [RUN_DIR ...] [--peak 120] [--by-step] [--arms]
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from generators.stock_arithmetic import FAMILY, in_aim
from rl_contract.classic import SUCCESS_THRESHOLD

SURFACES = tuple(FAMILY.surface_shares)


def peak(info: dict) -> int:
    return FAMILY.magnitudes["peak stock"](info["problem"])


def rows_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def groups_at_peak(rows_by_step: dict, threshold: int, at: bool = True) -> dict:
    """Rollouts at a peak of `threshold` or more (`at`; else below it), grouped by step (or
    probe attempt) and example, one GRPO group each: groups met, live groups (some rollouts
    right, some wrong), rollouts, and how many of them were right; and `by_step`, each step's
    groups in order as "peak: right/rollouts" (when in the launch a habit gave way). Errored
    rollouts and rows without a problem are left out."""
    groups: dict[tuple, list[bool]] = defaultdict(list)
    peaks: dict[tuple, int] = {}
    for step, rows in rows_by_step.items():
        for r in rows:
            info = r.get("info") or {}
            if not r.get("errored") and "problem" in info and (peak(info) >= threshold) == at:
                g = (step, str(r.get("example_id")))
                groups[g].append(float(r.get("reward") or 0) >= SUCCESS_THRESHOLD)
                peaks[g] = peak(info)
    right = {g: sum(v) for g, v in groups.items()}
    by_step: dict = defaultdict(list)
    step_right: dict = defaultdict(lambda: [0, 0])   # per step: rollouts right, rollouts
    for (step, ex), v in groups.items():
        by_step[step].append(f"{peaks[(step, ex)]}: {right[(step, ex)]}/{len(v)}")
        step_right[step][0] += right[(step, ex)]
        step_right[step][1] += len(v)
    return {"groups": len(groups), "live": sum(0 < right[g] < len(v) for g, v in groups.items()),
            "rollouts": sum(len(v) for v in groups.values()), "right": sum(right.values()),
            "by_step": dict(by_step), "step_right": dict(step_right)}


def arm_at_peak(run: Path, n: int, threshold: int) -> dict:
    """groups_at_peak over iter_n's train rollouts, every step of its launch, read through the
    run's dialect as the teacher's brief reads them, each step numbered as it was trained."""
    from driver.context import Ctx
    from driver.phases.iteration import train_window
    from driver.run.arm_files import ArmFiles
    from driver.run.rundir import RunDir

    rd = RunDir(run)
    ctx = Ctx.records(rd, rd.load())
    out = ctx.iter_dir(n) / ArmFiles.OUT
    steps = ctx.dialect.train_steps(out, *train_window(ctx, n))
    # a step named as it was trained (classic writes step s's batch under step_{s-1})
    return groups_at_peak({ctx.dialect.trained_step(s): list(ctx.dialect.train_rows(out, s))
                           for s in steps}, threshold)


def surface_class(info: dict, threshold: int) -> str:
    feats = set(info.get("structural_features") or [])
    surface = " + ".join(s.split("_")[0] for s in SURFACES if s in feats) or "neither"
    return f"{surface}, peak {'>=' if peak(info) >= threshold else '<'} {threshold}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--peak", type=int, default=120, help="the peak stock that counts (default 120)")
    ap.add_argument("--by-step", action="store_true",
                    help="also list iter_0's groups at the peak step by step (peak: right/rollouts)")
    ap.add_argument("--arms", action="store_true",
                    help="also each trained iteration's own train rollouts at the peak (with "
                         "--by-step, step by step: where in its arm the habit gave way), and each "
                         "probe attempt's groups at and below the peak")
    a = ap.parse_args()
    probe: dict[str, list[float]] = defaultdict(list)
    probe_groups: dict[str, list[dict]] = {}   # every attempt's rollouts, one "step" per file
    for run in a.runs:
        print(f"run: {run}")
        print(f"  {'dataset':<36} {'rows':>5} {'peak>=' + str(a.peak):>9} "
              + " ".join(f"{s:>19}" for s in SURFACES))
        for d in sorted(run.glob("iter_*"), key=lambda p: int(p.name.split("_")[1])):
            w = d / "weakness.json"
            aim = json.loads(w.read_text()).get("aim") if w.exists() else None
            for ds in sorted(d.glob("dataset.jsonl*")):
                got = [r["info"] for r in rows_of(ds)]
                print(f"  {d.name + '/' + ds.name:<36} {len(got):>5} "
                      f"{sum(peak(i) >= a.peak for i in got) / len(got):>9.3f} "
                      + " ".join(f"{sum(s in i['structural_features'] for i in got) / len(got):>19.3f}"
                                 for s in SURFACES))
                if aim and ds.name == "dataset.jsonl":   # the report beside it wrote this one
                    side = "at least" if "at_least" in aim else "at most"
                    print(f"    aim: {aim['magnitude']} {side} {aim.get('at_least', aim.get('at_most'))}"
                          f" (found by {aim['found_in']}'s teacher, share {aim['share']}):"
                          f" {sum(in_aim(i['problem'], aim) for i in got) / len(got):.3f} inside")
            for pr in sorted(d.glob("probe_rollouts.jsonl*")):
                probe_groups[str(pr)] = rows_of(pr)
                for r in probe_groups[str(pr)]:
                    probe[surface_class(r["info"], a.peak)].append(float(r["reward"]))
                if a.arms:
                    at, below = (groups_at_peak({0: probe_groups[str(pr)]}, a.peak, x) for x in (True, False))
                    print(f"    probe {pr.name}: groups at a peak >= {a.peak} {at['groups']} "
                          f"({at['live']} live), below {below['groups']} ({below['live']} live)")
        arms = [0] + ([int(d.name.split("_")[1]) for d in run.glob("iter_*")
                       if (d / "train_done.json").exists() and d.name != "iter_0"] if a.arms else [])
        for n in sorted(arms):
            t = arm_at_peak(run, n, a.peak)
            print(f"  iter_{n}'s train rollouts at a peak >= {a.peak}: {t['groups']} groups, {t['live']} live; "
                  f"{t['right']} of {t['rollouts']} rollouts right")
            if a.by_step:
                for step, got in t["by_step"].items():
                    r, k = t["step_right"][step]
                    print(f"    step {step} ({r}/{k} right): {', '.join(got)}")
    print("gradient-probe rollouts, every attempt of the runs above:")
    for k in sorted(probe):
        v = probe[k]
        print(f"  {k:<44} {len(v):>5} rollouts, {sum(x >= SUCCESS_THRESHOLD for x in v) / len(v):6.1%} solved")
    for at, word in ((True, ">="), (False, "<")):
        g = groups_at_peak(probe_groups, a.peak, at)
        print(f"  groups at a peak {word} {a.peak}: {g['live']} live of {g['groups']}")


if __name__ == "__main__":
    main()
