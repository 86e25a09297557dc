"""Running a teacher's generator: crashes name the template, hangs are stopped, and writes
outside its directory, network access and child programs are blocked with a clear error."""
from __future__ import annotations

import json

import pytest

from driver.teachers import generator_run


def run(tmp_path, body: str, timeout: float = 60, **env):
    d = tmp_path / "run" / "iter_1"
    d.mkdir(parents=True)
    (d / "gen_dataset.py").write_text(body)
    return d, generator_run.run(d, timeout=timeout)


def test_a_well_behaved_generator_writes_its_dataset_and_both_hashes_are_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    d, res = run(tmp_path, "import json, os\n"
                           "open('scratch.txt', 'w').write('ok'); open(os.devnull, 'w').write('x')\n"
                           "os.makedirs('sub', exist_ok=True); open('sub/x', 'w').write('1')\n"
                           "with open('dataset.jsonl', 'w') as f:\n"
                           "    f.write(json.dumps({'key_seen': 'OPENAI_API_KEY' in os.environ}) + '\\n')\n")
    assert res["ok"], res
    assert len(res["script_sha256"]) == 64 and len(res["dataset_sha256"]) == 64
    assert json.loads((d / "dataset.jsonl").read_text()) == {"key_seen": False}


def test_a_crash_names_the_template(tmp_path):
    _, res = run(tmp_path, "def tpl_borrow_chain(params):\n    return params['missing']\n"
                           "rows = [tpl_borrow_chain({}) for _ in range(3)]\n")
    assert not res["ok"] and "crashed in tpl_borrow_chain" in res["reason"] and "KeyError" in res["reason"]


def test_a_hang_is_stopped(tmp_path):
    _, res = run(tmp_path, "while True:\n    pass\n", timeout=2)
    assert not res["ok"] and "timed out after 2s" in res["reason"]


@pytest.mark.parametrize("body, needle", [
    ("open('../iter_2_dataset.jsonl', 'w').write('x')", "outside its directory"),
    ("import os; os.rename('gen_dataset.py', '../moved.py')", "outside its directory"),
    ("import shutil; shutil.copyfile('gen_dataset.py', '/tmp/escaped_gen.py')", "outside its directory"),
    ("import os; os.chdir('..'); open('x', 'w')", "outside its directory"),
    ("import socket; socket.create_connection(('127.0.0.1', 9), timeout=1)", "network access"),
    ("import subprocess; subprocess.run(['touch', '../x'])", "starting a program"),
    ("import os; os.system('touch ../x')", "starting a program"),
])
def test_escapes_are_blocked_with_a_clear_error(tmp_path, body, needle):
    d, res = run(tmp_path, body + "\n")
    assert not res["ok"] and "generator blocked" in res["reason"] and needle in res["reason"]
    outside = [p for p in (tmp_path / "run").iterdir() if p.name != "iter_1"]
    assert outside == [] and not (d / "dataset.jsonl").exists()


def test_no_dataset_is_an_error(tmp_path):
    _, res = run(tmp_path, "print('forgot to write')\n")
    assert not res["ok"] and "without writing dataset.jsonl" in res["reason"]


def test_the_memory_limit_stops_a_runaway_generator(tmp_path):
    _, res = run(tmp_path, "blob = bytearray(6 * 1024 ** 3)\n")
    assert not res["ok"] and "MemoryError" in res["reason"]


def test_a_generator_left_running_by_a_killed_driver_is_stopped_before_the_rerun(tmp_path):
    import subprocess
    import sys
    import time

    import psutil

    d = tmp_path / "run" / "iter_1"
    d.mkdir(parents=True)
    (d / "gen_dataset.py").write_text("open('dataset.jsonl', 'w').write('{}\\n')\n")
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             start_new_session=True)
    (d / "gen_dataset.pid").write_text(json.dumps(
        {"pid": stray.pid, "create_time": psutil.Process(stray.pid).create_time()}))
    t0 = time.time()
    res = generator_run.run(d, timeout=60)
    assert res["ok"], res
    stray.wait(timeout=10)                  # it would otherwise sleep for 600 s
    # a generous bound, documented as such: the stray would sleep 600 s; stopping it takes well
    # under a second, and 30 s leaves room for a loaded 2-core machine
    assert not psutil.pid_exists(stray.pid) and time.time() - t0 < 30
    assert not (d / "gen_dataset.pid").exists()


def test_the_generator_imports_from_its_own_directory_as_python_would_not_from_the_guards(tmp_path):
    """The guard runs by path (driver/teachers/generator_guard.py) yet the script sees the
    sys.path `python gen_dataset.py` gives it: its own folder first (a helper beside it is
    found), and none of the driver's teacher modules."""
    d = tmp_path / "run" / "iter_1"
    d.mkdir(parents=True)
    (d / "helper_rows.py").write_text("ROWS = [{'q': 1}]\n")
    (d / "gen_dataset.py").write_text(
        "import importlib.util, json, os, sys\n"
        "from helper_rows import ROWS\n"
        "assert sys.path[0] == os.path.realpath(os.getcwd()), sys.path[0]\n"
        "assert importlib.util.find_spec('generator_run') is None\n"
        "assert importlib.util.find_spec('generator_guard') is None\n"
        "open('dataset.jsonl', 'w').write(json.dumps(ROWS[0]) + '\\n')\n")
    res = generator_run.run(d, timeout=60)
    assert res["ok"], res
    assert json.loads((d / "dataset.jsonl").read_text()) == {"q": 1}
