"""`driver skill install`: copy SKILL.md where a coding agent looks for skills."""
from __future__ import annotations

import argparse
import json

from driver.commands.flags import EXIT_CODES

NAME = "skill"


def add(sub) -> None:
    sk = sub.add_parser("skill", help="the agent skill (SKILL.md)", epilog=EXIT_CODES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sk_sub = sk.add_subparsers(dest="skill_command", required=True, metavar="ACTION")
    si = sk_sub.add_parser("install", help="copy SKILL.md where a coding agent looks for skills",
                           epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    si.add_argument("--dir", default=".claude/skills/synthetic-self-improve-rl",
                    help="destination directory (default: %(default)s, under the current directory)")
    si.add_argument("--force", action="store_true",
                    help="replace a different SKILL.md already there (the old one is kept as SKILL.md.bak)")
    si.add_argument("--json", action="store_true")


def main(a) -> int:
    import shutil
    from pathlib import Path

    from driver import resources
    from driver.errors import UsageError

    src = resources.skill_md()
    dest = Path(a.dir) / "SKILL.md"
    text = src.read_text(encoding="utf-8")
    if dest.exists() and dest.read_text(encoding="utf-8") != text:
        if not a.force:
            raise UsageError(f"{dest} exists and differs from this driver's SKILL.md; pass --force "
                         "to replace it (the old file is kept as SKILL.md.bak)")
        shutil.copyfile(dest, dest.with_name("SKILL.md.bak"))
        action = "replaced"
    else:
        action = "unchanged" if dest.exists() else "installed"
    dest.parent.mkdir(parents=True, exist_ok=True)
    if action != "unchanged":
        tmp = dest.with_name("SKILL.md.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(dest)
    if a.json:
        print(json.dumps({"path": str(dest.resolve()), "action": action}))
    else:
        print(f"{action}: {dest.resolve()}")
    return 0
