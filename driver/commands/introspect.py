"""`driver introspect ENV`: describe a hub env's stack (writes nothing)."""
from __future__ import annotations

import argparse
import json
import sys

from driver.commands.flags import EXIT_CODES, json_object

NAME = "introspect"


def add(sub) -> None:
    i = sub.add_parser("introspect", help="describe a hub env's stack (writes nothing)",
                       epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("env")
    i.add_argument("--python", help="interpreter that loads the env (default: this one)")
    i.add_argument("--env-args", type=json_object, default={},
                   help="JSON object of load_environment arguments (default: {})")
    i.add_argument("--json", action="store_true", help="print hub_env.json's content")


def main(a) -> int:
    from driver.envs.describe import interaction_line
    from driver.envs.introspect import introspect

    info = introspect(a.python or sys.executable, a.env, a.env_args)
    if a.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"{a.env}: {info['env_class']} · parser {info['parser_class']} · rubric "
              f"{info['rubric_class']}\n  rewards: " +
              ", ".join(f"{f['name']}×{f['weight']}" for f in info["rubric_funcs"]) +
              f"\n  train {info['train_size']} rows · eval {info['eval_size']} rows\n"
              f"  answer format: {info['answer_format_instruction']}\n"
              f"  info keys the rubric reads: {', '.join(info.get('info_keys_read') or []) or 'none found'}\n"
              f"  {interaction_line(info)}")
    return 0
