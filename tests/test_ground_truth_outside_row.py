"""Ground truth outside the row: a hub reward that scores against the env's own data.

The hub env here (tests/envs/index_gym.py) behaves as verifiers' ReasoningGymEnv does without
the reasoning_gym package: its rows' `answer` is an index into a dataset object it holds, and
its reward scores the parsed completion with that object's `score_answer(answer, entry)` on the
entry at that index. Introspection must notice (and not on stock_arithmetic); the generated env
must score the hub's own rows exactly as the hub does, and generated rows through the entry
they carry in `info.entry`; the gate must pass such rows and refuse rows without it; and
TEACHER.md must say what to write, well enough for a teacher that reads only it.
"""
from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path

import pytest

from conftest import ENVS, ROOT, driver, driver_env, with_test_envs
from tests_support import python_c
from driver.envs.describe import refuse_unscorable
from driver.envs.install import cleanup, install_generated
from driver.envs.introspect import introspect
from driver.envs.packages import write_package
from driver.errors import DriverError
from driver.gates import accuracy, dataset, rules

PY = sys.executable
sys.path.insert(0, ENVS)
sys.path.insert(0, str(ROOT / "driver" / "envside"))
import index_gym  # noqa: E402
import row_truth  # noqa: E402

ACCURATE = rules.LINE["accurate"].name
TRAIN = 200   # index_gym's default train rows: its dataset object holds train then eval entries


# tests/envs on PYTHONPATH for the whole module (conftest)
pytestmark = pytest.mark.usefixtures("test_envs_on_path")


@pytest.fixture(scope="module")
def index_hub():
    return introspect(PY, "index_gym")


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


def _data():
    return index_gym.ProceduralSet(TRAIN + 50, 0)


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _gate_info(entry: dict, reasoning: str, k: int) -> dict:
    return {"domain": "d", "sub_domain": entry["metadata"]["source_dataset"], "difficulty": "hard",
            "structural_features": ["a", "b"], "source": f"template:t{k % 3}", "reasoning": reasoning}


def _fresh_rows(n: int) -> list[dict]:
    """Rows the env's data never holds (words it has no entry for), written the documented way."""
    words = ["pebble", "thistle", "marble", "saffron", "juniper", "falcon", "copper", "willow"]
    rows = []
    for k in range(n):
        word = words[k % len(words)] + "s" * (k // len(words))
        entry = {"question": f"Spell '{word}' backwards.", "answer": word[::-1],
                 "metadata": {"source_dataset": "reversal", "word": word, "length": len(word)}}
        info = {**_gate_info(entry, f"<answer>{entry['answer']}</answer>", k), "entry": entry}
        rows.append({"question": entry["question"], "answer": entry["answer"], "info": info})
    return rows


def accurate_line(path: Path, scored: dict) -> tuple[bool, str]:
    rep = dataset.check(path, {}, scored=scored)
    return next((ok, detail) for name, ok, detail in rep.lines if name == ACCURATE)


# --------------------------------------------------------------------------------------------
# (a) introspection

def test_introspection_records_a_reward_that_reads_the_envs_own_state(index_hub):
    """index_gym: its reward ignores the question and raises on an answer that is no index of
    its own; hub_env.json names it, says so in words, and names the scorer the env holds.
    stock_arithmetic's reward scores from the row: nothing is recorded against it."""
    got = index_hub["reward_reads_env_state"]
    assert got["verdict"] == "yes" and got["funcs"] == ["check_answer_reward_func"]
    assert "the reward reads the env's own state" in got["evidence"]
    assert "an out-of-range index raised too" in got["evidence"]
    assert got["scorer"]["attr"] == "rg_dataset" and got["scorer"]["method"] == "score_answer"
    assert got["scorer"]["entry_keys"] == ["answer", "metadata", "question"]
    assert got["scorer"]["entry_example"] == _data()[0]

    stock = introspect(PY, "stock_arithmetic")["reward_reads_env_state"]
    assert stock["verdict"] == "no" and stock["funcs"] == [] and stock["scorer"] is None
    assert "reads the env's own state" not in stock["evidence"]


def test_an_unbounded_index_is_recognised_by_the_entry_the_answer_points_at():
    """reasoning-gym's procedural datasets give an entry for any index: an out-of-range index
    raises nothing, but the entry at int(answer) holds the row's own question."""
    got = introspect(PY, "index_gym", {"bounded": False})["reward_reads_env_state"]
    assert got["verdict"] == "yes" and got["funcs"] == ["check_answer_reward_func"]
    assert "IndexEnv.rg_dataset[int(answer)] holds each row's question" in got["evidence"]


def test_an_env_with_no_scorer_is_refused_with_what_it_would_need():
    """The reward reads the env's state and the env holds no object with score_answer: the
    record says so, and the driver refuses (before iter_0) saying what the env would need."""
    hub = introspect(PY, "index_gym", {"scorer": "hidden"})
    got = hub["reward_reads_env_state"]
    assert got["verdict"] == "yes" and got["scorer"] is None
    assert "the env must expose a scorer (it holds none)" in got["evidence"]
    with pytest.raises(DriverError) as e:
        refuse_unscorable(hub)
    msg = str(e.value)
    assert "index_gym's reward (check_answer_reward_func) reads the env's own state" in msg
    assert "an attribute holding an object with score_answer(answer, entry)" in msg
    assert "info.entry" in msg
    refuse_unscorable(introspect(PY, "stock_arithmetic"))   # nothing to refuse


def test_the_refusal_comes_before_a_run_directory_exists(tmp_path, runs):
    env = driver_env(tmp_path)
    env["PYTHONPATH"] = with_test_envs(env)
    r = driver(["run", "--dataset", "index_gym", "--env-args", '{"scorer": "hidden"}', "--teacher", "agent",
                "--max-iters", "1", "--runs-dir", str(runs)], env, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "score_answer(answer, entry)" in r.stderr and "[iter_0]" not in r.stderr
    assert "Nothing was created" in r.stderr
    assert not runs.exists() or not any(runs.iterdir())   # resume could not fix it: no dead run dir


def test_an_env_the_check_cannot_run_on_is_undetermined():
    class Odd:
        system_prompt = ""
        rubric = None
        parser = None

    assert row_truth.detect(Odd(), [{"question": "q", "answer": "1"}])["verdict"] == "undetermined"
    assert row_truth.detect(Odd(), [])["evidence"] == "no train rows to score"


# --------------------------------------------------------------------------------------------
# (b) the generated env

CHECK = r"""
import asyncio, json, sys
import verifiers as vf
from verifiers.types import State

name, hub_id, texts_path, dest = sys.argv[1:5]
gen, hub = vf.load_environment(name), vf.load_environment(hub_id)
todo = json.loads(open(texts_path).read())
async def score(env, row, text):
    st = State(input={"prompt": row["prompt"], "answer": row["answer"], "info": row["info"], "example_id": 0,
                      "task": "default"})
    st["completion"] = [{"role": "assistant", "content": text}]
    st["trajectory"] = []
    await env.rubric.score_rollout(st)
    return [st["reward"], st["metrics"]]
g, h = gen.get_dataset(), hub.get_dataset()
out = {"class": type(gen).__name__, "same_parser": gen.parser is not None and type(gen.parser) is type(hub.parser),
       "gen": [asyncio.run(score(gen, g[i], t)) for i, t in todo],
       "hub": [asyncio.run(score(hub, h[i], t)) for i, t in todo]}
json.dump(out, open(dest, "w"))
"""


def test_the_generated_env_scores_the_hubs_own_rows_exactly_as_the_hub_does(tmp_path, index_hub, names):
    """The hub's first 12 train rows, each with its entry from the env's data as info.entry and
    the entry's answer as its answer: the generated env (the hub's parser, its scorer on info.entry) gives every reply the reward the
    hub gives it on its own row (right, off by one, wrong case, wrong, unparsed)."""
    data = _data()
    # written the documented way: the row's answer is the entry's (no index: a reward that looked
    # it up would raise on a reversal, and score a sum against whatever entry its value indexes)
    rows = [{"question": data[i]["question"], "answer": data[i]["answer"],
             "info": {"source_dataset": data[i]["metadata"]["source_dataset"], "entry": data[i]}}
            for i in range(12)]
    name = names("index_gym")
    pkg = write_package(tmp_path, name, index_hub, _write(tmp_path / "d.jsonl", rows))
    assert (pkg / name / "row_truth.py").read_text() == (ROOT / "driver" / "envside" / "row_truth.py").read_text()
    assert install_generated(PY, pkg, 12)["rows"] == 12

    def replies(e):
        a = e["answer"]
        near = str(int(a) + 1) if e["metadata"]["source_dataset"] == "sums" else a.upper()
        return [f"<answer>{a}</answer>", f"<answer>{near}</answer>", "<answer>zzz</answer>", a]

    todo = [(i, t) for i in range(12) for t in replies(data[i])]
    (tmp_path / "todo.json").write_text(json.dumps(todo))
    r = python_c(CHECK, name, "index_gym", tmp_path / "todo.json", tmp_path / "o.json")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads((tmp_path / "o.json").read_text())
    assert out["class"] == "SingleTurnEnv" and out["same_parser"]
    # the same reward and the same value of each hub function (the generated env's class adds
    # its turn-count metric at weight 0)
    assert [[g[0], {k: g[1][k] for k in h[1]}] for g, h in zip(out["gen"], out["hub"])] == out["hub"]
    rewards = [g[0] for g in out["gen"]]
    assert set(rewards) == {0.0, 0.5, 1.0}            # the comparison is not of all-equal values
    assert rewards[0::4] == [1.0] * 12


# --------------------------------------------------------------------------------------------
# (c) the gate

def test_rows_with_the_entry_pass_the_accuracy_line_and_rows_without_are_told_what_to_write(tmp_path, index_hub):
    """Generated rows (entries the env's data does not hold, answers that are no index) with
    info.entry earn full reward through the generated env's rubric; the same rows without it
    fail the accuracy line, which names info.entry and the scorer that takes it; a wrong
    answer in the reasoning fails too. validate --env (no hub_env.json) finds the same."""
    rows = _fresh_rows(20)
    good = _write(tmp_path / "good.jsonl", rows)
    scored = accuracy.score_hub_rows(PY, index_hub, good)
    assert scored["ceiling"] == 1.0 and [r["reward"] for r in scored["rows"]] == [1.0] * 20
    assert accurate_line(good, scored)[0]
    assert [r["reward"] for r in accuracy.score_rows(PY, "index_gym", None, good)["rows"]] == [1.0] * 20

    bare = _write(tmp_path / "bare.jsonl", [{**r, "info": {k: v for k, v in r["info"].items() if k != "entry"}}
                                            for r in rows])
    ok, detail = accurate_line(bare, accuracy.score_hub_rows(PY, index_hub, bare))
    assert not ok and "20 of 20 rows below full reward" in detail
    assert "no info.entry: IndexEnv scores against its own data, so a row carries its ground truth as info.entry" in detail
    assert "rg_dataset.score_answer(answer, entry)" in detail

    wrong = _write(tmp_path / "wrong.jsonl", [{**r, "info": {**r["info"], "reasoning": "<answer>nope</answer>"}}
                                              if k == 3 else r for k, r in enumerate(rows)])
    ok, detail = accurate_line(wrong, accuracy.score_hub_rows(PY, index_hub, wrong))
    assert not ok and "1 of 20 rows below full reward" in detail and "lines 4" in detail


# --------------------------------------------------------------------------------------------
# (d) TEACHER.md

def _teacher_md(tmp_path: Path, hub: dict) -> tuple[str, str]:
    from driver.errors import WaitingForTeacher
    from driver.teachers import Brief
    from driver.teachers.agent import AgentTeacher
    from driver.teachers.llm import render_prompt

    d = tmp_path / "iter_1"
    d.mkdir(parents=True)
    failures = tmp_path / "failures.jsonl"
    failures.write_text(json.dumps({"prompt": "p", "completion": "c", "reward": 0.0}) + "\n")
    b = Brief(run_dir=tmp_path, iter_dir=d, iteration=1, hub=hub, failures_path=failures,
              failures_step="train_step_30", eval_accs={"iter_0": 0.2})
    b.train_sample_path = tmp_path / "train_sample.jsonl"
    with pytest.raises(WaitingForTeacher):
        AgentTeacher().teach(b)
    return (d / "TEACHER.md").read_text(), render_prompt(b)[1]


def test_teacher_md_says_what_happened_and_a_teacher_reading_only_it_passes(tmp_path, index_hub):
    """TEACHER.md (and the LLM prompt) say the ground truth is outside the row, where it goes and
    in what shape; a teacher that takes from TEACHER.md only the info key, the example entry
    and the answer format writes rows whose accuracy line passes. stock_arithmetic's says none
    of it."""
    text, prompt = _teacher_md(tmp_path / "index", index_hub)
    for t in (text, prompt):
        assert "The ground truth is outside the row" in t and "reads the env's own state" in t
        assert "env.rg_dataset.score_answer(answer=<the parsed completion>, entry=info['entry'])" in t
    stock_text, _ = _teacher_md(tmp_path / "stock", introspect(PY, "stock_arithmetic"))
    assert "The ground truth is outside the row" not in stock_text and "- `info.entry`" not in stock_text

    # the teacher: the key, the example and the format, as TEACHER.md words them
    key = re.search(r"- `info\.(\w+)`: a JSON object of the form the env's own entries have", text).group(1)
    example = json.loads(re.search(r"for its shape:\s*`(\{.*\})`", text).group(1))
    fmt = re.search(r"The answer format is the hub env's: (.*)", text).group(1)
    assert "<answer>...</answer>" in fmt
    rows = []
    for k, word in enumerate(["tundra", "beacon", "glacier", "prairie", "lagoon", "summit"]):
        entry = json.loads(json.dumps(example))
        if "word" in entry["metadata"]:
            entry.update(question=entry["question"].replace(example["metadata"]["word"], word), answer=word[::-1])
            entry["metadata"].update(word=word, length=len(word))
        else:
            terms = [k + 11, 2 * k + 30]
            entry.update(question="Add: " + " + ".join(map(str, terms)), answer=str(sum(terms)))
            entry["metadata"]["terms"] = terms
        reasoning = fmt[fmt.index("<answer>"):].split("...")[0] + entry["answer"] + "</answer>"
        rows.append({"question": entry["question"], "answer": entry["answer"],
                     "info": {**_gate_info(entry, reasoning, k), key: entry}})
    path = _write(tmp_path / "teacher.jsonl", rows)
    ok, detail = accurate_line(path, accuracy.score_hub_rows(PY, index_hub, path))
    assert ok, detail


# --------------------------------------------------------------------------------------------
# (d) control C on such an env

def _ctx(tmp_path: Path, hub: dict):
    import types

    best_dir = tmp_path / "iter_2"
    best_dir.mkdir()
    (best_dir / "dataset.jsonl").write_text("".join(json.dumps({"q": k}) + "\n" for k in range(12)))
    (best_dir / "hparams.json").write_text(json.dumps({"lr": 2e-6}))
    (best_dir / "aux_rewards.py").write_text("def tidy(completion, answer, info):\n    return 0.0\n")
    ctx = types.SimpleNamespace(rd=types.SimpleNamespace(path=tmp_path), hub=hub,
                                trainer=types.SimpleNamespace(python=PY),
                                state=types.SimpleNamespace(seed=0))
    return ctx, {"best_iter": 2, "dataset": "iter_2/dataset.jsonl"}


def test_control_c_draws_rows_carrying_their_truth_with_the_best_iterations_settings(tmp_path, index_hub):
    """Control C on an env whose truth lives in the env: as many resampled train rows as the
    best dataset, each carrying the scorer's entry for its answer as info.entry (as the
    iteration's rows did, so the generated env scores them), trained with the best iteration's
    hparams.json and aux_rewards.py."""
    from driver.arms import table

    ctx, best = _ctx(tmp_path, index_hub)
    dest = tmp_path / "run_c" / "dataset.jsonl"
    dest.parent.mkdir()
    said = table.untargeted(ctx, best, dest)
    assert "12 untargeted rows" in said and "hparams.json" in said and "aux_rewards.py" in said
    assert (dest.parent / "hparams.json").read_text() == (tmp_path / "iter_2" / "hparams.json").read_text()
    assert (dest.parent / "aux_rewards.py").exists()
    data = _data()
    rows = [json.loads(x) for x in dest.read_text().splitlines()]
    assert len(rows) == 12
    for row in rows:   # the entry the hub's own reward would score this row against
        assert row["info"]["entry"] == data[int(row["answer"])]


def test_control_c_is_skipped_with_its_reason_where_no_row_could_be_scored(tmp_path, index_hub):
    from driver.arms import table
    from driver.errors import ControlSkipped

    record = index_hub["reward_reads_env_state"]
    hub = {**index_hub, "reward_reads_env_state": {**record, "scorer": {**record["scorer"], "attr": "no_such_scorer"}}}
    ctx, best = _ctx(tmp_path, hub)
    dest = tmp_path / "run_c" / "dataset.jsonl"
    dest.parent.mkdir()
    with pytest.raises(ControlSkipped, match="no untargeted rows the hub rubric can score"):
        table.untargeted(ctx, best, dest)
    assert not dest.exists()


def test_round_trip_scores_rows_as_the_generated_env_does_from_their_entry():
    """The generators library's round_trip, which TEACHER.md offers the teacher, scores a row's
    reasoning the way the generated env will: from info.entry where the hub's reward reads the
    env's own data. A correct row passes; a template whose reasoning disagrees fails, named."""
    from generators import round_trip

    rows = _fresh_rows(6)
    round_trip("index_gym", rows)
    wrong = [{**r, "info": {**r["info"], "reasoning": "<answer>nope</answer>"}} for r in rows]
    with pytest.raises(AssertionError, match="round-trip failed for template d / reversal"):
        round_trip("index_gym", wrong)
