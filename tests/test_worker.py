"""The warm worker: each script runs in a fresh process forked from an interpreter that has only
the libraries loaded, with the same results, errors and time limits as a new interpreter."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from driver.envs.install import cleanup, count_rows, install_generated
from driver.envs.introspect import introspect
from driver.envs.packages import write_package
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
print("v1", "verifiers.v1" in sys.modules)
print("cwd", os.getcwd())
print("path0", sys.path[0])
print("to stderr", file=sys.stderr)
"""


@pytest.fixture
def warm():
    """The worker for this test process's settings: the one an earlier test left running (a
    request leaves nothing behind in it), else a new one."""
    w = worker.get(PY)
    assert w is not None
    return w


@pytest.fixture
def light(monkeypatch):
    """Workers started from here on preload `modules` (a list) instead of verifiers: for a test
    of how workers are chosen, started and replaced, where what they hold does not matter and a
    verifiers worker would cost seconds of CPU to start."""
    return lambda modules: monkeypatch.setattr(worker, "VERIFIERS", list(modules))


@pytest.fixture
def script(tmp_path):
    """A file holding `body`, for run_py to run by path."""
    made = []

    def write(body: str):
        path = tmp_path / "scripts" / f"s{len(made)}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(body)
        made.append(path)
        return path
    return write


def lines(text: str) -> dict:
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


def test_each_request_is_a_fresh_process_with_the_libraries_already_loaded(warm, tmp_path, script):
    state = script(STATE)
    a = worker.run_py(PY, state, ["x", 2], cwd=str(tmp_path))
    b = worker.run_py(PY, state, ["y"])
    assert a.returncode == b.returncode == 0
    la, lb = lines(a.stdout), lines(b.stdout)
    assert la["argv"] == "['x', '2']" and lb["argv"] == "['y']"
    assert la["pid"] != lb["pid"]                       # a process per request
    assert la["fresh"] == lb["fresh"] == "True True"    # nothing of an earlier request survives
    assert la["warm"] == "True"                         # verifiers was imported before the fork
    assert la["v1"] == "False"                          # ... its v1 stack only where asked for
    assert la["cwd"] == str(tmp_path)
    assert la["path0"] == str(state.parent)             # as `python PATH` sets sys.path[0]
    assert a.stderr.strip() == "to stderr" and "to stderr" not in a.stdout   # kept apart


def test_a_request_runs_with_the_drivers_environment_as_it_is_at_the_request(script, monkeypatch,
                                                                             own_workers, light):
    """The worker started under an earlier environment; a request sees the driver's as a new
    interpreter started now would: a variable set since is there, one removed since is not."""
    light([])
    monkeypatch.setenv("WORKER_TEST_REMOVED", "old")
    monkeypatch.setenv("WORKER_TEST_SET", "old")
    assert worker.get(PY) is not None   # started with both variables as they were
    monkeypatch.delenv("WORKER_TEST_REMOVED")
    monkeypatch.setenv("WORKER_TEST_SET", "now")
    show = script("import os\nprint('set', os.environ.get('WORKER_TEST_SET'))\n"
                  "print('removed', os.environ.get('WORKER_TEST_REMOVED'))\n"
                  "print('given', os.environ.get('WORKER_TEST_GIVEN'))\n")
    got = lines(worker.run_py(PY, show, [], env={"WORKER_TEST_GIVEN": "yes"}).stdout)
    assert got == {"set": "now", "removed": "None", "given": "yes"}


def test_a_request_whose_import_time_settings_differ_from_the_workers_gets_another_worker(
        script, monkeypatch, tmp_path, own_workers, light):
    """huggingface_hub reads HF_HOME once, when the worker imports it: a request under another
    HF_HOME is served by a worker started under it, so the library sees the request's cache."""
    light(["huggingface_hub.constants"])   # what datasets' import reads HF_HOME through
    show = script("import huggingface_hub.constants as c\nprint('home', c.HF_HOME)\n")
    seen = []
    for home in ("a", "b", "a"):
        monkeypatch.setenv("HF_HOME", str(tmp_path / home))
        seen.append(lines(worker.run_py(PY, show, []).stdout)["home"])
    assert len(worker._WORKERS) == 2   # "a"'s worker served its second request too
    assert seen == [str(tmp_path / h) for h in ("a", "b", "a")]


SHOW_PATH = """
import json, sys
import {module}
print(json.dumps({{"path": sys.path[1:], "file": {module}.__file__}}))
"""


@pytest.mark.parametrize("case", ["a module of its own", "a module the worker loaded", "where the worker found it"])
def test_a_request_under_another_pythonpath_sees_the_modules_a_new_interpreter_would(
        warm, script, tmp_path, monkeypatch, light, case):
    """PYTHONPATH is set per request: a folder added there puts its modules before the worker's,
    as a new interpreter's sys.path does, and the warm worker serves it. A folder holding a
    module the worker imported from elsewhere (`datasets`) would leave the request the worker's
    copy, so that request gets another worker, and the folder's copy; the folder the worker
    found `datasets` in changes nothing, and the worker serves it."""
    import datasets

    module = "own_module_of_this_test" if case == "a module of its own" else "datasets"
    folder = tmp_path / "on-pythonpath"
    folder.mkdir()
    if case == "where the worker found it":
        folder = Path(datasets.__file__).parents[1]
    else:
        (folder / f"{module}.py").write_text("")
    show = script(SHOW_PATH.format(module=module))
    light(["datasets"])   # a worker started for the request: datasets is what it must not share
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), "relative", os.environ.get("PYTHONPATH", "")]))
    got = worker.run_py(PY, show, [], cwd=str(tmp_path))
    new = subprocess.run([PY, str(show)], capture_output=True, text=True, cwd=tmp_path, check=False)
    assert got.returncode == new.returncode == 0, got.stderr + new.stderr
    assert json.loads(got.stdout) == json.loads(new.stdout)
    assert json.loads(got.stdout)["file"] == (datasets.__file__ if case == "where the worker found it"
                                              else str(folder / f"{module}.py"))
    shared = worker.get(PY, cwd=str(tmp_path)) is warm
    assert shared == (case != "a module the worker loaded")


def test_torchs_settings_part_only_workers_that_loaded_torch(warm, script, monkeypatch):
    """CUDA_VISIBLE_DEVICES and torch's own variables are read when torch is imported, and
    neither the classic nor the v1 worker imports it: a request under other torch settings is
    served by the same worker, and a torch it imports reads the request's settings."""
    warm._await_ready()
    assert "torch" not in warm.loaded and "verifiers" in warm.loaded
    settings = {}
    for devices in ("0", "0,1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", devices)
        settings[devices] = (worker._key(PY, False, False), worker._key(PY, True, False))
        assert worker.get(PY) is warm
        got = worker.run_py(PY, script("import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"), [])
        assert got.stdout.strip() == devices
    assert settings["0"][0] == settings["0,1"][0] and settings["0"][1] != settings["0,1"][1]


def test_a_request_that_says_it_needs_verifiers_v1_gets_the_v1_worker(warm, script):
    state = script(STATE)
    r = worker.run_py(PY, state, [], v1=True)
    assert lines(r.stdout)["v1"] == "True" and lines(r.stdout)["warm"] == "False"
    assert worker.get(PY, v1=True) is not warm and worker.get(PY) is warm


def test_exit_codes_and_exceptions_come_back_as_a_new_interpreter_gives_them(warm, script):
    for body in ("import sys; sys.exit(3)", "raise ValueError('boom')", "pass", "import sys; sys.exit('bye')"):
        path = script(body)
        got = worker.run_py(PY, path, [])
        real = subprocess.run([PY, str(path)], capture_output=True, text=True, check=False)
        assert got.returncode == real.returncode, body
    assert "ValueError: boom" in worker.run_py(PY, script("raise ValueError('boom')"), []).stderr


def test_a_request_past_its_time_limit_is_killed_and_the_worker_goes_on(warm, script):
    assert worker.run_py(PY, script("pass"), []).returncode == 0   # its imports done: the clock is the request's
    t0 = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        worker.run_py(PY, script("import time; time.sleep(30)"), [], timeout=1)
    assert time.monotonic() - t0 < 10   # generous: killed at 1 s, where the script sleeps 30 s
    assert worker.run_py(PY, script("print('after')"), []).stdout.strip() == "after"
    assert worker.get(PY) is warm


def test_without_a_worker_the_same_script_runs_in_a_new_interpreter(monkeypatch, script):
    monkeypatch.setenv("DRIVER_NO_WORKER", "1")
    assert worker.get(PY) is None
    state = script(STATE)
    r = worker.run_py(PY, state, ["z"])
    assert r.returncode == 0 and lines(r.stdout)["argv"] == "['z']"
    assert lines(r.stdout)["path0"] == str(state.parent)


def test_a_dead_worker_is_replaced_and_its_request_still_runs(script, own_workers, light):
    light([])
    doomed = worker.get(PY)
    assert doomed is not None and worker.run_py(PY, script("pass"), []).returncode == 0
    doomed.proc.kill()
    doomed.proc.wait()
    r = worker.run_py(PY, script("print(40 + 2)"), [])
    assert r.stdout.strip() == "42"
    assert worker.get(PY) not in (doomed, None)


@pytest.mark.parametrize("forked", [True, False])
def test_run_module_runs_a_module_as_python_dash_m_does(tmp_path, monkeypatch, forked):
    """The embedded trainer's probe runs as `python -m MODULE` would: the working directory on
    sys.path (a module there is found), argv[0] the module's file, argv[1:] its arguments."""
    if not forked:
        monkeypatch.setenv("DRIVER_NO_WORKER", "1")
    (tmp_path / "probe_like_module.py").write_text(
        "import os, sys\nprint(os.path.basename(sys.argv[0]), sys.argv[1:], __name__)\n")
    r = worker.run_py(PY, worker.RUN_MODULE, ["probe_like_module", "--k", 4], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[0] == "probe_like_module.py ['--k', '4'] __main__"


def test_an_env_installed_after_the_worker_started_is_found_by_the_next_request(warm, tmp_path):
    """The row count after an install runs in a process forked from a worker that started
    before the package existed: it must see the new package, and a reinstall's new rows."""
    import json

    from stock_arithmetic.data import build_splits

    hub = introspect(PY, "stock_arithmetic")
    name = "stock_arithmetic_worker_probe_pkg"
    rows = build_splits(0)["train"]

    def install(n):
        data = tmp_path / f"d{n}.jsonl"
        data.write_text("".join(json.dumps({"question": r["question"], "answer": r["answer"],
                                            "info": r["info"]}) + "\n" for r in rows[:n]))
        return install_generated(PY, write_package(tmp_path / f"p{n}", name, hub, data), n)

    try:
        assert count_rows(PY, name) is None
        assert install(20)["rows"] == 20
        assert install(33)["rows"] == 33      # the same package with new rows: the new count
    finally:
        cleanup(PY, name)
    assert count_rows(PY, name) is None
