"""Does the loop lift the student, on more than one seed? Runs the default demo (`driver run`,
the README's first command) once per seed and prints, per seed, the best iteration's lift on
the *test* split over iter_0 and over control C (untargeted rows) on both of seed 003's
measurements: greedy pass@1 (Newcombe 95% interval, exact McNemar p) and the per-draw success
rate over the stochastic draws (paired t interval and p over per-example draw means), the one
the summary decides on marked `*`; beside them, the seed's replay noise (run A, the best
iteration's rows trained again from iter_0, minus that iteration) on the deciding measurement,
the yardstick a lift is read against, and the checkpoint the summary recommends.

    python bench/lift.py                         # seeds 0, 1, 2 (about 30 minutes on 2 cores)
    python bench/lift.py --seeds 0 -- --budget 3m    # anything after -- goes to `driver run`
    python bench/lift.py --runs RUN_DIR [RUN_DIR ...]   # summarise finished runs only
    python bench/lift.py --split selection --runs RUN_DIR ...   # the same lifts, selection split

The best iteration is chosen on the selection split by the driver; this bench only
reads the summary the driver computed, from numeric records. `--split selection` prints the
same comparisons on the selection split and prints no test figure: it is what a candidate
student or setting is compared on, so that the test split stays out of every choice.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def run_seed(seed: int, runs_dir: Path, extra: list[str]) -> Path:
    seed_dir = runs_dir / f"seed_{seed}"
    seed_dir.mkdir(parents=True, exist_ok=True)
    log = seed_dir / "driver_run.log"
    t0 = time.time()
    print(f"[seed {seed}] driver run --seed {seed} {' '.join(extra)} (log: {log})", flush=True)
    with log.open("w") as fh:
        rc = subprocess.run([sys.executable, "-m", "driver.cli", "run", "--seed", str(seed),
                             "--runs-dir", str(seed_dir), *extra],
                            stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT).returncode
    runs = sorted(p for p in seed_dir.iterdir() if (p / "run.json").exists())
    if rc != 0 or not runs:
        sys.exit(f"[seed {seed}] driver run exited {rc}; see {log}")
    print(f"[seed {seed}] done in {time.time() - t0:.0f} s: {runs[-1]}", flush=True)
    return runs[-1]


def summarise(run_dir: Path, split: str = "test") -> dict:
    from driver.context import Ctx
    from driver.reporting.summary import replay_noise, summary_rows
    from driver.run.rundir import RunDir

    rd = RunDir(run_dir)
    state = rd.load()
    ctx = Ctx.records(rd, state)
    rows = summary_rows(ctx)
    by_arm = {r["arm"]: r for r in rows}
    best = next((r for r in rows if r["best"]), None)
    trained = [r for r in rows if r["arm"].startswith("iter_") and r["arm"] != "iter_0"
               and not r["skipped"] and r["eval_acc"] is not None]
    c = by_arm.get("run_c") or {}
    i0 = by_arm.get("iter_0") or {}
    rec = next((r["arm"] for r in rows if r.get("recommended")), None)
    return {"run_dir": str(run_dir), "seed": state.seed,
            "minutes": round(((state.end_ts or time.time()) - state.start_ts) / 60, 1),
            "trained_iterations": len(trained),
            "controls": sorted(a for a in by_arm if a.startswith("run_") and by_arm[a]["eval_acc"] is not None),
            "measure": rows[0].get("measure") if rows else None,
            "recommended": rec,
            "iter0_acc": i0.get("eval_acc"), "iter0_draws_acc": i0.get("draws_acc"),
            "iter0_selection_acc": i0.get("selection_acc"),
            "best": best["arm"] if best else None,
            "best_selection_acc": best.get("selection_acc") if best else None,
            "best_acc": best["eval_acc"] if best else None,
            "best_draws_acc": best.get("draws_acc") if best else None,
            "n": best["n"] if best else None,
            "n_draws": best.get("n_draws") if best else None,
            "best_vs_iter0": best.get("vs_iter0") if best else None,
            "best_vs_iter0_draws": best.get("vs_iter0_draws") if best else None,
            "run_c_acc": c.get("eval_acc"), "run_c_draws_acc": c.get("draws_acc"),
            "best_vs_run_c": c.get("best_vs_control"),
            "best_vs_run_c_draws": c.get("best_vs_control_draws")} | (
                on_selection(ctx, rows) if split == "selection"
                else {"split": "test", "replay_noise": replay_noise(ctx, rows)})


def on_selection(ctx, rows: list[dict]) -> dict:
    """The record's test figures replaced by the same ones on the selection split (the arms'
    eval_summary.json `selection` blocks, paired per example as the summary pairs the test
    split); the replay noise is a test-split figure and is not measured there."""
    from driver.analysis.evaluation import DRAWS, GREEDY
    from driver.reporting.summary import arm_summary, compare, outcomes

    best = next((r for r in rows if r["best"]), None)
    arms = {a: arm_summary(ctx, a) or {} for a in ("iter_0", "run_c", best and best["arm"]) if a}
    out: dict = {"split": "selection", "replay_noise": {"measured": False, "why": "test split only"}}
    for measure, acc, suffix in ((GREEDY, "_acc", ""), (DRAWS, "_draws_acc", "_draws")):
        got = {a: outcomes(s, measure, "selection") for a, s in arms.items()}
        mean = {a: (sum(v.values()) / len(v) if v else None) for a, v in got.items()}
        out["iter0" + acc] = mean.get("iter_0")
        out["run_c" + acc] = mean.get("run_c")
        out["best" + acc] = mean.get(best["arm"]) if best else None
        for key, other in (("best_vs_iter0", "iter_0"), ("best_vs_run_c", "run_c")):
            ok = best and got.get(other) and got.get(best["arm"])
            out[key + suffix] = compare(measure, got[other], got[best["arm"]]) if ok else None
        if measure == GREEDY:
            out["n"] = len(got.get(best["arm"], {})) if best else None
        else:
            drawn = ((arms[best["arm"]].get("selection") or {}).get("draws") or {}) if best else {}
            out["n_draws"] = drawn.get("n")
    return out


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _cmp(v: dict | None) -> str:
    if not v or not v.get("n"):
        return "-"
    lo, hi = v["lift_ci"]
    return f"{100 * v['lift']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] p={v['p_value']:.3g}"


def _noise(v: dict | None) -> str:
    """Run A minus the iteration it replays: the seed's arm-to-arm noise, read beside the lifts."""
    if not v or not v.get("measured"):
        return "unmeasured"
    lo, hi = v["difference_ci"]
    return f"{100 * v['difference']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}] p={v['p_value']:.3g}"


def render(res: list[dict]) -> str:
    lines = [f"{'seed':<5}{'min':>5}{'trained':>8}  {'best':<7}{'recommended':<12}{'measure':<9}"
             f"{'iter_0 %':>8}{'best %':>7}{'C %':>6}  {'best - iter_0 [95% CI] p':<32}"
             f"{'best - C [95% CI] p':<32}replay noise: A - replayed [95% CI] p"]
    for r in res:
        for measure, suffix in (("greedy", ""), ("draws", "_draws")):
            if measure == "draws" and r.get("best_draws_acc") is None:
                continue
            acc = "_draws_acc" if suffix else "_acc"
            head = (f"{r['seed']:<5}{r['minutes']:>5}{r['trained_iterations']:>8}  "
                    f"{r['best'] or '-':<7}{r.get('recommended') or '-':<12}" if measure == "greedy"
                    else " " * 38)
            mark = "*" if r.get("measure") == measure else " "
            noise = _noise(r.get("replay_noise")) if mark == "*" else ""
            lines.append(f"{head}{measure + mark:<9}{_pct(r.get('iter0' + acc)):>8}"
                         f"{_pct(r.get('best' + acc)):>7}{_pct(r.get('run_c' + acc)):>6}  "
                         f"{_cmp(r.get('best_vs_iter0' + suffix)):<32}"
                         f"{_cmp(r.get('best_vs_run_c' + suffix)):<32}{noise}")

    def decided(r, key):
        return (r.get(key + ("_draws" if r.get("measure") == "draws" else "")) or {})

    goal = [r for r in res if r.get("recommended") == r.get("best") and r.get("best")
            and decided(r, "best_vs_iter0").get("lift", 0) >= 0.10
            and decided(r, "best_vs_run_c").get("lift", 0) > 0
            and decided(r, "best_vs_run_c").get("significant")]
    ns = sorted({r["n"] for r in res if r["n"]})
    lines.append(
        f"best vs iter_0 positive on {sum(decided(r, 'best_vs_iter0').get('lift', 0) > 0 for r in res)} "
        f"of {len(res)} seeds and vs C on {sum(decided(r, 'best_vs_run_c').get('lift', 0) > 0 for r in res)}, "
        f"on the deciding measurement (*); the goal (the recommended checkpoint is a trained iteration "
        f">= +10 points over iter_0 and significantly above C, 5%) holds on {len(goal)} of {len(res)}. "
        f"{res[0].get('split', 'test') if res else 'test'} split, n = {', '.join(map(str, ns)) or '-'} examples per arm"
        + "".join(f" ({n} draws)" for n in sorted({r['n_draws'] for r in res if r.get('n_draws')}))
        + "; the best iteration is chosen on the selection split. replay noise: run A (the best "
        "iteration's rows trained again from iter_0) minus the iteration it replays, one sample of "
        "the seed's arm-to-arm noise; a lift no larger is not told apart from it.")
    return "\n".join(lines)


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    ap.add_argument("--runs-dir", default=str(ROOT / "runs" / "lift"),
                    help="where each seed's run directory goes (default runs/lift)")
    ap.add_argument("--runs", nargs="+", help="finished run directories: summarise, run nothing")
    ap.add_argument("--split", choices=("test", "selection"), default="test",
                    help="the split the lifts are read on: test (the default) or selection, the "
                         "one candidates are compared on (no test figure is printed)")
    ap.add_argument("--json", action="store_true", help="print the per-seed records as JSON")
    a = ap.parse_args(argv)
    if a.runs:
        dirs = [Path(p) for p in a.runs]
    else:
        dirs = [run_seed(int(s), Path(a.runs_dir), extra) for s in a.seeds.split(",")]
    res = [summarise(d, a.split) for d in dirs]
    print(json.dumps(res, indent=2) if a.json else render(res))


if __name__ == "__main__":
    main()
