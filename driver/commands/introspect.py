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
                   help="JSON object of load_environment arguments, or of the taskset's config "
                        "fields with --taskset (default: {})")
    i.add_argument("--taskset", action="store_true",
                   help="load ENV as a verifiers v1 taskset (what current prime-rl, >= v0.8.1, "
                        "trains on) instead of a classic environment")
    i.add_argument("--json", action="store_true", help="print hub_env.json's content")


def main(a) -> int:
    from driver.envs.describe import interaction_line
    from driver.envs.envside import CLASSIC, TASKSET
    from driver.envs.introspect import introspect

    info = introspect(a.python or sys.executable, a.env, a.env_args, kind=TASKSET if a.taskset else CLASSIC)
    if a.json:
        print(json.dumps(info, indent=2))
        return 0
    keys = info.get("info_keys_read")
    if a.taskset:
        where = (f"  splits ({info['split_field']}): train {info['train_args']} · eval {info['eval_args']}"
                 + (f" · selection {info['selection']['args']}" if info.get("selection") else ""))
        stack = f"{info['env_class']} · task {info['rubric_class']}"
    else:
        where, stack = None, f"{info['env_class']} · parser {info['parser_class']} · rubric {info['rubric_class']}"
    print("\n".join(line for line in [
        f"{a.env}: {stack}",
        "  rewards: " + ", ".join(f"{f['name']}×{f['weight']}" for f in info["rubric_funcs"]),
        f"  train {info['train_size']} rows · eval {info['eval_size']} rows", where,
        f"  answer format: {info['answer_format_instruction']}",
        "  info keys the rubric reads: " + (", ".join(keys) or "none found" if keys is not None
                                           else "not looked for (a taskset's rewards are methods of its Task)"),
        f"  {interaction_line(info)}"] if line))
    return 0
