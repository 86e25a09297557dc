"""The warm worker: each script runs in a fresh process forked from an interpreter that has only
the libraries loaded, with the same results, errors and time limits as a new interpreter."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from driver.envs import hub as envs
from driver.envs import worker

PY = sys.executable

STATE = r"""
import sys, os
print("argv", sys.argv[1:])
print("pid", os.getpid())
print("fresh", "stock_arithmetic" not in sys.modules, "marker" not in globals())
marker = 1
sys.modules["leftover_from_an_earlier_request"] = sys
print("leftover", "leftover_from_an_earlier_request" in sys.modules)
print("warm", "verifiers.legacy.types" in sys.modules)
print("cwd", os.getcwd())
print("to stderr", file=sys.stderr)
"""


@pytest.fixture
def warm():
    w = worker.get(PY)
    assert w is not None
    yield w
    worker.close_all()


def lines(text: str) -> dict:
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


def test_each_request_is_a_fresh_process_with_the_libraries_already_loaded(warm, tmp_path):
    a = worker.run_py(PY, STATE, ["x", 2], cwd=str(tmp_path))
    b = worker.run_py(PY, STATE, ["y"])
    assert a.returncode == b.returncode == 0
    la, lb = lines(a.stdout), lines(b.stdout)
    assert la["argv"] == "['x', '2']" and lb["argv"] == "['y']"
    assert la["pid"] != lb["pid"]                       # a process per request
    assert la["fresh"] == lb["fresh"] == "True True"    # nothing of an earlier request survives
    assert la["warm"] == "True"                         # verifiers was imported before the fork
    assert la["cwd"] == str(tmp_path)
    assert a.stderr.strip() == "to stderr" and "to stderr" not in a.stdout   # kept apart


def test_exit_codes_and_exceptions_come_back_as_a_new_interpreter_gives_them(warm):
    for script in ("import sys; sys.exit(3)", "raise ValueError('boom')", "pass"):
        got = worker.run_py(PY, script, [])
        real = subprocess.run([PY, "-c", script], capture_output=True, text=True)
        assert got.returncode == real.returncode, script
    assert "ValueError: boom" in worker.run_py(PY, "raise ValueError('boom')", []).stderr


def test_a_request_past_its_time_limit_is_killed_and_the_worker_goes_on(warm, tmp_path):
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        worker.run_py(PY, "import time; time.sleep(30)", [], timeout=1)
    assert time.monotonic() - t0 < 10   # generous: killed at 1 s, where the script sleeps 30 s
    assert worker.run_py(PY, "print('after')", []).stdout.strip() == "after"
    assert worker.get(PY) is warm


def test_without_a_worker_the_same_script_runs_in_a_new_interpreter(monkeypatch):
    monkeypatch.setenv("DRIVER_NO_WORKER", "1")
    assert worker.get(PY) is None
    r = worker.run_py(PY, STATE, ["z"])
    assert r.returncode == 0 and lines(r.stdout)["argv"] == "['z']"


def test_a_dead_worker_is_replaced_and_its_request_still_runs(warm):
    warm.proc.kill()
    warm.proc.wait()
    r = worker.run_py(PY, "print(40 + 2)", [])
    assert r.stdout.strip() == "42"
    assert worker.get(PY) is not warm


def test_an_env_installed_after_the_worker_started_is_found_by_the_next_request(warm, tmp_path):
    """The row count after an install runs in a process forked from a worker that started
    before the package existed: it must see the new package, and a reinstall's new rows."""
    import json

    from stock_arithmetic.data import build_splits

    hub = envs.introspect(PY, "stock_arithmetic")
    name = "stock_arithmetic_worker_probe_pkg"
    rows = build_splits(0)["train"]

    def install(n):
        data = tmp_path / f"d{n}.jsonl"
        data.write_text("".join(json.dumps({"question": r["question"], "answer": r["answer"],
                                            "info": r["info"]}) + "\n" for r in rows[:n]))
        return envs.install_generated(PY, envs.write_package(tmp_path / f"p{n}", name, hub, data), n)

    try:
        assert envs.count_rows(PY, name) is None
        assert install(20)["rows"] == 20
        assert install(33)["rows"] == 33      # the same package with new rows: the new count
    finally:
        envs.cleanup(PY, name)
    assert envs.count_rows(PY, name) is None
