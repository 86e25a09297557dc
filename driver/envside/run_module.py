"""Run a module as `python -m MODULE ARGS...` would: `python run_module.py MODULE ARGS...`.

The warm worker (driver/envs/worker.py) runs files by path; this one lets it run a module (the
embedded trainer's gradient probe) the same way.
"""
from __future__ import annotations

import os
import runpy
import sys


def main() -> None:
    # as -m: the working directory on sys.path, not this file's folder
    if sys.path and os.path.realpath(sys.path[0] or os.curdir) == os.path.dirname(os.path.realpath(__file__)):
        sys.path[0] = ""
    module = sys.argv.pop(1)
    sys.argv[0] = module
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
