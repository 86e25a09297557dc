"""Tool-using envs on the embedded trainer: the student's tool calls are parsed as vLLM's hermes
parser parses them (malformed ones included), the env runs its tools and their results come back
through the student's chat template, the loss and log-probs read the student's tokens only, and
a --student-solver's tool calls become the warm start. The env: environments/tool_calculator
(verifiers' ToolEnv with `add` and `multiply`); tests/envs/tool_lookup.py is a ToolEnv written
outside the project."""
from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import ENVS, ROOT

sys.path.insert(0, ENVS)
sys.path.insert(0, str(ROOT / "driver" / "envside"))


@pytest.fixture(scope="module")
def calc():
    import verifiers as vf

    return vf.load_environment("tool_calculator", num_train_examples=20, num_eval_examples=4)


# --------------------------------------------------------------------------------------------
# The format: vLLM's hermes parser

def test_tool_calls_are_parsed_as_vllms_hermes_parser_parses_them():
    from rl_contract.tool_calls import parse

    call = '{"name": "multiply", "arguments": {"a": 12, "b": 7}}'
    assert parse("<answer>84</answer>") == ("<answer>84</answer>", [])
    # the text before the first call is the content; the calls' arguments are JSON text
    assert parse(f"Let me see. <tool_call>{call}</tool_call>") == (
        "Let me see. ", [{"name": "multiply", "arguments": '{"a": 12, "b": 7}'}])
    # no text before: content None; two calls; whitespace around the JSON; text after is dropped
    two = parse(f'<tool_call>\n{call}\n</tool_call><tool_call>{{"name": "add", "arguments": {{"a": 1, "b": 2}}}}</tool_call> ok')
    assert two == (None, [{"name": "multiply", "arguments": '{"a": 12, "b": 7}'},
                          {"name": "add", "arguments": '{"a": 1, "b": 2}'}])
    # a call left open runs to the end of the text
    assert parse(f"<tool_call>{call}") == (None, [{"name": "multiply", "arguments": '{"a": 12, "b": 7}'}])
    # malformed: JSON that does not parse, no arguments, not an object: no call at all, the text stays
    for bad in ['<tool_call>{"name": "add", "arguments": {"a": 1}</tool_call>',
                '<tool_call>{"name": "add"}</tool_call>', "<tool_call>[1, 2]</tool_call>",
                f'<tool_call>{call}</tool_call><tool_call>{{"name": "add", </tool_call>']:
        assert parse(bad) == (bad, [])
    # arguments are dumped as vLLM dumps them (ensure_ascii=False)
    assert parse('<tool_call>{"name": "f", "arguments": {"w": "café"}}</tool_call>')[1][0]["arguments"] == '{"w": "café"}'


def test_the_chat_template_renders_text_as_before_and_tool_calls_as_the_parser_reads_them():
    """System, user and assistant text render byte for byte as under the template the built
    students are named by (so the shipped ones keep their names); an assistant's tool calls
    render in the format the parser reads back as the same calls; a tool result is a tool turn."""
    from embedded_trainer import recipe
    from rl_contract import tool_calls

    tok = recipe.build_tokenizer()
    text = [{"role": "system", "content": "S"}, {"role": "user", "content": "What is 3 times 4?"},
            {"role": "assistant", "content": "<answer>12</answer>"}, {"role": "user", "content": "again"}]
    now = tok.apply_chat_template(text, add_generation_prompt=True, tokenize=False)
    tok.chat_template = recipe.KEYED_TEMPLATE
    assert tok.apply_chat_template(text, add_generation_prompt=True, tokenize=False) == now
    tok.chat_template = recipe.CHAT_TEMPLATE
    for built in recipe.PREBUILT.iterdir():   # every shipped student's name is still its recipe's key
        marker = json.loads((built / recipe.MARKER).read_text())
        assert recipe.model_dir_name(marker["recipe"], marker["env"]) == built.name
    said = tool_calls.as_dict({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c0", "name": "multiply", "arguments": '{"a": 3, "b": 4}'}]})
    episode = text[:2] + [said, {"role": "tool", "content": "12", "tool_call_id": "c0"}]
    rendered = tok.apply_chat_template(episode, add_generation_prompt=True, tokenize=False)
    turn = rendered[len(tok.apply_chat_template(text[:2], add_generation_prompt=True, tokenize=False)):]
    assert turn == ('<tool_call>{"name": "multiply", "arguments": {"a": 3, "b": 4}}</tool_call><|end|>'
                    "<|tool|>12<|end|><|assistant|>")
    assert tool_calls.parse(turn.split("<|end|>")[0]) == (None, [{"name": "multiply", "arguments": '{"a": 3, "b": 4}'}])


# --------------------------------------------------------------------------------------------
# The embedded trainer plays a tool env

def _memorized(tok, row, traj, steps=150):
    """A one-layer student that has learned one episode by heart (SFT on it alone): greedy, it
    replays it, tool call and answer, through the env's own turns."""
    import torch

    from embedded_trainer import recipe

    spec = recipe.parse_recipe(f"builtin:tiny-char-qwen2?sft_steps={steps}&sft_batch=1&hidden_size=32"
                               "&layers=1&heads=2&ffn=64&sft_lr=0.01")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = recipe.build_model(spec, len(tok))
        recipe.sft(model, recipe.sft_examples([{"prompt": row["prompt"], "info": {"reference_trajectory": traj}}],
                                              tok), spec, log=lambda *a: None)
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def test_the_student_calls_a_tool_the_env_runs_it_and_the_loss_reads_its_own_tokens_only(calc):
    import torch

    from embedded_trainer import recipe
    from embedded_trainer.rollouts import render_prompt, rollout_row, sample_and_score
    from tool_calculator import problems

    tok = recipe.build_tokenizer()
    row = list(calc.get_dataset())[0]
    i = row["info"]
    want = problems.result(i["op"], i["a"], i["b"])
    model = _memorized(tok, row, problems.trajectory([(i["op"], i["a"], i["b"])], want))
    prompt = render_prompt(tok, row["prompt"])
    got = sample_and_score(model, tok, [prompt], [calc], [row], 1, 80, 0.0, torch.Generator().manual_seed(0), 1024)
    sc = got.scores[0]
    assert sc["reward"] == 1.0 and sc["metrics"]["total_tool_calls"] == 1.0, sc
    call, result, answer = sc["completion"]
    assert call["content"] is None and call["tool_calls"][0]["function"] == {
        "name": i["op"], "arguments": json.dumps({"a": i["a"], "b": i["b"]})}
    assert result == {"role": "tool", "content": str(want), "tool_call_id": call["tool_calls"][0]["id"]}
    assert answer == {"role": "assistant", "content": f"<answer>{want}</answer>"}
    # one sequence: the student's tokens (mask 1, log-probs kept) and the tool turn between them (mask 0)
    n = int(got.lengths[0])
    ids, mask = got.tokens[0].tolist(), got.mask[0].tolist()
    assert tok.decode(prompt + ids[:len(mask) - mask[::-1].index(True)]) == tok.apply_chat_template(
        row["prompt"] + [call, result, answer], tokenize=False)
    own = tok.decode([t for t, m in zip(ids, mask) if m])
    assert own == f'{problems.call_text(i["op"], i["a"], i["b"])}<|end|><answer>{want}</answer><|end|>'
    assert sum(mask) == n and f"<|tool|>{want}<|end|><|assistant|>" in tok.decode([t for t, m in zip(ids, mask) if not m])
    assert all(lp == 0.0 for lp, m in zip(got.logps[0].tolist(), mask) if not m)
    # the train rollout row holds the call and the tool's result; the teacher's text shows the call
    out = rollout_row(row, got.texts[0], got.truncated[0], sc, "tool_calculator", 0.0, 1.0)
    assert out["completion"][0]["tool_calls"] and out["completion"][1]["role"] == "tool"
    assert got.texts[0] == problems.call_text(i["op"], i["a"], i["b"]) + f"\n<answer>{want}</answer>"


def test_a_malformed_tool_call_stays_text_and_calls_nothing(calc):
    """The student writes a call whose JSON does not parse: as under vLLM, no tool call is made,
    the text is the reply's content, and ToolEnv ends the episode (a reply without calls)."""
    from embedded_trainer import recipe
    from embedded_trainer.rollouts import render_prompt, sample_and_score

    tok = recipe.build_tokenizer()
    row = list(calc.get_dataset())[1]
    bad = '<tool_call>{"name": "add", "arguments": {"a": 1</tool_call>'
    model = _memorized(tok, row, [{"role": "assistant", "content": bad}], steps=120)
    got = sample_and_score(model, tok, [render_prompt(tok, row["prompt"])], [calc], [row], 1, 80, 0.0, None, 1024)
    sc = got.scores[0]
    assert sc["completion"] == [{"role": "assistant", "content": bad}]
    assert sc["stop_condition"] == "no_tools_called" and sc["metrics"]["total_tool_calls"] == 0.0
    assert sc["reward"] == 0.0


def test_the_local_backend_plays_tool_envs_and_refuses_a_kind_it_does_not_know():
    from driver.backends import local

    backend = local.Local("python", None)
    assert backend.refuse_episodes({"interaction": {"kind": "tools", "tools": ["lookup"]}}) is None
    why = backend.refuse_episodes({"env_id": "x", "env_class": "X", "interaction": {"kind": "tasks"}})
    assert "'tasks'" in why and "Nothing was created" in why and "--backend prime_rl" in why


# --------------------------------------------------------------------------------------------
# The solver route: next_move's tool calls become the warm start

SOLVER = '''
import json

def next_move(messages, info):
    """Call the tool the row names, then answer its result: a message dict or Hermes text."""
    last = messages[-1]
    if last["role"] == "tool":
        return "<answer>" + last["content"] + "</answer>"
    call = {"name": info["op"], "arguments": {"a": info["a"], "b": info["b"]}}
    if info["a"] % 2:
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return "<tool_call>" + json.dumps(call) + "</tool_call>"
'''


def test_a_solvers_tool_calls_are_played_through_the_env_and_its_wins_become_the_warm_start(tmp_path, monkeypatch):
    import student

    from embedded_trainer import recipe

    monkeypatch.setenv("EMBEDDED_TRAINER_CACHE", str(tmp_path / "cache"))
    (tmp_path / "solve.py").write_text(SOLVER)
    got = student.solver_corpus({"env_id": "tool_calculator", "env_args": {"num_train_examples": 20},
                                 "solver": str(tmp_path / "solve.py"), "min_rows": 10, "min_share": 0.5})
    assert (got["train_rows"], got["returned"], got["kept"], got["raised"]) == (20, 20, 20, 0), got
    rows = [json.loads(line) for line in open(got["path"], encoding="utf-8")]
    traj = rows[0]["info"]["reference_trajectory"]
    assert [m["role"] for m in traj] == ["assistant", "tool", "assistant"]
    assert traj[0]["tool_calls"][0]["function"]["name"] in ("add", "multiply")
    # the warm start renders the calls as the student writes them, and trains on its replies only
    tok = recipe.build_tokenizer()
    prompt_ids, ids, mask = recipe.sft_examples(rows[:1], tok)[0]
    own = tok.decode([t for t, m in zip(ids, mask) if m])
    assert own.startswith('<tool_call>{"name": ') and own.endswith("</answer><|end|>")
    assert "<|tool|>" in tok.decode(ids) and "<|tool|>" not in own
    assert os.path.basename(got["path"]) == f"solver-{got['digest']}.jsonl"


def test_a_solver_whose_call_is_malformed_loses_the_episode_and_its_transcript_shows_why(tmp_path, monkeypatch):
    import student

    monkeypatch.setenv("EMBEDDED_TRAINER_CACHE", str(tmp_path / "cache"))
    (tmp_path / "solve.py").write_text('def next_move(messages, info):\n'
                                       '    return \'<tool_call>{"name": "add", "arguments": {"a": 1</tool_call>\'\n')
    got = student.solver_corpus({"env_id": "tool_calculator", "env_args": {"num_train_examples": 20},
                                 "solver": str(tmp_path / "solve.py"), "min_rows": 10, "min_share": 0.5})
    assert got["kept"] == 0 and got["digest"] is None and got["returned"] == 20
    assert got["misses"][0]["completion"].startswith('assistant: <tool_call>{"name": "add"')


# --------------------------------------------------------------------------------------------
# The warm start: what the student must learn is learnable

def test_the_reference_call_copies_the_numbers_in_the_order_the_question_says_them():
    """The reference player's call takes `a` and `b` in the order the question names them, in
    every wording (a "Multiply B by A" wording once made the call copy the second number first,
    a rule a small student cannot read off the text), and the warm-start episode is the call,
    the tool's result, and that result as the answer (or, for a slip, the other tool's)."""
    import random
    import re

    from tool_calculator import problems

    rng = random.Random(0)
    for op in problems.OPS:
        for phrase in problems.PHRASES[op]:
            assert phrase.index("{a}") < phrase.index("{b}"), phrase
    for _ in range(200):
        row = problems.draw(rng)
        i = row["info"]
        assert [int(x) for x in re.findall(r"\d+", row["question"])] == [i["a"], i["b"]], row["question"]
    for row in problems.warm_start_corpus(64, seed=3, slip_share=0.25):
        i, traj = row["info"], row["info"]["reference_trajectory"]
        assert [int(x) for x in re.findall(r"\d+", row["prompt"][-1]["content"])] == [i["a"], i["b"]]
        call = traj[0]["tool_calls"][0]["function"]
        assert json.loads(call["arguments"]) == {"a": i["a"], "b": i["b"]}
        assert traj[2]["content"] == f"<answer>{traj[1]['content']}</answer>"
        assert traj[1]["content"] == str(problems.result(call["name"], i["a"], i["b"]))


# --------------------------------------------------------------------------------------------
# The whole loop on the shipped tool env (long: the real embedded trainer, many minutes)

@pytest.mark.long   # a few minutes on a quiet 2-core machine (2 min here), about 15 beside other jobs: outside CI
def test_on_cpu_the_loop_trains_the_tool_student_through_an_iteration_and_the_controls(tmp_path, runs):
    """`driver run --backend local` on tool_calculator, its shipped student, the built-in
    teacher: iter_0, an iteration and the three controls train; every train rollout is an
    episode whose tool calls the env ran (each tool message is its call's result); the student
    wins some episodes and loses others (reward strictly between 0 and 1, mixed groups), and the
    probe finds live groups on the teacher's rows; the run completes."""
    from conftest import cpu_user_env, driver, run_dir_from
    from driver import dialects
    from tests_support import assert_loop_finished_one_iteration
    from tool_calculator import STUDENT_RECIPE, problems

    env = cpu_user_env(tmp_path)   # an empty cache: the student is the shipped one
    r = driver(["run", "--dataset", "tool_calculator", "--backend", "local", "--max-iters", "2",
                "--steps-per-run", "4", "--eval-examples", "40", "--env-args", '{"num_eval_examples": 40}',
                "--runs-dir", str(runs)], env, timeout=3000)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "is built before iter_0" not in r.stdout + r.stderr   # shipped prebuilt: nothing to build
    rd = run_dir_from(r.stdout)
    assert_loop_finished_one_iteration(rd, STUDENT_RECIPE)
    classic = dialects.get("classic")
    out = rd / "iter_0" / "prime_out"
    steps = [list(classic.train_rows(out, s)) for s in classic.train_steps(out)]
    rows = [row for step in steps for row in step]
    assert rows
    calls = answered = 0
    for row in rows:
        said = row["completion"]
        for k, m in enumerate(said):
            for c in m.get("tool_calls") or []:
                f, result = c["function"], said[k + 1]
                args = json.loads(f["arguments"])
                assert result["role"] == "tool" and result["tool_call_id"] == c["id"]
                calls += 1
                if f["name"] in problems.TOOLS and set(args) == {"a", "b"}:
                    assert result["content"] == str(problems.result(f["name"], args["a"], args["b"]))
                    answered += 1
                elif f["name"] not in problems.TOOLS:
                    # a tool the env lacks: ToolEnv answers the KeyError's text
                    # (verifiers/legacy/envs/tool_env.py:134-139,170-181 @0.3.1)
                    assert result["content"] == str(KeyError(f["name"]))
    assert calls >= len(rows) / 2 and answered >= calls / 2
    rewards = [row["reward"] for row in rows]
    assert 0 < sum(rewards) < len(rewards)
    groups: dict = {}
    for k, step in enumerate(steps):
        for row in step:
            groups.setdefault((k, row["example_id"]), set()).add(row["reward"])
    assert any(len(got) > 1 for got in groups.values())


def test_the_family_generators_rows_pass_the_gates_shape_lines_wherever_the_teacher_aims(tmp_path):
    """The tool_calculator family's buckets span three domains, and every bucket reaches every
    difficulty, so a dataset aimed evenly or mostly at short numbers passes the gate's domain,
    difficulty, feature and depth lines (two domains and length-bound features once failed them)."""
    from driver.gates import dataset, rules
    from generators.tool_calculator import BUCKETS, FEATURE_DEFINITIONS, generate

    domains = list(dict.fromkeys(d for d, _ in BUCKETS))
    even = {f"{d} / {s}": 100 for d, s in BUCKETS}
    for alloc in (even, {**{k: 30 for k in even}, "short numbers / addition": 300, "short numbers / multiplication": 150}):
        weakness = {"domains": [{"name": d, "severity": "high", "evidence": "e",
                                 "sub_domains": [{"name": s} for d2, s in BUCKETS if d2 == d]} for d in domains],
                    "allocations": alloc,
                    "structural_features": [{"name": k, "definition": v} for k, v in FEATURE_DEFINITIONS.items()]}
        path = tmp_path / "dataset.jsonl"
        generate(weakness, [], out=str(path), seed=3)
        got = {n: (ok, why) for n, ok, why in dataset.check(path, weakness).lines}
        for line in ("count", "domains", "subs", "bucket_share", "hard", "easy", "two_features",
                     "three_features", "feature_share", "features_defined", "depth"):
            assert got[rules.LINE[line].name][0], (line, got[rules.LINE[line].name])
