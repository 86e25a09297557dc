"""The trainer double's warm row loader (tests/row_server.py) gives a launch the rows it would
load itself, and declines what it cannot load as the launch would."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from row_server import request, served_log

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def server():
    d = tempfile.mkdtemp(prefix="rows-")
    sock = os.path.join(d, "s")
    proc = subprocess.Popen([sys.executable, str(HERE / "row_server.py"), sock],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    yield sock
    proc.kill()
    proc.wait()


def load_in_a_launch(env_id: str, split: str) -> list[dict]:
    """The rows as a launch without the server loads them (trainer_double.load_rows' own path)."""
    code = (f"import json, verifiers as vf\n"
            f"env = vf.load_environment({env_id!r})\n"
            f"ds = env.get_dataset() if {split!r} == 'train' else env.get_eval_dataset()\n"
            f"print(json.dumps([dict(r) for r in ds], default=str))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def test_the_served_rows_are_the_rows_a_launch_loads_itself(server, tmp_path):
    out = tmp_path / "rows.json"
    assert request(server, "stock_arithmetic", {}, "eval", str(out))
    assert json.loads(out.read_text()) == load_in_a_launch("stock_arithmetic", "eval")


def test_an_env_that_cannot_load_is_declined_so_the_launch_fails_on_it_itself(server, tmp_path):
    out = tmp_path / "rows.json"
    assert not request(server, "surely_not_an_env", {}, "train", str(out))
    assert not out.exists()


def test_a_launch_under_other_import_time_settings_loads_its_rows_itself(server, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "another-cache"))
    assert not request(server, "stock_arithmetic", {}, "eval", str(tmp_path / "rows.json"))


def test_the_served_metrics_are_the_metrics_a_launch_reads_itself(server, tmp_path):
    from trainer_double import metrics_through_verifiers

    out = tmp_path / "metrics.json"
    assert request(server, "stock_arithmetic", {}, "metrics", str(out))
    assert json.loads(out.read_text()) == metrics_through_verifiers("stock_arithmetic", {})


def test_the_served_tasks_of_a_v1_taskset_are_the_tasks_a_launch_builds_itself(server, tmp_path):
    """The server holds verifiers v1 beside the classic API; a taskset's tasks come out as a
    launch that imports only v1 builds them (trainer_double_current.tasks_through_verifiers)."""
    out = tmp_path / "tasks.json"
    taskset = {"split": "train"}
    assert request(server, "stock_arithmetic", taskset, "taskset", str(out))
    code = ("import json, sys\nsys.path.insert(0, sys.argv[1])\n"
            "from trainer_double_current import tasks_through_verifiers\n"
            "print(json.dumps(tasks_through_verifiers('stock_arithmetic', {'split': 'train'}), default=str))\n")
    own = subprocess.run([sys.executable, "-c", code, str(HERE)], capture_output=True, text=True, check=True)
    served = json.loads(out.read_text())
    assert served and served == json.loads(own.stdout)


def test_a_launch_in_the_suites_shell_makes_every_load_through_the_sessions_server(tmp_path):
    """The server conftest starts answers a launch under driver_env's settings, so no launch of
    the suite pays the verifiers import: its train rows, eval rows and metrics all come served."""
    import conftest

    cfg = tmp_path / "rl.toml"
    cfg.write_text('max_steps = 1\n[trainer]\n[orchestrator]\nbatch_size = 16\nrollouts_per_example = 4\n'
                   '[[orchestrator.train.env]]\nid = "stock_arithmetic"\n'
                   '[[orchestrator.eval.env]]\nid = "stock_arithmetic"\nnum_examples = 8\n')
    env = conftest.driver_env(tmp_path, DOUBLE_ROW_CACHE=tmp_path / "no-cache-yet")
    (tmp_path / "no-cache-yet").mkdir()
    served = Path(served_log(env["DOUBLE_ROW_SERVER"]))
    launch = subprocess.run([sys.executable, str(HERE / "trainer_double.py"), "@", str(cfg),
                             "--output-dir", str(tmp_path / "out")], env=env, capture_output=True,
                            text=True, timeout=120)
    assert launch.returncode == 0, launch.stderr
    pid = json.loads((tmp_path / "launches.jsonl").read_text().splitlines()[0])["pid"]
    mine = [x for x in map(json.loads, served.read_text().splitlines()) if x["pid"] == pid]
    assert {(x["env_id"], x["what"]) for x in mine if x["answered"]} == {
        ("stock_arithmetic", "train"), ("stock_arithmetic", "eval"), ("stock_arithmetic", "metrics")}, \
        [x["why"] for x in mine]
