"""`driver diagnose ROLLOUTS`: does a graded rollout file carry GRPO gradient?"""
from __future__ import annotations

import argparse
import json

from driver.commands.flags import EXIT_CODES

NAME = "diagnose"

DIAGNOSE_THRESHOLDS = """verdict: FAIL when any of
  group sizes differ                       (GRPO compares a rollout with its own group)
  live fraction on pass/fail < 0.25        (a group with one outcome has zero advantage)
  effort correlation < -0.2                (effort buys risk: the cheapest policy wins)
  truncation rate > 0.2                    (rollouts cut: by the student's context
                                           (prompt_too_long), a reply running past its
                                           closing tag, or a reply cut before it ended;
                                           the advice names which)
A rollout passes when reward >= 0.5 (--success-threshold). The raw-reward live fraction counts
groups whose rewards differ by more than 1e-6; with a shaped reward it can be high while the
pass/fail one is low: all-fail groups that only look live."""


def add(sub) -> None:
    dg = sub.add_parser(
        "diagnose", help="does a graded rollout file carry GRPO gradient? (PASS/FAIL)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Group rows by example_id and report: group uniformity (the group-size "
                    "histogram), the live fraction (groups whose outcome varies; on pass/fail and "
                    "on the raw reward), the effort correlation (Pearson of reward with tool calls, "
                    "else with the mean reply length on multi-turn episodes (an episode's length is the env's), "
                    "else with completion length), mean reward and truncation rate.",
        epilog=DIAGNOSE_THRESHOLDS + "\n\n" + EXIT_CODES)
    dg.add_argument("rollouts", help="a JSONL file of graded rollouts (classic prime-rl rows)")
    dg.add_argument("--success-threshold", type=float, default=None,
                    help="reward at or above which a rollout passes (default: 0.5)")
    dg.add_argument("--json", action="store_true")


def main(a) -> int:
    from pathlib import Path

    from driver.analysis import diagnose
    from driver.errors import UsageError

    if not Path(a.rollouts).is_file():
        raise UsageError(f"{a.rollouts} is not a file")
    try:
        rows = diagnose.read_rows(Path(a.rollouts))
        kw = {} if a.success_threshold is None else {"success_threshold": a.success_threshold}
        d = diagnose.diagnose(rows, **kw)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(json.dumps(d, indent=2) if a.json else diagnose.render(d))
    return 0 if d["verdict"] == "PASS" else 1
