"""Small builders shared by tests."""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path


def python_c(code: str, *args, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -c CODE ARGS...` as a new interpreter runs it, in a process forked from the
    driver's warm worker for this test's settings (driver/envs/worker.py: verifiers and datasets
    imported, no env module and nothing of an earlier request; tests/test_worker.py holds its
    results to a new interpreter's), as the driver runs its own env-side checks. The code runs
    from a file, whose folder is sys.path[0] where `-c` has the working directory."""
    from driver.envs import worker

    with tempfile.TemporaryDirectory(prefix="python-c-") as tmp:
        script = Path(tmp) / "check.py"
        script.write_text(code)
        return worker.run_py(sys.executable, script, [str(a) for a in args], timeout=timeout)


def weakness_json() -> dict:
    """A valid weakness.json for the StockArithmetic family's buckets."""
    from generators.stock_arithmetic import BUCKETS, FEATURE_DEFINITIONS

    domains = list(dict.fromkeys(d for d, _ in BUCKETS))
    return {
        "prev_eval_acc": 0.2, "reward_by_length_quartile": [0.4, 0.3, 0.3, 0.2],
        "domains": [{"name": d, "severity": "high", "evidence": "failed train stories",
                     "sub_domains": [{"name": s} for d2, s in BUCKETS if d2 == d]} for d in domains],
        "allocations": {f"{d} / {s}": 100 for d, s in BUCKETS},
        "structural_features": [{"name": k, "definition": v} for k, v in FEATURE_DEFINITIONS.items()],
    }
