"""Tool-using envs through the loop: introspection finds the info keys a reward reads through
verifiers' message objects; the gate plays a row's tool calls with the hub's tools; the teacher
reads each call the student made with its arguments and result, and TEACHER.md states how a
winning tool call is written; the generated env keeps the hub's tools and turn limit; every
prime-rl server that plays the env gets the tool-call settings prime-rl resolves for the model;
and on --backend local a ToolEnv written outside the project is played, or refused before a run
directory exists.

The envs: tests/envs/tool_pick.py (a user's ToolEnv whose reward reads `completion[-1].role` and
`call.name` before `info["tool_names"]`; `style="dicts"` the same reward over dicts) and the
shipped environments/tool_calculator (`add`, `multiply`). The embedded trainer's own tool calls:
tests/test_tool_student.py.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

from conftest import ENVS, FAST, PRIME_RL_BIN, ROOT, cpu_user_env, current_env, driver, driver_env, run_dir_from, with_test_envs
from tests_support import python_c

PY = sys.executable
sys.path.insert(0, ENVS)
sys.path.insert(0, str(ROOT / "driver" / "envside"))
sys.path.insert(0, str(ROOT / "tests"))

WORD_CODES = {"tool_a": 7, "tool_b": 11, "tool_c": 13, "tool_d": 17}


# tests/envs on PYTHONPATH for the whole module (conftest)
pytestmark = pytest.mark.usefixtures("test_envs_on_path")


@pytest.fixture(scope="module")
def calc_hub():
    from driver.envs.introspect import introspect

    return introspect(PY, "tool_calculator", {"max_turns": 5})


def _code(tool: str, word: str) -> str:
    return f"{tool[-1].upper()}{len(word) * WORD_CODES[tool]}"


def _call(name: str, arguments) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}]}


def _pick_row(replies: list, word: str = "apple", tool: str = "tool_a") -> dict:
    return {"question": f"Call {tool} on '{word}' and answer the code it returns.", "answer": _code(tool, word),
            "info": {"tool_names": [tool], "word": word, "domain": "codes", "sub_domain": tool,
                     "difficulty": "easy", "structural_features": ["one_call"], "source": "template:t",
                     "reasoning": replies, "reasoning_depth": 1}}


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# --------------------------------------------------------------------------------------------
# Introspection

def test_introspection_finds_the_info_keys_a_reward_reads_through_message_objects_or_dicts():
    """`driver introspect tool_pick`: its reward reads `completion[-1].role` (an object's
    attribute) before `info["tool_names"]`: scored over plain dicts it raised there and
    introspection said "none found". Over verifiers' message objects both rewards reach info."""
    env = {**os.environ, "PYTHONPATH": with_test_envs(os.environ)}
    objects = driver(["introspect", "tool_pick"], env)
    dicts = driver(["introspect", "tool_pick", "--env-args", '{"style":"dicts"}'], env)
    for r in (objects, dicts):
        assert r.returncode == 0, r.stderr[-2000:]
        assert "info keys the rubric reads: tool_names" in r.stdout, r.stdout
        assert "tool-using" in r.stdout and "tools: tool_a, tool_b, tool_c, tool_d" in r.stdout
        assert "max_turns 3" in r.stdout


# --------------------------------------------------------------------------------------------
# The gate plays the row's tool calls with the hub's tools

def test_the_gate_plays_a_rows_tool_calls_and_shows_each_calls_arguments_and_result(tmp_path):
    """A winning row (the right tool on the row's word, then the code it returned) earns full
    reward; the wrong tool, or the right tool on the wrong word (each answering what its call
    returned), fails, and the gate's line shows the call with its arguments and result. The
    arguments may be a JSON object or its text."""
    from driver.gates import accuracy

    rows = [_pick_row([_call("tool_a", {"word": "apple"}), "A35"]),
            _pick_row([_call("tool_b", {"word": "apple"}), "B55"]),                 # the wrong tool
            _pick_row([_call("tool_a", {"word": "pear"}), "A28"]),                  # the wrong argument
            _pick_row([_call("tool_c", json.dumps({"word": "fig"})), "C39"], "fig", "tool_c")]
    scored = accuracy.score_rows(PY, "tool_pick", {}, _jsonl(tmp_path / "d.jsonl", rows))
    assert scored["ceiling"] == 1.0
    assert [r["reward"] for r in scored["rows"]] == [1.0, 0.0, 0.0, 1.0], scored
    assert scored["rows"][0]["errors"] == [] and scored["rows"][3]["errors"] == []
    assert """tool calls played: tool_b({"word": "apple"}) -> 'B55'""" in scored["rows"][1]["errors"]
    assert """tool calls played: tool_a({"word": "pear"}) -> 'A28'""" in scored["rows"][2]["errors"]
    n_bad, detail = accuracy.failures(scored)
    assert n_bad == 2 and "codes/tool_a: 2 rows, reward 0 of 1, lines 2, 3" in detail and """tool_b({"word": "apple"}) -> 'B55'""" in detail
    assert """tool_a({"word": "pear"}) -> 'A28'""" in detail


def test_a_malformed_tool_call_is_refused_by_the_row_schema(tmp_path):
    """A reply whose call's arguments are not JSON (or not an object) is not a well-formed row:
    the gate names the reply and the call, and the rubric never sees it."""
    from driver.envside import rows
    from driver.gates import dataset

    good = _pick_row([_call("tool_a", {"word": "apple"}), "A35"])
    bad_json = _pick_row([_call("tool_a", '{"word": "apple"'), "A35"])
    not_object = _pick_row([_call("tool_a", "[1, 2]"), "A35"])
    no_name = _pick_row([{"role": "assistant", "content": None, "tool_calls": [{"function": {"arguments": {}}}]}, "A35"])
    assert dataset.row_problem(good) == ""
    assert dataset.row_problem(bad_json) == "info.reasoning[0]: tool call tool_a: arguments is not JSON"
    assert dataset.row_problem(not_object) == "info.reasoning[0]: tool call tool_a: arguments must be a JSON object"
    assert dataset.row_problem(no_name).startswith('info.reasoning[0]: each tool call is {"id": "call_0"')
    path = _jsonl(tmp_path / "d.jsonl", [good, bad_json])
    kept, problems = dataset.load_rows(path)
    assert len(kept) == 1 and problems == ["line 2: info.reasoning[0]: tool call tool_a: arguments is not JSON"]
    assert [n for n, _ in rows.read_reasoned_rows(str(path))] == [1]


def test_generated_tool_calculator_rows_play_their_tool_call_and_earn_the_hub_rubrics_full_reward(tmp_path):
    """The family generator's rows: info.reasoning is the tool call (OpenAI's shape) and then the
    answer; the gate runs the call with the hub's tools, the episode earns full reward, and no
    reasoning depth covers more than 70% of a bucket."""
    from driver.gates import accuracy, dataset, rules
    from generators.tool_calculator import BUCKETS, FEATURE_DEFINITIONS, generate

    weakness = {"domains": [{"name": d, "severity": "high", "evidence": "e",
                             "sub_domains": [{"name": s} for d2, s in BUCKETS if d2 == d]}
                            for d in dict.fromkeys(d for d, _ in BUCKETS)],
                "allocations": {f"{d} / {s}": 30 for d, s in BUCKETS},
                "structural_features": [{"name": k, "definition": v} for k, v in FEATURE_DEFINITIONS.items()]}
    path = tmp_path / "dataset.jsonl"
    rows = generate(weakness, [], out=str(path), seed=3)
    assert len(rows) == 30 * len(BUCKETS) and all(dataset.row_problem(r) == "" for r in rows)
    for r in rows:
        i = r["info"]
        call, answer = i["reasoning"]
        assert call["tool_calls"][0]["function"] == {"name": i["op"], "arguments": {"a": i["a"], "b": i["b"]}}
        assert answer == f"<answer>{r['answer']}</answer>" and "tool_moves" not in i
    scored = accuracy.score_rows(PY, "tool_calculator", None, path)
    assert scored["ceiling"] == 1.0 and [x["reward"] for x in scored["rows"]] == [1.0] * len(rows), accuracy.failures(scored)
    rep = dataset.check(path, weakness, scored=scored)
    got = {n: (ok, why) for n, ok, why in rep.lines}
    for line in ("well_formed", "depth", "accurate"):
        assert got[rules.LINE[line].name][0], got[rules.LINE[line].name]


# --------------------------------------------------------------------------------------------
# What the teacher reads

class _Sampler:
    """The embedded trainer's sampler with the model's replies scripted: each turn's reply is the
    next text, as token ids the student's tokenizer decodes back to it."""

    def __init__(self, tok, texts: list[str]):
        self.tok, self.texts = tok, iter(texts)

    async def reply(self, prompt_ids: list[int]) -> dict:
        ids = self.tok.encode(next(self.texts), add_special_tokens=False) + [self.tok.eos_token_id]
        return {"ids": ids, "logps": [0.0] * len(ids), "truncated": False}


def _student_episode(env, row: dict, texts: list[str]) -> dict:
    """One episode of `row` played by the env's rollout loop through the embedded trainer's
    student client (its text parsed for tool calls: rl_contract/tool_calls.py), as the train
    rollout row the trainer writes."""
    from embedded_trainer import episodes, recipe
    from embedded_trainer.rollouts import rollout_row

    tok = recipe.build_tokenizer()
    client = episodes.student_client(tok, _Sampler(tok, texts), 1024)

    async def go():
        state = await env.rollout({"prompt": row["prompt"], "example_id": row["example_id"],
                                   "answer": row["answer"], "info": row["info"]}, client, "student", {})
        await env.rubric.score_rollout(state)
        return state

    st = asyncio.run(go())
    sc = {"reward": float(st["reward"]), "metrics": dict(st["metrics"]), "scoring_ms": 0.0,
          "completion": [episodes.as_dict(m) for m in st["completion"]], "stop_condition": st.get("stop_condition"),
          "error": None}
    return rollout_row(row, "", False, sc, "tool_calculator", 0.0, 1.0)


@pytest.mark.extended   # keeps the main suite inside its 5 minutes
def test_the_teachers_failures_list_each_tool_call_the_student_wrote_with_its_arguments_and_result(tmp_path):
    """The student writes its calls as Hermes text; the trainer parses them, the env runs them,
    and failures.jsonl lists each call (its turn, name, arguments as an object, the tool's
    result), the same calls the gate's rows are written with."""
    from types import SimpleNamespace

    import verifiers as vf

    from driver import dialects
    from driver.phases import iteration
    from rl_contract.classic import ClassicLayout
    from tool_calculator.problems import call_text, result

    env = vf.load_environment("tool_calculator", num_train_examples=4, num_eval_examples=1)
    row = dict(list(env.get_dataset())[0])
    i = row["info"]
    wrong = i["a"] + 1
    got = result(i["op"], wrong, i["b"])
    lost = _student_episode(env, row, [call_text(i["op"], wrong, i["b"]), f"<answer>{got}</answer>"])
    won = _student_episode(env, row, [call_text(i["op"], i["a"], i["b"]), f"<answer>{row['answer']}</answer>"])
    assert (lost["reward"], won["reward"]) == (0.0, 1.0)
    ctx = SimpleNamespace(iter_dir=lambda k: tmp_path / f"iter_{k}", dialect=dialects.get("classic"),
                          state=SimpleNamespace(teacher_retries=3, iter_0_step=1, steps_per_run=1), say=print)
    layout = ClassicLayout()
    path = layout.train_file(ctx.iter_dir(0) / "prime_out", layout.rows_step(1))
    path.parent.mkdir(parents=True)
    _jsonl(path, [lost, won])
    failures, _, _ = iteration.write_failures(ctx, 1)
    first = json.loads(failures.read_text().splitlines()[0])
    assert first["reward"] == 0.0 and first["turns"] == 2
    assert first["tool_calls"] == [{"turn": 1, "name": i["op"], "arguments": {"a": wrong, "b": i["b"]},
                                    "result": str(got)}]
    assert [m["role"] for m in first["completion"]] == ["assistant", "tool", "assistant"]


def _teacher_md(tmp_path: Path, hub: dict) -> str:
    from driver.errors import WaitingForTeacher
    from driver.teachers import Brief
    from driver.teachers.agent import AgentTeacher

    d = tmp_path / "iter_1"
    d.mkdir(parents=True, exist_ok=True)
    (tmp_path / "failures.jsonl").write_text(json.dumps({"idx": 0, "step": 1, "reward": 0.0}) + "\n")
    brief = Brief(run_dir=tmp_path, iter_dir=d, iteration=1, hub=hub, failures_path=tmp_path / "failures.jsonl",
                  failures_step="train_step_1 of iter_0", eval_accs={"iter_0": 0.3})
    with pytest.raises(WaitingForTeacher) as w:
        AgentTeacher().teach(brief)
    return " ".join(Path(w.value.brief_path).read_text().split())


def test_teacher_md_states_how_a_winning_tool_call_is_written(tmp_path, calc_hub):
    text = _teacher_md(tmp_path, calc_hub)
    assert "this env runs the student's tool calls with its own tools (`add`, `multiply`" in text
    assert ("A failure's `tool_calls` lists each call the student made: its `turn`, `name`, "
            "`arguments` and the `result` the env gave it") in text
    assert ('`{"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": "function", '
            '"function": {"name": "add", "arguments": {...}}}]}`') in text
    assert "the gate runs the calls with the hub's tools" in text
    plain = {**calc_hub, "interaction": {**calc_hub["interaction"], "tools": []}}
    assert "A failure's `tool_calls`" not in _teacher_md(tmp_path / "plain", plain)


# --------------------------------------------------------------------------------------------
# The generated env

GENERATED_CHECK = r"""
import json, sys
sys.path.insert(0, sys.argv[3])
import episodes, verifiers as vf
gen, hub = vf.load_environment(sys.argv[1]), vf.load_environment("tool_calculator", **json.loads(sys.argv[2]))
row = dict(gen.get_dataset()[0])
moves = [json.loads(r) if r.startswith("{") else r for r in row["info"]["reasoning"]]
out = {"class": [type(gen).__name__, type(hub).__name__], "max_turns": [gen.max_turns, hub.max_turns],
       "same_tools": len(gen.tools) == len(hub.tools) and all(g is h for g, h in zip(gen.tools, hub.tools)),
       "tool_defs": [json.dumps(gen.tool_defs, sort_keys=True, default=str) == json.dumps(hub.tool_defs, sort_keys=True, default=str),
                     [t.name if hasattr(t, "name") else t["function"]["name"] for t in gen.tool_defs]],
       "tool_map": sorted(gen.tool_map) == sorted(hub.tool_map),
       "gen": episodes.play(gen, row, episodes.moves_reply(moves)),
       "hub": episodes.play(hub, row, episodes.moves_reply(moves))}
print(json.dumps(out, default=str))
"""


def test_a_generated_env_has_the_hubs_tools_and_turn_limit_and_gives_the_same_reward(tmp_path, calc_hub):
    """An iteration's env, installed from generated rows: the hub's class, the very tool
    callables and schemas of the hub, its turn limit (5, the hub's loader argument: ToolEnv's
    default is 10, the loader's 3), and a row's winning replies played through it and the hub
    give the same episode and full reward."""
    from driver.envs.install import cleanup, install_generated
    from driver.envs.packages import write_package
    from generators.tool_calculator import untargeted

    rows = untargeted(6, out=str(tmp_path / "d.jsonl"), seed=2)
    name = f"tool_calculator_t{uuid.uuid4().hex[:6]}_iter_1"
    try:
        install_generated(PY, write_package(tmp_path, name, calc_hub, tmp_path / "d.jsonl"), len(rows))
        r = python_c(GENERATED_CHECK, name, json.dumps({"max_turns": 5}), ROOT / "driver" / "envside")
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout.splitlines()[-1])
    finally:
        cleanup(PY, name)
    assert out["class"] == ["ToolEnv", "ToolEnv"] and out["max_turns"] == [5, 5]
    assert out["same_tools"] and out["tool_map"] and out["tool_defs"] == [True, ["add", "multiply"]]
    assert out["gen"]["completion"] == out["hub"]["completion"]
    assert [m["role"] for m in out["gen"]["completion"]] == ["assistant", "tool", "assistant"]
    assert out["gen"]["reward"] == out["hub"]["reward"] == 1.0
    assert out["gen"]["metrics"]["total_tool_calls"] == 1.0


# --------------------------------------------------------------------------------------------
# The current generation: a v1 taskset whose tools are toolsets (MCP servers)

# a shared toolset's setting a user gives with --env-args: the generated taskset must build the
# hub's toolset with it too
TOOL_URL = "http://127.0.0.1:9/mcp"

TASKSET_CHECK = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
from verifiers.v1.utils.loaders import taskset_class, taskset_config_type
import taskset as job

name = sys.argv[1]
out = {}
for tid in ("tool_calculator", name):
    cls = taskset_class(tid)
    sent = taskset_config_type(tid)(id=tid)
    # as prime-rl's env server gets it: the config sent whole and read back (verifiers v1
    # configs/env.py:44, SerializeAsAny), then the taskset built from it
    ts = cls(type(sent).model_validate_json(sent.model_dump_json()))
    servers = job.toolsets(tid, ts.config)
    out[tid] = {"servers": [f"{type(s).__module__}.{type(s).__qualname__}" for s in servers],
                "configs": [s.config.model_dump(mode="json") for s in servers],
                "tools": {n: f"{type(s).__qualname__}.{fn.__name__}" for n, (s, fn) in job.advertised(servers).items()},
                "task_class_base": [b.__name__ for b in type(next(iter(ts))).__mro__[:3]],
                "rows": sum(1 for _ in ts)}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def calc_taskset_hub():
    from driver.envs.envside import TASKSET
    from driver.envs.introspect import introspect

    return introspect(PY, "tool_calculator", {"calculator": {"url": TOOL_URL}}, kind=TASKSET)


def test_a_taskset_with_toolsets_is_introspected_as_tool_using_with_its_advertised_tools(calc_taskset_hub):
    hub = calc_taskset_hub
    assert hub["kind"] == "taskset" and hub["env_class"] == "ToolCalculatorTaskset"
    assert hub["interaction"]["kind"] == "tools" and hub["interaction"]["tools"] == ["add", "multiply"]
    from driver.envs.describe import interaction_line

    assert "tool-using" in interaction_line(hub) and "tools: add, multiply" in interaction_line(hub)


def test_driver_introspect_taskset_names_its_splits_rewards_and_tools(tmp_path):
    """`driver introspect ENV --taskset`, as a current prime-rl user asks: the taskset's class
    and Task, its rewards with their weights, the split field's values the driver trains and
    reports on, and its episodes: tool-using, the tools as the agent is offered them, the turn
    limit the driver's agent leaves unset."""
    from conftest import driver_env

    r = driver(["introspect", "tool_calculator", "--taskset"], driver_env(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "tool_calculator: ToolCalculatorTaskset · task CalculatorTask" in out
    assert "rewards: correct_answer×1.0, tool_calls×0.0" in out
    assert "splits (split): train {'split': 'train'} · eval {'split': 'test'}" in out
    assert ("episodes: tool-using (the env runs the model's tool calls until it stops); no turn limit "
            "(the agent's max_turns, which the driver leaves unset); tools: add, multiply") in out
    assert "info keys the rubric reads: not looked for" in out


def test_the_taskset_gate_plays_a_rows_tool_calls_with_the_hubs_toolset(tmp_path, calc_taskset_hub):
    """The rows' winning replies on the taskset: the call is run by the hub's CalculatorToolset
    and its result comes back as a tool message before the answer; a call to the wrong tool, a
    tool that does not exist, or arguments the tool's signature refuses earn nothing."""
    from driver.gates.accuracy import score_hub_rows
    from generators.tool_calculator import untargeted, winning_replies

    rows = untargeted(4, out=str(tmp_path / "d.jsonl"), seed=2)
    i = rows[0]["info"]
    other = "add" if i["op"] == "multiply" else "multiply"
    wrong_tool = winning_replies(other, i["a"], i["b"])[:1] + [f"<answer>{rows[0]['answer']}</answer>"]
    wrong_tool[0]["tool_calls"][0]["function"]["name"] = "divide"
    bad = [{**rows[0], "info": {**i, "reasoning": r}} for r in (
        winning_replies(other, i["a"], i["b"]),                   # the other tool, its result answered
        [_call(i["op"], {"a": "x", "b": 2}), "<answer>3</answer>"],   # FastMCP refuses a = "x"
        wrong_tool[:1] + ["<answer>0</answer>"])]                # an unknown tool
    scored = score_hub_rows(PY, calc_taskset_hub, _jsonl(tmp_path / "all.jsonl", rows + bad))
    assert scored["ceiling"] == 1.0
    assert [r["reward"] for r in scored["rows"]] == [1.0] * 4 + [0.0] * 3, scored


def test_the_gates_tool_calls_and_the_doubles_tool_records_match_a_real_mcp_client():
    """ToolCalculator's toolset served by FastMCP (the `mcp` package verifiers v1 requires) and
    reached by a real MCP client session in memory, as the null harness reaches it over HTTP
    (program.py:74-139@a60a606): the tools it lists are the current double's trace records
    (name, description, schema), and each call's result as the harness reads it is what the
    gate's call gives: a result, arguments the signature refuses, arguments it lacks, a tool
    no server offers (the harness's own text)."""
    from mcp.shared.memory import create_connected_server_and_client_session
    from verifiers.v1.harnesses.null.program import mcp_content_to_chat_content
    from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

    import taskset as job
    import trainer_double_current

    cls = taskset_class("tool_calculator")
    config = taskset_config_type("tool_calculator")(id="tool_calculator")
    calls = [("add", {"a": 2, "b": 3}), ("multiply", {"a": 12, "b": 7}), ("add", {"a": "x", "b": 2}),
             ("multiply", {"a": 1, "c": 2})]

    async def go():
        tools = await job.served(job.toolsets("tool_calculator", config))
        app = next(iter(tools.values()))[0]
        async with create_connected_server_and_client_session(app._mcp_server) as session:
            listed = [{"name": t.name, "description": t.description, "parameters": t.inputSchema}
                      for t in (await session.list_tools()).tools]
            real = [mcp_content_to_chat_content((await session.call_tool(n, a)).content) for n, a in calls]
        gate = [await job.run_tool(tools, n, json.dumps(a)) for n, a in calls]
        return listed, real, gate, await job.run_tool(tools, "divide", "{}")

    listed, real, gate, unknown = asyncio.run(go())
    assert listed == trainer_double_current.advertised_tools(cls, config)
    assert gate == real
    assert real[:2] == ["5", "84"] and real[2].startswith("Error executing tool add: 1 validation error")
    assert "Field required" in real[3] and unknown == "error: unknown tool 'divide'"


def test_a_generated_taskset_has_the_hubs_toolsets_built_from_the_hubs_settings(tmp_path, calc_taskset_hub):
    """An iteration's taskset package, installed from generated rows: its tasks are the hub's
    Task class, its rollouts reach the hub's own toolset class, built with the settings the run
    gave the hub (--env-args), and advertise the same tools answered by the same methods."""
    from driver.envs.envside import TASKSET
    from driver.envs.install import cleanup, install_generated
    from driver.envs.packages import write_package
    from generators.tool_calculator import untargeted

    rows = untargeted(6, out=str(tmp_path / "d.jsonl"), seed=2)
    name = f"tool_calculator_t{uuid.uuid4().hex[:6]}_iter_1"
    try:
        install_generated(PY, write_package(tmp_path, name, calc_taskset_hub, tmp_path / "d.jsonl"), len(rows),
                          kind=TASKSET)
        r = python_c(TASKSET_CHECK, name, ROOT / "driver" / "envside")
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout.splitlines()[-1])
    finally:
        cleanup(PY, name)
    hub, gen = out["tool_calculator"], out[name]
    assert gen["servers"] == hub["servers"] == ["tool_calculator.taskset.CalculatorToolset"]
    assert gen["tools"] == hub["tools"] == {"add": "CalculatorToolset.add", "multiply": "CalculatorToolset.multiply"}
    # the hub's setting reaches the generated taskset's toolset; the hub itself, loaded bare, has none
    assert gen["configs"][0]["url"] == TOOL_URL and hub["configs"][0]["url"] is None
    assert gen["task_class_base"][1] == "CalculatorTask" and gen["rows"] == 6


INSTALLED_TOOLS = r"""
import json, sys
sys.path.insert(0, sys.argv[3])
name, dialect = sys.argv[1], sys.argv[2]
if dialect == "classic":
    import verifiers as vf
    gen, hub = vf.load_environment(name), vf.load_environment("tool_calculator")
    out = {n: [f"{t.__module__}.{t.__qualname__}" for t in env.tools] for n, env in (("gen", gen), ("hub", hub))}
else:
    import taskset as job
    from verifiers.v1.utils.loaders import taskset_class, taskset_config_type
    out = {}
    for n, tid in (("gen", name), ("hub", "tool_calculator")):
        ts = taskset_class(tid)(taskset_config_type(tid)(id=tid))
        out[n] = sorted(f"{type(s).__qualname__}.{fn.__name__}" for s, fn in job.advertised(job.toolsets(tid, ts.config)).values())
print(json.dumps(out))
"""


@pytest.mark.extended   # a whole run per dialect (about 45 s each on 2 cores)
@pytest.mark.parametrize("dialect", ["classic", "current"])
def test_a_whole_run_on_the_tool_env_with_the_trainer_double_installs_iterations_with_the_hubs_tools(tmp_path, dialect):
    """ToolCalculator through the loop on prime-rl's doubles, the classic environment on the
    classic dialect and the taskset on the current one: the built-in teacher's rows (winning
    replies that call a tool) pass the gate, every arm's env is installed with the hub's tools,
    and on the current dialect the train rollouts of an iteration offer the agent the same
    tools (names, descriptions, schemas) as iter_0's (verifiers builds them from the generated
    taskset's toolsets); that they are answered by the hub's own methods, INSTALLED_TOOLS shows."""
    from driver import dialects

    env = current_env(tmp_path) if dialect == "current" else driver_env(tmp_path)
    r = driver(["run", "--dataset", "tool_calculator", "--max-iters", "2", "--seed", "3", *FAST,
                "--eval-examples", "40", "--runs-dir", str(tmp_path / "runs")], env)
    assert r.returncode == 0, r.stderr[-4000:]
    run_dir = run_dir_from(r.stdout)
    hub = json.loads((run_dir / "hub_env.json").read_text())
    assert hub["interaction"]["kind"] == "tools" and hub["interaction"]["tools"] == ["add", "multiply"]
    assert json.loads((run_dir / "iter_1" / "gate_report.json").read_text())["passed"]
    for arm in ("iter_1", "run_a_best_from_iter0", "run_c_untargeted_from_iter0"):
        pkg = next(p for p in (run_dir / arm).iterdir() if p.is_dir() and p.name.startswith("tool_calculator_"))
        got = python_c(INSTALLED_TOOLS, pkg.name, dialect, ROOT / "driver" / "envside")
        assert got.returncode == 0, got.stderr[-3000:]
        tools = json.loads(got.stdout.splitlines()[-1])
        assert tools["gen"] == tools["hub"] and len(tools["hub"]) == 2, (arm, tools)
    if dialect == "current":
        # each train episode's end is read from its trace (the double's episodes complete)
        assert "[iter_0] train episodes: 768, ended by completed 768" in r.stderr
        D = dialects.get("current")

        def offered(arm: str) -> set:
            out = run_dir / arm / "prime_out"
            steps = D.train_steps(out, 0, 10)
            return {json.dumps(t["tools"], sort_keys=True) for s in steps
                    for t in (json.loads(line)["traces"][0] for line in D.train_file(out, s).read_text().splitlines())}

        tools = offered("iter_0")
        assert offered("iter_1") == tools and len(tools) == 1
        assert [(t["name"], t["description"], sorted(t["parameters"]["required"])) for t in json.loads(tools.pop())] == [
            ("add", "The sum of a and b.", ["a", "b"]), ("multiply", "The product of a and b.", ["a", "b"])]


# --------------------------------------------------------------------------------------------
# prime-rl: the servers' tool-call settings

# what prime-rl resolves "auto" to (utils/parsers.py's map: tests/prime_rl_tool_calls.py cites it)
AUTO = {"Qwen/Qwen3-0.6B": "hermes", "Qwen/Qwen3.5-9B": "qwen3_coder", "zai-org/GLM-4.5-Air": "glm45",
        "my-org/qwen-finetune": None}


def _knobs(model: str):
    from driver.run.model import Knobs

    return Knobs.for_backend("prime_rl", model=model, batch_size=256, rollouts_per_example=8, steps_per_run=3,
                             eval_examples=20, wandb="off", eval_draws=0)


def _rendered(dialect: str, hub: dict, model: str, shared: dict | None = None) -> dict:
    """An iteration's training config as the driver renders it, composed with a canonical
    config's [inference] (`shared`), as a launch composes canonical_shared.toml."""
    from driver import dialects

    D = dialects.get(dialect)
    text = D.render_run(arm="iter_1", purpose="p", hub=hub, knobs=_knobs(model), eval_knobs=None,
                        train_envs=[D.hub_train_block(hub)], resume_step=None)
    cfg = tomllib.loads(text)
    assert "tool_call_parser" not in text and "enable_auto_tool_choice" not in text   # prime-rl's own
    if shared:
        cfg["inference"] = {**cfg.get("inference", {}), **shared}
    return cfg


@pytest.mark.parametrize("model", list(AUTO))
def test_the_classic_training_server_gets_the_parser_prime_rl_resolves_for_the_model(tmp_path, model, calc_hub):
    import trainer_double

    cfg = _rendered("classic", calc_hub, model)
    trainer_double.write_inference_config(cfg, tmp_path)
    served = tomllib.loads((tmp_path / "configs" / "inference.toml").read_text())
    assert served["model"]["name"] == model
    assert served["model"].get("tool_call_parser") == AUTO[model]
    # a canonical config's explicit parser (prime-rl's wiki-search sets hermes) wins over the map
    cfg = _rendered("classic", calc_hub, model, {"model": {"tool_call_parser": "hermes"}})
    trainer_double.write_inference_config(cfg, tmp_path)
    assert tomllib.loads((tmp_path / "configs" / "inference.toml").read_text())["model"]["tool_call_parser"] == "hermes"


@pytest.mark.extended   # keeps the main suite inside its 5 minutes
def test_the_current_training_and_final_eval_servers_get_the_settings_prime_rl_resolves(tmp_path):
    """Current prime-rl: `rl` resolves [inference] into R/configs/inference.json and starts
    training's server on it; the final-weights eval starts `uv run inference @` the same file.
    Both servers get the parser for the model, auto tool choice on exactly when one is set."""
    import trainer_double_current

    from driver import dialects

    # the settings follow the model, whatever the env (the current double evaluates a taskset)
    hub = {"env_id": "stock_arithmetic", "eval_size": 200, "train_args": {"split": "train"},
           "eval_args": {"split": "test"}}
    for name, parser in AUTO.items():
        assert trainer_double_current.resolved_inference(_rendered("current", hub, name))["vllm"].get(
            "tool_call_parser") == parser
    explicit = _rendered("current", hub, "my-org/qwen-finetune", {"vllm": {"tool_call_parser": "hermes"}})
    assert trainer_double_current.resolved_inference(explicit)["vllm"]["tool_call_parser"] == "hermes"
    model = "Qwen/Qwen3-0.6B"
    served = trainer_double_current.resolved_inference(_rendered("current", hub, model))
    path = tmp_path / "inference.json"
    path.write_text(json.dumps(served))
    b = tmp_path / "arm" / "run" / "broadcasts" / "step_3"
    b.mkdir(parents=True)
    (b / "model.safetensors").write_text(json.dumps({"step": 3, "skill": 0.9}))
    (b / "STABLE").write_text("")
    evals = tmp_path / "evals.toml"
    evals.write_text(dialects.get("current").render_final_eval(hub, _knobs(model), b.parent, 3, tmp_path / "OUT",
                                                               served=served))
    env = {**os.environ, "PATH": f"{PRIME_RL_BIN}{os.pathsep}{os.environ['PATH']}",
           "DOUBLE_SERVER_DIR": str(tmp_path / "servers"), "DOUBLE_READY_TIMEOUT_SECONDS": "20"}
    r = subprocess.run([PY, "-m", "rl_contract.final_eval", "--prime-rl-dir", str(tmp_path), "--inference-config",
                        str(path), "@", str(evals), "--output-dir", str(tmp_path / "OUT")],
                       env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    log = (tmp_path / "OUT" / "inference.log").read_text()
    assert f"serving {model} on " in log and "tool_call_parser=hermes enable_auto_tool_choice=True" in log
    # a model the map lacks: its server starts with no parser and auto tool choice off
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps(trainer_double_current.resolved_inference(
        _rendered("current", hub, "my-org/qwen-finetune"))))
    server = subprocess.Popen(["uv", "run", "inference", "@", str(plain)], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert "serving my-org/qwen-finetune on " in line, line + server.stderr.read()
    assert "tool_call_parser=None enable_auto_tool_choice=False" in line


# --------------------------------------------------------------------------------------------
# --backend local: a ToolEnv written outside the project

TOOL_PICK_SOLVER = '''
def next_move(messages, info):
    """Call the row's tool on its word, then answer the code it returned."""
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    return {"role": "assistant", "content": None,
            "tool_calls": [{"name": info["tool_names"][0], "arguments": {"word": info["word"]}}]}
'''


def test_on_the_local_backend_a_users_tool_env_is_played_and_the_student_it_lacks_is_refused_before_a_run_dir(tmp_path, monkeypatch):
    """tool_pick on --backend local: the embedded trainer plays tool envs, so the env itself is
    not refused; it ships no warm start for the built-in student, so the run is refused before
    a run directory exists, naming what it lacks and the solver route. That route plays its
    episodes: a solver's tool calls run by the env, all 18 train episodes won by the env's
    reward (which reads message objects)."""
    import student

    from driver.backends import local
    from driver.envs.introspect import introspect

    hub = introspect(PY, "tool_pick")
    assert hub["interaction"]["kind"] == "tools" and local.Local(PY, None).refuse_episodes(hub) is None
    runs = tmp_path / "runs"
    r = driver(["run", "--dataset", "tool_pick", "--backend", "local", "--max-iters", "1", "--runs-dir", str(runs)],
               cpu_user_env(tmp_path))
    assert r.returncode != 0
    assert "cannot be built for tool_pick" in r.stderr and "has no warm_start_corpus" in r.stderr, r.stderr[-2000:]
    assert "--student-solver solve.py" in r.stderr and "nothing was created" in r.stderr
    assert not runs.exists() or not any(runs.iterdir())
    monkeypatch.setenv("EMBEDDED_TRAINER_CACHE", str(tmp_path / "cache"))
    (tmp_path / "solve.py").write_text(TOOL_PICK_SOLVER)
    got = student.solver_corpus({"env_id": "tool_pick", "env_args": {}, "solver": str(tmp_path / "solve.py"),
                                 "min_rows": 10, "min_share": 0.5})
    assert (got["train_rows"], got["kept"], got["raised"]) == (18, 18, 0), got
    traj = json.loads(open(got["path"], encoding="utf-8").readline())["info"]["reference_trajectory"]
    assert [m["role"] for m in traj] == ["assistant", "tool", "assistant"]
