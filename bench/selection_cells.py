"""Where a demo run's lift sits: each arm's selection-split accuracy, greedy and per draw, in four
cells of StockArithmetic's problems, by population (ID50, OOD100) and whether the day's peak stock
reaches the demo student's trigger (120 and more).

    python bench/selection_cells.py runs/lift/seed_*/stock_*      # iter_0, the best iteration, C

The selection split is drawn as the test split is and is the one the driver chooses on; the test
split is never read here. Only numbers are read from the run (each arm's eval_summary.json:
per-example greedy correctness and per-example mean over the draws); each problem's population
and peak come from the env's own split builder, not from any eval file.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "environments" / "stock_arithmetic"))
TRIGGER = 120   # the demo student's planted habit starts at this peak stock (embedded_trainer/recipe.py)


def cell(row: dict) -> str:
    p = row["info"]["problem"]
    trig = p["initial"] + sum(p["deliveries"]) >= TRIGGER
    return f"{row['info']['population']}, {'trigger' if trig else 'no trigger'}"


def cells(run: Path, arm: str, split: list[dict]) -> dict:
    sel = json.loads((run / arm / "eval_summary.json").read_text())["selection"]
    greedy, draws = sel["correct_by_example"], (sel.get("draws") or {}).get("mean_by_example") or {}
    out: dict = {}
    for i, row in enumerate(split):
        c = out.setdefault(cell(row), [0, 0.0, 0.0])
        c[0] += 1
        c[1] += float(greedy[str(i)])
        c[2] += float(draws[str(i)]) if str(i) in draws else float("nan")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="finished StockArithmetic run directories")
    args = ap.parse_args()
    from stock_arithmetic.data import build_splits

    split = build_splits()["selection"]
    names = sorted({cell(r) for r in split})
    counts = {n: sum(cell(r) == n for r in split) for n in names}
    print("greedy % / per-draw % on the selection split; cells: " +
          "; ".join(f"{n} ({counts[n]})" for n in names))
    for run in args.runs:
        best = json.loads((run / "best_iter.json").read_text())["best_iter"]
        print(run)
        for arm in ("iter_0", f"iter_{best}", "run_c_untargeted_from_iter0"):
            if not (run / arm / "eval_summary.json").exists():
                continue
            got = cells(run, arm, split)
            label = f"{arm} (best)" if arm == f"iter_{best}" else arm
            print(f"  {label:30s}" + "".join(
                f"  {n}: {100 * got[n][1] / got[n][0]:3.0f} / {100 * got[n][2] / got[n][0]:3.0f}" for n in names))


if __name__ == "__main__":
    main()
