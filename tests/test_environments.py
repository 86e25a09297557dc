"""Hub introspection, generated environments that mirror the hub's stack, cleanup-then-install."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from conftest import driver
from driver.envs.install import (INSTALLER, cleanup, count_rows, driver_installs, install_generated, install_scheme,
                                 purelib, remove_driver_installs)
from driver.envs.introspect import introspect
from driver.envs.packages import package_name, write_package
from driver.errors import DriverError
from stock_arithmetic.data import build_splits
from tests_support import python_c

PY = sys.executable


def test_introspect_both_builtins_and_no_eval_row_leaks():
    info = introspect(PY, "stock_arithmetic")
    assert (info["env_class"], info["parser_class"], info["rubric_class"]) == \
        ("SingleTurnEnv", "StockAnswerParser", "Rubric")
    assert {f["name"]: f["weight"] for f in info["rubric_funcs"]}["correct_final_stock"] == 1.0
    assert (info["train_size"], info["eval_size"]) == (1000, 200)
    assert '{"final_stock": <integer>}' in info["answer_format_instruction"]
    assert len(info["sample_train_rows"]) == 3
    blob = json.dumps(info)
    for row in build_splits(0)["test"]:
        assert row["question"] not in blob        # no eval question anywhere
    train_qs = {r["question"] for r in build_splits(0)["train"]}
    assert all(r["question"] in train_qs for r in info["sample_train_rows"])

    router = introspect(PY, "model-router")      # dashes resolve like verifiers does
    assert router["parser_class"] == "XMLParser" and router["eval_size"] == 60
    assert [f["name"] for f in router["rubric_funcs"]][0] == "oracle_route"


def test_introspect_cli_and_missing_env(tmp_path):
    r = driver(["introspect", "stock_arithmetic", "--json"], dict(os.environ))
    assert r.returncode == 0 and json.loads(r.stdout)["env_id"] == "stock_arithmetic"
    r = driver(["introspect", "surely_not_an_env"], dict(os.environ))
    assert r.returncode == 2 and "hub env not found" in r.stderr and "prime env install" in r.stderr


def _rows(n, offset=0):
    return [{"question": r["question"], "answer": r["answer"], "info": r["info"]}
            for r in build_splits(0)["train"][offset:offset + n]]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def hub():
    return introspect(PY, "stock_arithmetic")


@pytest.fixture
def names():
    made = []

    def make(suffix):
        name = f"stock_arithmetic_t{uuid.uuid4().hex[:6]}_{suffix}"
        made.append(name)
        return name
    yield make
    for name in made:
        cleanup(PY, name)


MIRROR_CHECK = r"""
import asyncio, json, sys
import verifiers as vf
from verifiers.types import State
gen, hub = vf.load_environment(sys.argv[1]), vf.load_environment("stock_arithmetic")
def own(r):
    return [x for x in r.rubrics if type(x).__name__ != "MultiTurnMonitorRubric"][0]
out = {"same_class": type(gen) is type(hub), "same_parser": type(gen.parser) is type(hub.parser),
       "same_funcs": own(gen.rubric).funcs == own(hub.rubric).funcs,
       "same_weights": own(gen.rubric).weights == own(hub.rubric).weights,
       "same_system_prompt": gen.system_prompt == hub.system_prompt,
       "n_monitors": sum(type(x).__name__ == "MultiTurnMonitorRubric" for x in gen.rubric.rubrics)}
row = gen.get_dataset()[0]
texts = [row["info"]["reference_completion"], '{"final_stock": -1}', "<think>x</think>" + row["answer"],
         '{"final_stock": %s}' % row["answer"], '{"final_stock": %s, "x": 1}' % row["answer"]]
async def score(env, text):
    st = State(input={"prompt": row["prompt"], "answer": row["answer"], "info": row["info"], "example_id": 0})
    st["completion"] = [{"role": "assistant", "content": text}]
    st["trajectory"] = []
    await env.rubric.score_rollout(st)
    return st["reward"], st["metrics"]
out["gen"] = [asyncio.run(score(gen, t)) for t in texts]
out["hub"] = [asyncio.run(score(hub, t)) for t in texts]
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
"""


def mirror_check(name: str, tmp_path) -> dict:
    """MIRROR_CHECK on the installed env `name`, in a fresh interpreter; its result as a dict."""
    dest = tmp_path / "mirror_check.json"
    r = python_c(MIRROR_CHECK, name, dest)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(dest.read_text())


def test_generated_env_mirrors_the_hub_and_scores_identically(tmp_path, hub, names):
    name = names("iter_1")
    pkg = write_package(tmp_path, name, hub, _write(tmp_path / "d.jsonl", _rows(40)))
    assert install_generated(PY, pkg, 40)["rows"] == 40
    out = mirror_check(name, tmp_path)
    assert out["same_class"] and out["same_parser"] and out["same_funcs"] and out["same_weights"]
    assert out["same_system_prompt"] and out["n_monitors"] == 1
    assert out["gen"] == out["hub"]
    assert [g[0] for g in out["gen"]] == [1.0, 0.0, 0.0, 1.0, 0.0]
    # the rows ship inside the package directory, not at site-packages root
    assert (pkg / name / "dataset.jsonl").exists()
    assert not (purelib(PY) / "dataset.jsonl").exists()


def test_reinstall_with_changed_rows_is_seen_and_packages_do_not_clobber(tmp_path, hub, names):
    a, b = names("iter_1"), names("iter_2")
    pa = write_package(tmp_path / "a", a, hub, _write(tmp_path / "a.jsonl", _rows(30)))
    install_generated(PY, pa, 30)
    pb = write_package(tmp_path / "b", b, hub, _write(tmp_path / "b.jsonl", _rows(25, 100)))
    install_generated(PY, pb, 25)
    assert count_rows(PY, a) == 30 and count_rows(PY, b) == 25
    assert {a, b} <= driver_installs(purelib(PY))   # marked as the driver's: the suite removes them
    from pathlib import Path

    from driver.envs.install import installed_from   # ... the ones its own runs installed

    assert installed_from(purelib(PY), a) == Path(pa).resolve()
    # same package, new rows: the new count is what loads (no stale copy survives)
    pa = write_package(tmp_path / "a", a, hub, _write(tmp_path / "a.jsonl", _rows(45, 200)))
    assert install_generated(PY, pa, 45)["attempts"] == 1
    assert count_rows(PY, a) == 45 and count_rows(PY, b) == 25
    # a stale root-level data file from an old-style install is removed by the cleanup
    stale = purelib(PY) / f"{a}.py"
    stale.write_text("raise SystemExit('stale copy')\n")
    install_generated(PY, pa, 45)
    assert not stale.exists()
    # uninstalling one leaves the other working
    cleanup(PY, a)
    assert count_rows(PY, a) is None and count_rows(PY, b) == 25
    assert a not in driver_installs(purelib(PY)) and b in driver_installs(purelib(PY))


def test_the_session_removes_only_the_driver_installs_it_added(tmp_path):
    """conftest's session end (install.remove_driver_installs, keeping what was there at its
    start): the generated envs this suite's runs installed go; the driver's installs from before
    it and everything pip or uv installed stay."""
    site = tmp_path / "site-packages"

    def put(name: str, installer: str) -> None:
        info = site / f"{name}-0.1.0.dist-info"
        info.mkdir(parents=True)
        (info / "INSTALLER").write_text(f"{installer}\n")
        (site / name).mkdir()
        (site / name / "dataset.jsonl").write_text("{}\n")

    put("old_iter_1_aaaaaa", INSTALLER)
    put("verifiers", "pip")
    before = driver_installs(site)
    put("stock_arithmetic_t123abc_iter_1", INSTALLER)
    put("requests", "uv")
    assert remove_driver_installs(site, keep=before) == ["stock_arithmetic_t123abc_iter_1"]
    assert sorted(p.name for p in site.iterdir()) == [
        "old_iter_1_aaaaaa", "old_iter_1_aaaaaa-0.1.0.dist-info", "requests", "requests-0.1.0.dist-info",
        "verifiers", "verifiers-0.1.0.dist-info"]
    # with `under` (the session's base temp): a run outside it (a demo beside the suite) keeps
    # its generated envs; one that recorded no source is the session's to remove
    from driver.envs.install import SOURCE_RECORD

    suite, demo = tmp_path / "basetemp" / "run", tmp_path / "runs" / "demo"
    put("x_iter_1_bbbbbb", INSTALLER)
    put("x_iter_1_cccccc", INSTALLER)
    put("x_iter_1_dddddd", INSTALLER)
    (site / "x_iter_1_bbbbbb-0.1.0.dist-info" / SOURCE_RECORD).write_text(f"{suite / 'x_iter_1_bbbbbb'}\n")
    (site / "x_iter_1_cccccc-0.1.0.dist-info" / SOURCE_RECORD).write_text(f"{demo / 'x_iter_1_cccccc'}\n")
    assert remove_driver_installs(site, keep=before, under=tmp_path / "basetemp") == [
        "x_iter_1_bbbbbb", "x_iter_1_dddddd"]
    assert (site / "x_iter_1_cccccc").exists()


def test_an_install_starts_no_pip_and_no_interpreter_but_the_row_count(tmp_path, hub, names, monkeypatch):
    """hatchling builds the wheel in this process and installer unpacks it: the only program
    an install starts is the fresh-process row count (through the warm worker)."""
    name = names("iter_5")
    pkg = write_package(tmp_path, name, hub, _write(tmp_path / "d.jsonl", _rows(15)))
    install_scheme(PY)                 # read once per driver process, before the install
    started = []
    real_run, real_popen = subprocess.run, subprocess.Popen

    def spy_run(cmd, *a, **kw):
        started.append(cmd)
        return real_run(cmd, *a, **kw)

    def spy_popen(cmd, *a, **kw):
        started.append(cmd)
        return real_popen(cmd, *a, **kw)

    monkeypatch.setattr(subprocess, "run", spy_run)
    monkeypatch.setattr(subprocess, "Popen", spy_popen)
    assert install_generated(PY, pkg, 15)["rows"] == 15
    assert not any("pip" in " ".join(map(str, c)) for c in started), started
    dist = list(purelib(PY).glob(f"{name}-*.dist-info"))
    assert len(dist) == 1 and (dist[0] / "RECORD").exists()   # a normal install pip can remove


def test_row_count_mismatch_stops_with_a_clear_error(tmp_path, hub, names):
    name = names("iter_3")
    pkg = write_package(tmp_path, name, hub, _write(tmp_path / "d.jsonl", _rows(10)))
    with pytest.raises(DriverError, match="expected 11"):
        install_generated(PY, pkg, 11)


def test_package_names_use_underscores():
    assert package_name("someone/stock-arithmetic", "iter_2") == "stock_arithmetic_iter_2"
    assert package_name("stock-arithmetic", "run_a", "0f3a9c") == "stock_arithmetic_run_a_0f3a9c"


AUX_OK = '''
AUX_REWARDS = [("starts_with_brace", 0.1, "double carry sums")]


async def starts_with_brace(completion, answer, info=None, state=None, **kwargs) -> float:
    # failure mode: answers wrapped in prose instead of one JSON object
    text = completion[-1]["content"] if completion else ""
    return 1.0 if text.lstrip().startswith("{") else 0.0
'''

AUX_WEAKNESS = {"domains": [{"name": "carry-heavy deliveries", "sub_domains": [{"name": "double carry sums"}]}]}


def test_aux_reward_gate_lines():
    import tempfile
    from pathlib import Path

    from driver.gates import aux_rewards

    def lines(text):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "aux_rewards.py"
            p.write_text(text)
            return {n: ok for n, ok, _ in aux_rewards.check(p, AUX_WEAKNESS).lines}

    assert all(lines(AUX_OK).values())
    assert lines(AUX_OK.replace("0.1,", "0.25,"))["each aux weight <= 0.2"] is False
    two = AUX_OK.replace('[("starts_with_brace", 0.1, "double carry sums")]',
                         '[("starts_with_brace", 0.2, "double carry sums"), ("starts_with_brace", 0.2, "double carry sums")]')
    assert lines(two)["aux weights total <= 0.3"] is False
    assert lines(AUX_OK.replace('"double carry sums")]', '"vibes")]'))[
        "each aux reward names a failure mode of the weakness report"] is False
    assert lines(AUX_OK.replace("info=None, state=None, **kwargs", "info, state"))[
        "aux signature async def fn(completion, answer, info=None, state=None, **kwargs)"] is False
    assert lines("import random\n" + AUX_OK)["aux rewards import nothing non-deterministic or outward-facing"] is False
    long_body = AUX_OK.replace("    return 1.0", "    x = 1\n" * 9 + "    return 1.0")
    assert lines(long_body)["aux functions <= 10 lines"] is False


def test_generated_env_adds_gated_aux_reward(tmp_path, hub, names):
    name = names("iter_4")
    data = _write(tmp_path / "dataset.jsonl", _rows(12))
    (tmp_path / "aux_rewards.py").write_text(AUX_OK)
    pkg = write_package(tmp_path, name, hub, data)
    install_generated(PY, pkg, 12)
    out = mirror_check(name, tmp_path)
    assert not out["same_funcs"]                       # the aux reward was added ...
    gen_rewards = [g[0] for g in out["gen"]]
    hub_rewards = [h[0] for h in out["hub"]]
    assert gen_rewards[1] == hub_rewards[1] + 0.1      # ... at its weight
    assert "starts_with_brace" in out["gen"][1][1]


def test_a_qwen3_student_on_a_think_stripping_hub_parser_is_warned_about_before_iter_0():
    from driver.phases.setup import think_parser_warning

    w = think_parser_warning("Qwen/Qwen3-0.6B", {"parser_class": "ThinkParser"})
    assert w and "Qwen/Qwen3-0.6B" in w and "ThinkParser" in w
    assert think_parser_warning("Qwen/Qwen2.5-0.5B-Instruct", {"parser_class": "ThinkParser"}) is None
    assert think_parser_warning("Qwen/Qwen3-0.6B", {"parser_class": "XMLParser"}) is None
