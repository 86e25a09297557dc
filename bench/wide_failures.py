"""How an arm fails on the bench's fresh OOD100-shaped problems: the planted habit (the worked
chain right, then the day's peak reported) against a worked chain that goes wrong. Reads the
eval rollouts that `bench/rl_headroom.py --keep DIR` keeps, and only those of its fresh `wide`
set and of that set's stochastic `draws`: 200 problems in no split of the hub env, so reading
their replies reads no eval split. Every other eval set in the file is skipped unread.

The share of replies whose chain is right, whatever they answer, bounds what a complete fix of
the habit could reach: a fix changes which number is reported, not the arithmetic before it.

  python bench/rl_headroom.py --temperature 0.7 --lr 5e-5 --arms mix_peak120 --draws 4 --keep runs/keep
  python bench/wide_failures.py runs/keep/anchor runs/keep/mix_peak120
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "environments" / "stock_arithmetic")]

from generators.stock_arithmetic import running  # noqa: E402
from stock_arithmetic.verifier import compute_final_stock, parse_answer_json, split_think  # noqa: E402
from stock_arithmetic.warm_start import peak_stock  # noqa: E402

FRESH_SETS = ("wide", "draws")   # rl_headroom's fresh OOD100-shaped set, greedy and sampled
# where a habit triggers: the demo student's on a peak of 120 or more; a candidate's on another
# quantity of the problem (warm_start_corpus's initial_habit_from)
QUANTITIES = {"peak": peak_stock, "initial": lambda p: p["initial"]}
OUTCOMES = ("right", "peak, chain right", "peak, chain wrong", "chain wrong", "other")
STEP = re.compile(r"=\s*(-?\d+)")


def outcome(text: str, problem: dict) -> tuple[str, bool]:
    """The reply's outcome and whether its worked chain is right."""
    think = re.search(r"<think>(.*?)</think>", text, re.S)
    chain_right = bool(think) and [int(x) for x in STEP.findall(think.group(1))] == \
        running(problem)[1:]
    parsed = parse_answer_json(split_think(text))
    value = parsed["value"] if parsed["valid"] else None
    if value == compute_final_stock(problem):
        return "right", chain_right
    if value == peak_stock(problem):
        return ("peak, chain right" if chain_right else "peak, chain wrong"), chain_right
    return ("other" if chain_right else "chain wrong"), chain_right


def final_eval_file(arm_dir: Path) -> Path:
    files = sorted(arm_dir.glob("run_default/rollouts/step_*/eval_rollouts.jsonl"),
                   key=lambda f: int(f.parent.name.removeprefix("step_")))
    if not files:
        sys.exit(f"{arm_dir}: no run_default/rollouts/step_*/eval_rollouts.jsonl; keep an arm's "
                 "output with `bench/rl_headroom.py --keep DIR` and pass DIR/<arm>")
    return files[-1]


def tally(arm_dir: Path, trigger: tuple[str, int] = ("peak", 120)) -> dict:
    cells: dict = {}
    with open(final_eval_file(arm_dir)) as fh:
        for line in fh:
            row = json.loads(line)
            if row.get("env_name") not in FRESH_SETS:
                continue
            problem = row["info"]["problem"]
            text = row["completion"][-1]["content"] if row["completion"] else ""
            key = (row["env_name"], QUANTITIES[trigger[0]](problem) >= trigger[1])
            label, chain_right = outcome(text, problem)
            cell = cells.setdefault(key, Counter())
            cell[label] += 1
            cell["_chain_right"] += chain_right
    return cells


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("arms", nargs="+", type=Path, help="arm directories kept by rl_headroom --keep")
    ap.add_argument("--trigger", default="peak:120", metavar="QUANTITY:T",
                    help="the habit's trigger: QUANTITY (peak or initial, the opening stock) of T "
                         "or more (default peak:120, the demo student's)")
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    a = ap.parse_args()
    quantity, _, t = a.trigger.partition(":")
    if quantity not in QUANTITIES or not t.isdigit():
        ap.error(f"--trigger {a.trigger!r}: give QUANTITY:T, QUANTITY one of {', '.join(QUANTITIES)}")
    trigger = (quantity, int(t))
    got = {str(d): tally(d, trigger) for d in a.arms}
    if a.json:
        print(json.dumps({arm: {f"{s}:{'trigger' if t else 'no trigger'}": dict(c)
                                for (s, t), c in cells.items()} for arm, cells in got.items()}, indent=1))
        return
    print(f"{'arm':<34}{'set':<7}{'cell':<12}{'n':>5}" + "".join(f"{o:>19}" for o in OUTCOMES)
          + f"{'chain right':>13}")
    for arm, cells in got.items():
        for (s, t) in sorted(cells, key=lambda k: (k[0] != "wide", k[1])):
            c = cells[(s, t)]
            n = sum(c[o] for o in OUTCOMES)
            chain_right = c["_chain_right"]
            print(f"{Path(arm).name:<34}{s:<7}{'trigger' if t else 'no trigger':<12}{n:>5}"
                  + "".join(f"{100 * c[o] / n:>18.1f}%" for o in OUTCOMES)
                  + f"{100 * chain_right / n:>12.1f}%")
    print(f"% of replies; trigger: {quantity} {trigger[1]} or more. chain right: the worked chain's "
          "stocks all right, whatever is answered: what a complete fix of the habit could reach. "
          "wide: greedy, one reply per problem; draws: the sampled replies at temperature 1.0.")


if __name__ == "__main__":
    main()
