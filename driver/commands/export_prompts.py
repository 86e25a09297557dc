"""`driver export-prompts ROLLOUTS -o OUT`: rollouts -> a verifiers dataset of prompts."""
from __future__ import annotations

import argparse
import json

from driver.commands.flags import EXIT_CODES

NAME = "export-prompts"


def add(sub) -> None:
    ex = sub.add_parser(
        "export-prompts", help="rollouts -> a verifiers dataset of prompts (one phrasing per situation)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXIT_CODES,
        description="Write prompts in the shape verifiers reads (prompt or question, optional "
                    "answer, info with the ground truth). The other rollouts of a prompt collapse "
                    "into it; a situation (info.situation_id or info.situation) keeps one "
                    "phrasing; rows whose prompt is the spec's own situation text (seed probes) "
                    "are dropped.")
    ex.add_argument("rollouts")
    ex.add_argument("-o", "--output", required=True, help="output JSONL")
    ex.add_argument("--keep-seeds", action="store_true", help="keep seed probes")
    ex.add_argument("--keep-phrasings", action="store_true", help="keep every phrasing of a situation")
    ex.add_argument("--spec", help="spec JSON whose `situations` are the seed texts "
                                   "(default: spec.json beside ROLLOUTS, when there is one)")
    ex.add_argument("--json", action="store_true")


def main(a) -> int:
    from pathlib import Path

    from driver.analysis import diagnose, export_prompts
    from driver.errors import UsageError
    from driver.run.files import atomic_write_text

    src = Path(a.rollouts)
    if not src.is_file():
        raise UsageError(f"{a.rollouts} is not a file")
    spec = Path(a.spec) if a.spec else src.parent / "spec.json"
    if a.spec and not spec.is_file():
        raise UsageError(f"--spec {a.spec} is not a file")
    try:
        seeds = export_prompts.spec_situations(spec) if spec.is_file() else set()
        rows = diagnose.read_rows(src)
    except ValueError as e:
        raise UsageError(str(e)) from None
    kept, counts = export_prompts.export(rows, seeds, a.keep_seeds, a.keep_phrasings)
    atomic_write_text(Path(a.output), "".join(json.dumps(r) + "\n" for r in kept))
    counts["output"] = str(Path(a.output).resolve())
    counts["spec"] = str(spec) if spec.is_file() else None
    if a.json:
        print(json.dumps(counts))
    else:
        print(f"{counts['prompts']} prompts -> {counts['kept']} kept; dropped "
              f"{counts['dropped_seed']} as seed probes, {counts['dropped_duplicate_phrasing']} as "
              f"duplicate phrasings\nwrote {counts['output']}")
    return 0
