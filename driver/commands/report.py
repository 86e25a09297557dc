"""`driver report RUN_DIR`: report.md and PNG plots, from numeric records only."""
from __future__ import annotations

import argparse
import json

from driver.commands.flags import EXIT_CODES

NAME = "report"


def add(sub) -> None:
    rp = sub.add_parser("report", help="write report.md and PNG plots for a run directory",
                        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="report.md (the summary table with intervals and paired tests, "
                                    "per-population lifts, per-iteration notes), eval_accuracy.png "
                                    "and train_reward.png, from numeric records only.")
    rp.add_argument("run_dir")
    rp.add_argument("--json", action="store_true", help="print the paths written as JSON")


def main(a) -> int:
    from driver.context import Ctx
    from driver.reporting import report
    from driver.run.rundir import RunDir

    rd = RunDir(a.run_dir)
    state = rd.load()
    rd.load_metrics()
    # a report reads records only: no backend (prime-rl checkout, torch) is needed
    path = report.write(Ctx.records(rd, state))
    files = [str(path), str(rd.path / "eval_accuracy.png"), str(rd.path / "train_reward.png")]
    print(json.dumps({"written": files}) if a.json else "wrote " + "\n      ".join(files))
    return 0
