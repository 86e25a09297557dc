"""`driver`: the command line. Thin: build the parser from the commands (driver/commands/, one
module per command, each with NAME, add(subparsers) and main(args)), parse, dispatch.

Heavy modules are imported only inside a command's main, so `driver --help` is instant.
"""
from __future__ import annotations

import argparse
import sys

from driver.commands import (compact_warning, diagnose, export_model, export_prompts, introspect,
                             report, resume, run, skill, status, validate)
from driver.commands.flags import EXIT_CODES

COMMANDS = (run, resume, status, compact_warning, introspect, validate, skill, diagnose, report,
            export_prompts, export_model)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="driver", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Teacher/student self-improvement loop for RL post-training "
                    "(prime-rl + verifiers).", epilog=EXIT_CODES)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from driver.errors import DriverError

    try:
        return next(c for c in COMMANDS if c.NAME == args.command).main(args)
    except DriverError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        # outside the phase loop (which records these itself): e.g. a full disk at creation
        from driver.errors import os_error_advice

        print(f"error: {e}. {os_error_advice(e)} `driver resume` the run directory printed "
              "above.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: the run directory is consistent; `driver resume` continues it",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
