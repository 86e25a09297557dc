"""`driver status RUN_DIR`: phase, iteration, budget, the arm training now, accuracies."""
from __future__ import annotations

import argparse
import json

from driver.commands.flags import EXIT_CODES

NAME = "status"


def add(sub) -> None:
    st = sub.add_parser(NAME, help="where a run is: phase, iteration, budget, accuracies",
                        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    st.add_argument("run_dir")
    st.add_argument("--json", action="store_true", help="machine-readable output")


def main(a) -> int:
    from driver.arms import progress
    from driver.reporting.status import status_payload

    p = status_payload(a.run_dir)
    if a.json:
        print(json.dumps(p, indent=2))
        return 0
    print(f"{p['run_dir']}\n  status {p['status']} · phase {p['phase']} · iteration {p['iteration']}"
          f"\n  elapsed {progress.duration(p['elapsed_s'])} of {progress.duration(p['budget_s'])} "
          f"budget {progress.bar(min(1.0, p['elapsed_s'] / p['budget_s']), 10)}")
    if p["trainer_stand_in"]:
        print(f"  trainer: stand-in {p['trainer_stand_in']} (not prime-rl)")
    if p["training"]:
        print("  training " + progress.line(p["training"]["arm"], p["training"]))
    if p["latest_eval"]:
        print(f"  latest eval: {p['latest_eval']['arm']} {p['latest_eval']['eval_acc']:.4f}")
    if p["loop_limits"]:
        print(f"  loop ended on: {' and '.join(p['loop_limits'])}"
              + ("; the run did the iterations it was given (extending it re-runs the controls)"
                 if "max_iters_reached" in p["loop_limits"] else ""))
    if p["reason"]:
        print(f"  reason: {p['reason']}")
    for k, v in list(p["eval_acc"].items()) + list(p["controls"].items()):
        print(f"  {k:<8} eval_acc {'skipped' if v is None else f'{v:.4f}'}")
    return 0
