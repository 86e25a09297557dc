"""What did the teacher's rows look like to the student? For finished StockArithmetic runs: per
iteration, the share of each dataset's rows at a peak stock of `--peak` or more and with each
surface feature, the failing range the teacher aimed at (weakness.json's `aim`) with the share
of the dataset inside it, and the gradient probe's rollouts (the student on those rows, every attempt)
solved by surface and peak. Reads train-side files only (dataset.jsonl*, probe_rollouts.jsonl*):
rows' info and rollouts' rewards, never an eval file.

    python bench/teacher_rows.py RUN_DIR [RUN_DIR ...] [--peak 120]
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


def surface_class(info: dict, threshold: int) -> str:
    feats = set(info.get("structural_features") or [])
    surface = " + ".join(s.split("_")[0] for s in SURFACES if s in feats) or "neither"
    return f"{surface}, peak {'>=' if peak(info) >= threshold else '<'} {threshold}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--peak", type=int, default=120, help="the peak stock that counts (default 120)")
    a = ap.parse_args()
    probe: dict[str, list[float]] = defaultdict(list)
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
            for pr in d.glob("probe_rollouts.jsonl*"):
                for r in rows_of(pr):
                    probe[surface_class(r["info"], a.peak)].append(float(r["reward"]))
    print("gradient-probe rollouts, every attempt of the runs above:")
    for k in sorted(probe):
        v = probe[k]
        print(f"  {k:<44} {len(v):>5} rollouts, {sum(x >= SUCCESS_THRESHOLD for x in v) / len(v):6.1%} solved")


if __name__ == "__main__":
    main()
