"""The env-side jobs (driver/envside) and their typed client (driver/envs/envside.py): every
module imports in the training interpreter without the driver, each action round-trips a typed
request and response on the built-in StockArithmetic-v1 (classic env and v1 taskset), and an
exception inside a job comes back with its type, message and traceback."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from driver.envs import envside, worker

PY = sys.executable
ROOT = Path(__file__).resolve().parents[1]
ENVSIDE = ROOT / "driver" / "envside"
MODULES = sorted(p.stem for p in ENVSIDE.glob("*.py") if p.stem != "__init__")
HUB_ID = {envside.CLASSIC: "stock_arithmetic", envside.TASKSET: "stock-arithmetic"}
KINDS = [envside.CLASSIC, envside.TASKSET]

# Imports every env-side module by plain name, as call.py does, and says what came with them.
IMPORT_ALL = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
loaded = {}
for name in sys.argv[2:]:
    __import__(name)
    loaded[name] = True
print(json.dumps({"loaded": sorted(loaded),
                  "driver": sorted(m for m in sys.modules if m == "driver" or m.startswith("driver."))}))
"""


def _import_all(python: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-c", IMPORT_ALL, str(ENVSIDE), *MODULES], capture_output=True,
                          text=True, env=env, cwd="/", timeout=300, check=False)


# --------------------------------------------------------------------------------------------
# the modules

def test_every_envside_module_imports_in_this_interpreter_without_the_driver():
    assert {"call", "classic", "fingerprint", "rows", "run_module", "taskset", "worker_server"} <= set(MODULES)
    r = _import_all(PY)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout)
    assert got == {"loaded": MODULES, "driver": []}


@pytest.fixture(scope="module")
def packages_distributions() -> dict:
    """importlib.metadata's full scan (about a second here), once for the module."""
    from importlib import metadata

    return metadata.packages_distributions()


@pytest.mark.parametrize("module", ["stock_arithmetic.classic", "verifiers.envs", "yaml", "google.protobuf",
                                    "_distutils_hack", "no_module_of_this_name"])
def test_the_distribution_named_for_a_module_is_the_one_importlib_metadata_names(module, packages_distributions):
    """rows.distribution_of reads only the file lists that mention the module's package: it names
    what packages_distributions' full scan names (an editable install, which maps no file to its
    package, by its own name; a module whose distribution is named otherwise; a namespace
    package; a top-level module of another distribution; none)."""
    from importlib import metadata

    sys.path.insert(0, str(ENVSIDE))
    try:
        import rows
    finally:
        sys.path.remove(str(ENVSIDE))
    top = module.split(".")[0]
    expected = None
    for name in (packages_distributions.get(top) or []) + [top]:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        expected = {"name": dist.metadata["Name"], "version": dist.version}
        break
    assert rows.distribution_of(module) == expected
    assert (expected is None) == (module == "no_module_of_this_name")


def test_envside_modules_import_each_other_by_plain_name_never_the_driver():
    for path in ENVSIDE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n == "driver" or n.startswith(("driver.", "generators")) for n in names), \
                f"{path.name} imports {names}"


def test_the_driver_and_the_eval_side_hash_with_one_copy_of_the_code():
    from driver.envside import fingerprint
    from driver.gates import decontam

    assert decontam.grams is fingerprint.grams and decontam.row_text is fingerprint.row_text


def test_no_stdout_markers_and_no_import_circle_between_envs_and_gates():
    for path in (ROOT / "driver").rglob("*.py"):
        assert "@@" not in path.read_text(), path
    for path in (ROOT / "driver" / "envs").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("driver.gates"), f"{path.name} imports {node.module}"


# --------------------------------------------------------------------------------------------
# each action, typed, on StockArithmetic-v1

@pytest.fixture(scope="module", params=KINDS)
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def introspected(kind) -> envside.Introspected:
    return envside.call(PY, envside.JOBS[kind].introspect, envside.IntrospectRequest(
        env_id=HUB_ID[kind], module=None if kind == envside.TASKSET else "stock_arithmetic"))


def _train_fields(kind, hub: envside.HubInfo) -> dict:
    return (hub.train_args or {}) if kind == envside.TASKSET else {}


def test_introspect(kind, introspected):
    hub, fp = introspected.hub, introspected.fingerprints
    assert isinstance(introspected, envside.Introspected) and isinstance(hub, envside.HubInfo)
    assert (hub.train_size, hub.eval_size) == (1000, 200)
    assert hub.rubric_funcs[0] == envside.RubricFunc(name="correct_final_stock", weight=1.0,
                                                     rubric_class=hub.rubric_class)
    field = "split" if kind == envside.TASKSET else "eval_split"
    assert hub.selection == {"args": {field: "selection"}, "split": "selection", "size": 200}
    if kind == envside.TASKSET:
        assert hub.as_dict()["kind"] == "taskset" and hub.eval_args == {"split": "test"}
    else:
        assert "kind" not in hub.as_dict() and hub.parser_class == "StockAnswerParser"
        assert hub.info_keys_read == ["population", "problem"]
    assert isinstance(fp, envside.Fingerprints) and fp.n == 8 and fp.eval_rows == 200


def test_eval_fingerprints_are_introspections(kind, introspected):
    hub = introspected.hub
    fields = (hub.eval_args or {}) if kind == envside.TASKSET else {}
    got = envside.call(PY, envside.JOBS[kind].eval_fingerprints,
                       envside.EnvRequest(env_id=HUB_ID[kind], env_args=fields))
    assert got == introspected.fingerprints


def test_count(kind):
    got = envside.call(PY, envside.JOBS[kind].count, envside.CountRequest(env_id=HUB_ID[kind]))
    assert got == envside.RowCount(rows=1000)


def test_sample_train_is_seeded_and_reads_train_rows_only(kind, introspected, tmp_path):
    from stock_arithmetic.data import build_splits

    def sample(name, seed):
        dest = tmp_path / name
        got = envside.call(PY, envside.JOBS[kind].sample_train, envside.SampleRequest(
            env_id=HUB_ID[kind], env_args=_train_fields(kind, introspected.hub), n=25, seed=seed,
            dest=str(dest)))
        assert got == envside.RowCount(rows=25)
        return [json.loads(x) for x in dest.read_text().splitlines()]

    a, b, c = sample("a.jsonl", "run_c|7"), sample("b.jsonl", "run_c|7"), sample("c.jsonl", "run_c|8")
    assert a == b != c and len({r["question"] for r in a}) == 25
    train = {r["question"] for r in build_splits(0)["train"]}
    assert all(r["question"] in train and set(r) == {"question", "answer", "info"} for r in a)


def test_score_rows(kind, introspected, tmp_path):
    from stock_arithmetic.data import build_splits

    rows = build_splits(0)["train"][:3]
    replies = [json.dumps({"final_stock": int(rows[0]["answer"])}), '{"final_stock": -1}', "no json here"]
    lines = [json.dumps({"question": r["question"], "answer": r["answer"],
                         "info": {**r["info"], "domain": "d", "sub_domain": str(i), "reasoning": reply}})
             for i, (r, reply) in enumerate(zip(rows, replies))]
    data = tmp_path / "dataset.jsonl"
    data.write_text("\n".join([lines[0], "not json", lines[1], json.dumps({"info": {}}), lines[2]]) + "\n")
    got = envside.call(PY, envside.JOBS[kind].score_rows, envside.ScoreRequest(
        env_id=HUB_ID[kind], env_args=_train_fields(kind, introspected.hub), dataset=str(data),
        system_prompt=introspected.hub.system_prompt))
    assert isinstance(got, envside.Scored) and got.ceiling == 1.0
    assert [(r.line, r.template, r.reward) for r in got.rows] == \
        [(1, ["d", "0"], 1.0), (3, ["d", "1"], 0.0), (5, ["d", "2"], 0.0)]


def test_a_request_of_the_wrong_type_is_refused_before_anything_runs():
    with pytest.raises(TypeError, match="takes a CountRequest"):
        envside.call(PY, envside.JOBS[envside.CLASSIC].count, envside.EnvRequest(env_id="x"))


# --------------------------------------------------------------------------------------------
# errors

@pytest.mark.parametrize("forked", [True, False])
def test_an_exception_inside_a_job_comes_back_with_its_type_and_message(tmp_path, monkeypatch, forked):
    if not forked:
        monkeypatch.setenv("DRIVER_NO_WORKER", "1")
    missing = tmp_path / "no_such_dataset.jsonl"
    with pytest.raises(envside.EnvsideError) as e:
        envside.call(PY, envside.JOBS[envside.CLASSIC].score_rows, envside.ScoreRequest(
            env_id="stock_arithmetic", dataset=str(missing)))
    err = e.value.error
    assert err.type == "FileNotFoundError" and str(missing) in err.message
    assert "read_reasoned_rows" in err.traceback and e.value.action == "classic.score_rows"
    assert str(e.value).startswith("FileNotFoundError: ")

def test_the_gate_reports_a_failed_job_by_its_real_cause(tmp_path):
    from driver.gates import accuracy

    with pytest.raises(RuntimeError, match="could not score(.|\n)*FileNotFoundError"):
        accuracy.score_rows(PY, "stock_arithmetic", None, tmp_path / "missing.jsonl")


def test_call_py_run_by_path_answers_an_unknown_action_with_an_error_response(tmp_path):
    req, resp = tmp_path / "req.json", tmp_path / "resp.json"
    req.write_text("{}")
    r = subprocess.run([PY, str(envside.CALL), "classic.no_such_job", str(req), str(resp)],
                       capture_output=True, text=True, cwd="/", check=False)
    got = json.loads(resp.read_text())
    assert r.returncode == 1 and got["ok"] is False
    assert got["error"]["type"] == "ValueError" and "classic.no_such_job" in got["error"]["message"]
    assert not list(tmp_path.glob("resp.json.tmp*"))   # written atomically


def test_a_job_that_dies_without_a_response_says_how_it_ended(tmp_path, monkeypatch):
    """A job killed from inside (no exception to report) leaves no response: the error says so,
    with its exit status and what it printed."""
    monkeypatch.setenv("DRIVER_NO_WORKER", "1")
    data = tmp_path / "d.jsonl"
    data.write_text("{}\n")
    monkeypatch.setattr(envside, "CALL", tmp_path / "dies.py")
    (tmp_path / "dies.py").write_text("import os, sys\nprint('going', file=sys.stderr)\nos._exit(9)\n")
    with pytest.raises(envside.EnvsideError) as e:
        envside.call(PY, envside.JOBS[envside.CLASSIC].count, envside.CountRequest(env_id="x"))
    assert e.value.error.type == "NoResponse" and "exit 9" in e.value.error.message
    assert "going" in e.value.tail()


# --------------------------------------------------------------------------------------------
# the interpreter's own facts (interpreter.py): before an env is installed, maybe no verifiers

def test_the_interpreter_jobs_answer_where_verifiers_cannot_be_imported(tmp_path, monkeypatch, own_workers):
    """Which modules the training interpreter finds, its install paths and where it finds a
    module are asked before any env is installed there, perhaps where verifiers is not: with a
    verifiers that raises on import first on its path, they still answer, each in a fresh
    process (no warm worker is started for them), as `python -c` would."""
    import sysconfig

    from driver.envs.install import missing_envs, stale_copies

    (tmp_path / "verifiers").mkdir()
    (tmp_path / "verifiers" / "__init__.py").write_text("raise ImportError('no verifiers here')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    # an env module, one that is nowhere, and call.py's siblings, which `python -c` does not see
    assert missing_envs(PY, ["stock-arithmetic", "no_such_env_q9", "rows", "interpreter"]) == \
        ["no_such_env_q9", "rows", "interpreter"]
    paths = envside.call(PY, envside.INSTALL_PATHS, envside.NoArguments()).paths
    assert paths["purelib"] == sysconfig.get_paths()["purelib"]
    found = envside.call(PY, envside.MODULE_LOCATIONS, envside.ModuleRequest(module="stock_arithmetic"))
    import stock_arithmetic

    assert found.locations == list(stock_arithmetic.__path__)
    assert envside.call(PY, envside.MODULE_LOCATIONS, envside.ModuleRequest(module="no_such_env_q9")).locations == []
    assert stale_copies(PY, "no_such_env_q9") == []
    assert worker._WORKERS == {}


def test_an_interpreter_that_does_not_answer_finds_no_module_and_has_no_install_paths(tmp_path):
    """A training interpreter that exits at once (a broken venv): every module is missing,
    and its install paths are refused with a DriverError, as before these were env-side jobs."""
    from driver.envs.install import install_scheme, is_importable
    from driver.errors import DriverError

    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'broken interpreter' >&2\nexit 3\n")
    broken.chmod(0o755)
    assert not is_importable(str(broken), "json")
    with pytest.raises(DriverError, match="cannot read the install paths of .*broken interpreter"):
        install_scheme(str(broken))


# --------------------------------------------------------------------------------------------
# verifiers 0.4.0 (the current generation: no classic API)

@pytest.mark.extended
def test_every_envside_module_imports_next_to_verifiers_040_and_the_taskset_jobs_run_there(monkeypatch):
    from test_tasksets import _verifiers_040_venv

    py = str(_verifiers_040_venv())
    for k in ("PYTHONPATH", "VIRTUAL_ENV"):
        monkeypatch.delenv(k, raising=False)
    r = _import_all(py, env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout) == {"loaded": MODULES, "driver": []}
    jobs = envside.JOBS[envside.TASKSET]
    try:
        there = envside.call(py, jobs.introspect, envside.IntrospectRequest(env_id="stock-arithmetic"))
        assert envside.call(py, jobs.count, envside.CountRequest(env_id="stock-arithmetic")).rows == 1000
    finally:
        worker.close_all()
    here = envside.call(PY, jobs.introspect, envside.IntrospectRequest(env_id="stock-arithmetic"))
    assert there.fingerprints == here.fingerprints
    assert (there.hub.train_size, there.hub.eval_size, there.hub.rubric_funcs) == \
        (here.hub.train_size, here.hub.eval_size, here.hub.rubric_funcs)
