"""The typed seams pass the type checker: mypy, strict on the files pyproject.toml names (the
dialect and backend protocols and their implementations, the run model, the arms table, the
generated CLI flags, driver/seams.py), so an implementation that drifts from its protocol fails
here."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_seams_type_check_strictly(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-1000:]
    assert "Success: no issues found" in r.stdout
