"""Generated environments built from the hub env's parts, their auxiliary rewards held to [0, 1],
and what an install reports when the generated env does not load.

The hub env here (tests/envs/own_data_gym.py) has a class that builds its own data in __init__
and takes no `dataset` argument, as verifiers' ReasoningGymEnv does: a generated env cannot be
that class with other rows, so it is verifiers' SingleTurnEnv with the hub's parser, rubric and
system prompt. A hub class that takes a dataset (stock_arithmetic's, own_data_gym's
style="keyword") is kept.
"""
from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from conftest import ENVS
from tests_support import python_c
from driver.envs.install import cleanup, install_generated
from driver.envs.introspect import introspect
from driver.envs.packages import write_package
from driver.errors import DriverError

PY = sys.executable
sys.path.insert(0, ENVS)
import own_data_gym  # noqa: E402


# tests/envs on PYTHONPATH for the whole module (conftest)
pytestmark = pytest.mark.usefixtures("test_envs_on_path")


@pytest.fixture(scope="module")
def own_hub():
    return introspect(PY, "own_data_gym")


@pytest.fixture
def names():
    made = []

    def make(stem):
        name = f"{stem}_t{uuid.uuid4().hex[:6]}_iter_1"
        made.append(name)
        return name
    yield make
    for name in made:
        cleanup(PY, name)


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _generated_rows(n: int) -> list[dict]:
    """Three-digit products: rows the hub's own (two-digit) data never has."""
    return own_data_gym.rows(seed=7, n=n, digits=3)


LOAD_CHECK = r"""
import asyncio, json, logging, sys
import verifiers as vf
from verifiers.types import State

name, hub_id, hub_args, texts_path, dest = sys.argv[1:6]
seen = []
class Keep(logging.Handler):
    def emit(self, record):
        seen.append(record.getMessage())
gen, hub = vf.load_environment(name), vf.load_environment(hub_id, **json.loads(hub_args))
keep = Keep(logging.WARNING)
for logger in ["", *(n for n in logging.root.manager.loggerDict if n.startswith("verifiers"))]:
    logging.getLogger(logger).addHandler(keep)
def own(r):
    rs = [x for x in getattr(r, "rubrics", [r]) if type(x).__name__ != "MultiTurnMonitorRubric"]
    return rs[0]
rows = gen.get_dataset()
texts = json.loads(open(texts_path).read())
async def score(env, row, text):
    st = State(input={"prompt": row["prompt"], "answer": row["answer"], "info": row["info"], "example_id": 0,
                      "task": "default"})
    st["completion"] = [{"role": "assistant", "content": text}]
    st["trajectory"] = []
    await env.rubric.score_rollout(st)
    return [st["reward"], st["metrics"]]
out = {"class": type(gen).__name__, "module": type(gen).__module__, "hub_class": type(hub).__name__,
       "generated_env_class": getattr(gen, "generated_env_class", None),
       "same_parser": type(gen.parser) is type(hub.parser),
       "gen_funcs": own(gen.rubric)._get_reward_func_names(),
       "hub_funcs": own(hub.rubric)._get_reward_func_names(),
       "system_prompt": gen.system_prompt == hub.system_prompt,
       "rows": len(rows), "questions": [rows[i]["question"] for i in range(len(rows))],
       "gen": [asyncio.run(score(gen, rows[i], t)) for i, t in texts],
       "hub": [asyncio.run(score(hub, rows[i], t)) for i, t in texts]}
out["log"] = seen
with open(dest, "w") as f:
    json.dump(out, f)
"""


def load_check(tmp_path: Path, name: str, hub: dict, texts: list[tuple[int, str]]) -> dict:
    """LOAD_CHECK on the installed generated env `name`, in a fresh interpreter: what it is
    built on, its rows, and the rewards its rubric and the hub's give `texts` ((row, reply))."""
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    dest = tmp_path / "load_check.json"
    r = python_c(LOAD_CHECK, name, hub["env_id"], json.dumps(hub.get("env_args") or {}),
                 tmp_path / "texts.json", dest)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(dest.read_text())


def test_a_hub_class_that_builds_its_own_data_gets_a_single_turn_env_with_its_parts(tmp_path, own_hub, names):
    """The hub class's __init__ takes no dataset: the generated env is SingleTurnEnv with the
    hub's parser, rubric and system prompt; it loads the generated rows, and the hub's rubric
    scores them (as it scores the same reply in the hub env). hub_env.json and the loaded env
    record the same choice."""
    name = names("own_data_gym")
    rows = _generated_rows(25)
    pkg = write_package(tmp_path, name, own_hub, _write(tmp_path / "d.jsonl", rows))
    assert install_generated(PY, pkg, 25)["rows"] == 25
    choice = own_hub["generated_env_class"]
    assert choice["class"] == "SingleTurnEnv" and "OwnDataEnv.__init__ takes no dataset" in choice["why"]
    right, wrong = f"<answer>{rows[0]['answer']}</answer>", "<answer>1</answer>"
    out = load_check(tmp_path, name, own_hub, [(0, right), (0, wrong), (3, f"<answer>{rows[3]['answer']}</answer>")])
    assert (out["class"], out["hub_class"]) == ("SingleTurnEnv", "OwnDataEnv")
    assert out["generated_env_class"] == choice
    assert out["same_parser"] and out["system_prompt"]
    assert out["gen_funcs"] == out["hub_funcs"] == ["correct_product", "format_reward_func"]
    assert out["rows"] == 25 and out["questions"] == [r["question"] for r in rows]
    assert [g[0] for g in out["gen"]] == [1.0, 0.0, 1.0]
    assert [g[0] for g in out["gen"]] == [h[0] for h in out["hub"]]
    assert out["gen"][0][1]["correct_product"] == 1.0


def test_a_hub_class_that_takes_a_dataset_keeps_its_own_class(tmp_path, names):
    """A SingleTurnEnv subclass that takes its dataset through **kwargs, and the built-in
    stock_arithmetic: the generated env is the hub's own class, as before."""
    hub = introspect(PY, "own_data_gym", {"style": "keyword"})
    assert hub["generated_env_class"]["class"] == "KeywordEnv"
    name = names("own_data_gym_kw")
    rows = _generated_rows(12)
    install_generated(PY, write_package(tmp_path, name, hub, _write(tmp_path / "d.jsonl", rows)), 12)
    out = load_check(tmp_path, name, hub, [(0, f"<answer>{rows[0]['answer']}</answer>")])
    assert out["class"] == out["hub_class"] == "KeywordEnv" and out["module"] == "own_data_gym"
    assert out["generated_env_class"] == hub["generated_env_class"]
    assert out["gen"][0][0] == 1.0 and out["rows"] == 12

    stock = introspect(PY, "stock_arithmetic")
    assert stock["generated_env_class"]["class"] == stock["env_class"] == "SingleTurnEnv"
    assert "takes a dataset argument: the hub's own class" in stock["generated_env_class"]["why"]


AUX = '''
AUX_REWARDS = [("brace_first", 0.1, "prose around the answer"), ("runaway", 0.1, "prose around the answer")]


async def brace_first(completion, answer, info=None, state=None, **kwargs) -> float:
    text = completion[-1]["content"] if completion else ""
    return 1.0 if text.lstrip().startswith("<") else 0.0


async def runaway(completion, answer, info=None, state=None, **kwargs) -> float:
    # out of range when the reply is right: it must not add 0.1 * 7
    text = completion[-1]["content"] if completion else ""
    return 7.0 if answer in text else 0.5
'''


def test_an_aux_reward_out_of_0_1_scores_zero_and_is_named(tmp_path, own_hub, names):
    """Each aux function runs through a wrapper that keeps its name and raises a ValueError
    naming it when its value is outside [0, 1]: the rubric scores that rollout's aux reward 0
    and logs the error; in range, it adds at its weight."""
    name = names("own_data_gym_aux")
    rows = _generated_rows(10)
    data = _write(tmp_path / "dataset.jsonl", rows)
    (tmp_path / "aux_rewards.py").write_text(AUX)
    install_generated(PY, write_package(tmp_path, name, own_hub, data), 10)
    out = load_check(tmp_path, name, own_hub, [(0, f"<answer>{rows[0]['answer']}</answer>"), (1, "<answer>1</answer>")])
    assert out["gen_funcs"] == ["correct_product", "format_reward_func", "brace_first", "runaway"]
    (right, right_metrics), (wrong, wrong_metrics) = out["gen"]
    assert right_metrics["runaway"] == 0.0 and right == pytest.approx(out["hub"][0][0] + 0.1)   # 1.0 + brace_first
    assert wrong_metrics["runaway"] == 0.5 and wrong == pytest.approx(out["hub"][1][0] + 0.1 + 0.05)
    assert any("runaway" in m and "not a number in [0, 1]" in m and "7.0" in m for m in out["log"]), out["log"]


def test_a_load_failure_names_the_first_exception_where_it_was_raised(tmp_path, own_hub, names):
    """The hub env's constructor raises when the generated env loads it: the install reports that
    exception (verifiers' loader wraps it twice in a RuntimeError), the file and line it came
    from and the generated module's line, and suggests no stale copy (there is none)."""
    name = names("own_data_gym_boom")
    hub = {**own_hub, "env_args": {"explode": True}}
    pkg = write_package(tmp_path, name, hub, _write(tmp_path / "d.jsonl", _generated_rows(5)))
    with pytest.raises(DriverError) as e:
        install_generated(PY, pkg, 5)
    msg = str(e.value)
    assert f"loading {name} failed" in msg
    assert "ValueError: OwnDataEnv was told to fail in its constructor" in msg
    raised_at = next(i for i, line in enumerate(Path(own_data_gym.__file__).read_text().splitlines(), 1)
                     if "raise ValueError" in line)
    assert f'own_data_gym.py", line {raised_at}' in msg
    assert f'{name}/__init__.py", line ' in msg
    assert "RuntimeError" not in msg and "stale copy" not in msg and "None rows" not in msg


def test_a_row_the_module_cannot_parse_is_named_with_its_line(tmp_path, names):
    """A row without a question: KeyError in the generated module's row reader, at its line."""
    hub = introspect(PY, "stock_arithmetic")
    name = names("stock_arithmetic_bad_row")
    rows = [{"question": "q", "answer": "1", "info": {}}, {"answer": "2", "info": {}}]
    pkg = write_package(tmp_path, name, hub, _write(tmp_path / "d.jsonl", rows))
    with pytest.raises(DriverError) as e:
        install_generated(PY, pkg, 2)
    line = next(i for i, text in enumerate((pkg / name / "__init__.py").read_text().splitlines(), 1)
                if 'obj["question"]' in text)
    msg = str(e.value)
    assert f"loading {name} failed (cleanup and install repeated once): KeyError: 'question' (File " in msg
    assert f'{name}/__init__.py", line {line})' in msg and "stale copy" not in msg


def test_a_stale_copy_is_named_only_when_one_is_there(tmp_path, names, monkeypatch):
    """A copy of the package earlier on sys.path shadows the installed one: the install names
    its place. A plain row-count mismatch with no such copy suggests none."""
    hub = introspect(PY, "stock_arithmetic")
    name = names("stock_arithmetic_shadowed")
    rows = [{"question": f"q{i}", "answer": str(i), "info": {}} for i in range(4)]
    pkg = write_package(tmp_path, name, hub, _write(tmp_path / "d.jsonl", rows))
    with pytest.raises(DriverError) as e:
        install_generated(PY, pkg, 5)
    assert "builds 4 rows after install, expected 5" in str(e.value) and "stale copy" not in str(e.value)

    shadow = tmp_path / "shadow" / name
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("def load_environment(**kwargs):\n    raise ImportError('an old copy')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(shadow.parent), os.environ["PYTHONPATH"]]))
    with pytest.raises(DriverError) as e:
        install_generated(PY, pkg, 4)
    msg = str(e.value)
    assert "ImportError: an old copy" in msg
    assert f"A stale copy of {name} is still there" in msg and str(shadow) in msg


def test_a_generated_package_is_versioned_by_what_it_ships(tmp_path):
    """Every generated env was version 0.1.0: a regenerated dataset for the same arm was refused
    as a duplicate version on the Environments Hub or installed stale under the same ref. Its
    version now follows its content: the same rows, the same version; other rows, another."""
    import tomllib

    from driver.envs.packages import write_package

    hub = {"env_id": "stock_arithmetic", "eval_size": 200}
    rows = tmp_path / "rows.jsonl"

    def version(dest: str, text: str) -> str:
        rows.write_text(text)
        pkg = write_package(tmp_path / dest, "stock_arithmetic_iter_1_abc", hub, rows)
        return tomllib.loads((pkg / "pyproject.toml").read_text())["project"]["version"]

    first = version("a", '{"question": "1+1", "answer": "2"}\n')
    assert first == version("b", '{"question": "1+1", "answer": "2"}\n')
    assert first != version("c", '{"question": "2+2", "answer": "4"}\n')
    assert first.startswith("0.1.") and first.split(".")[2].isdigit()
