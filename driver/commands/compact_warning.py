"""`driver compact-warning RUN_DIR MESSAGE`: record that a context compaction lost something."""
from __future__ import annotations

import argparse
import json

from driver.commands.flags import EXIT_CODES

NAME = "compact-warning"


def add(sub) -> None:
    cw = sub.add_parser(
        "compact-warning", help="record in run.json that a context compaction lost something",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="For a coding agent acting as teacher: when compacting its context failed "
                    "or dropped something it needed, it records one line here (stamped with the "
                    "time and iteration) so the report and `driver status` show it. Run it while "
                    "no driver is running on RUN_DIR (between `driver run`/`resume` calls).")
    cw.add_argument("run_dir")
    cw.add_argument("message", help="what was lost or could not be compacted")
    cw.add_argument("--json", action="store_true")


def main(a) -> int:
    from datetime import datetime, timezone

    from driver.run.rundir import RunDir, RunLock

    rd = RunDir(a.run_dir)
    rd.load()
    with RunLock(rd.path):   # a driver running on this directory refuses it (exit 2)
        state = rd.load()
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        state.compact_warnings.append(f"{stamp} iteration {state.iteration}: {a.message}")
        rd.save(state)
    n = len(state.compact_warnings)
    print(json.dumps({"compact_warnings": n}) if a.json else f"recorded ({n} in run.json)")
    return 0
