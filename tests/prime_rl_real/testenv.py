"""The prime-rl test environments' builder (tools/prime_rl_testenv.py), for the tests: the one
place it is imported from (it is a script of tools/, not a package module)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def module():
    """tools/prime_rl_testenv.py as a module (loaded once per process)."""
    if "prime_rl_testenv" not in sys.modules:
        spec = importlib.util.spec_from_file_location("prime_rl_testenv", ROOT / "tools" / "prime_rl_testenv.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["prime_rl_testenv"] = mod     # its dataclasses look their module up
        spec.loader.exec_module(mod)
    return sys.modules["prime_rl_testenv"]


def build(generation: str, say=print) -> Path:
    """The generation's built environment dir (built first where missing: minutes)."""
    mod = module()
    return Path(mod.build(mod.GENERATIONS[generation], say=say))
