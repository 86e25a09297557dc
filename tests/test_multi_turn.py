"""A multi-turn env is played as the env defines it, everywhere: introspection records its kind,
turn limit, settings and the info keys its episode logic reads; the embedded trainer plays its
episodes by the env's own rollout loop, with log-probs and loss on the model's tokens only; the
generated env keeps the hub's turn limit and settings and plays the same turns; the built-in
student warm-starts on whole episodes with the env's messages masked; and a tool-using env is
played too (tests/test_tool_student.py holds its tool calls).

The envs: environments/hidden_number (the built-in game), tests/envs/guess_game.py (a user's
own MultiTurnEnv with no constructor of its own, loaded with max_turns=14 and a setting its
env_response reads), tests/envs/tool_lookup.py (verifiers' ToolEnv).
"""
from __future__ import annotations

import json
import os
import re
import sys
import uuid
from pathlib import Path

import pytest

from conftest import ENVS, ROOT, cpu_user_env, driver
from tests_support import assert_loop_finished_one_iteration, python_c

PY = sys.executable
sys.path.insert(0, ENVS)
sys.path.insert(0, str(ROOT / "driver" / "envside"))


# tests/envs on PYTHONPATH for the whole module (conftest)
pytestmark = pytest.mark.usefixtures("test_envs_on_path")


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tiny models here run in this process: one thread (two contend with the suite's other
    worker for two cores, and a tiny model's steps then take ten times as long)."""
    import torch  # here, not at the top: a worker that runs no test of this file never imports it
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def game():
    import verifiers as vf

    return vf.load_environment("hidden_number")


@pytest.fixture(scope="module")
def student():
    """A tiny student with random weights: its replies are noise, so the env's feedback (a
    reply it cannot read costs a guess) drives every episode to the row's budget."""
    from embedded_trainer import recipe

    tok = recipe.build_tokenizer()
    model = recipe.build_model(recipe.parse_recipe("builtin:tiny-char-qwen2"), len(tok)).eval()
    return model, tok


@pytest.fixture(scope="module")
def played(game, student):
    import torch
    from embedded_trainer.rollouts import render_prompt, sample_and_score

    model, tok = student
    rows = list(game.get_dataset())[:3]
    got = sample_and_score(model, tok, [render_prompt(tok, r["prompt"]) for r in rows], [game] * 3, rows,
                           2, 12, 1.0, torch.Generator().manual_seed(0), 1024)
    return rows, got


def test_the_embedded_trainer_plays_each_episode_by_the_envs_own_turns(played):
    """Every episode holds several replies with the env's answer between them, exactly as the
    game's rules give it for those replies, and stops where the env stops it (the row's guess
    budget, its own stop condition). Before, the trainer sampled one reply per row."""
    from hidden_number.game import feedback, parse_guess

    rows, got = played
    for k, sc in enumerate(got.scores):
        row = rows[k // 2]
        info, secret = row["info"], int(row["answer"])
        replies = [m for m in sc["completion"] if m["role"] == "assistant"]
        env_msgs = [m for m in sc["completion"] if m["role"] == "user"]
        assert len(replies) == info["max_guesses"] >= 3, sc["completion"]
        assert sc["stop_condition"] == "out_of_guesses" and sc["metrics"]["num_turns"] == len(replies)
        lo, hi = info["lo"], info["hi"]
        for reply, answer in zip(replies, env_msgs):
            lo, hi, said, _ = feedback(parse_guess(reply["content"]), secret, lo, hi)
            assert answer["content"] == said
        assert len(env_msgs) == len(replies) - 1


def test_the_mask_and_the_log_probs_cover_the_models_own_tokens_only(played, student):
    """The masked tokens of an episode decode to its replies (each with its end token) and
    nothing else; the behaviour log-probs kept at sampling are the model's own on exactly those
    tokens (recomputed over the whole episode at the sampling temperature), 0 elsewhere."""
    import torch
    from embedded_trainer import grpo
    from embedded_trainer.rollouts import render_prompt

    rows, got = played
    model, tok = student
    for k in range(len(got.texts)):
        mask = got.mask[k]
        replies = [m["content"] for m in got.scores[k]["completion"] if m["role"] == "assistant"]
        own = tok.decode(got.tokens[k][mask].tolist(), skip_special_tokens=False)
        assert own.replace(tok.eos_token, "") == "".join(replies)
        assert (got.logps[k][~mask] == 0).all()
    prompt = render_prompt(tok, rows[0]["prompt"])
    with torch.no_grad():
        logits = grpo.shared_prefix_logits(model, prompt, got.tokens[:2])
        recomputed = grpo.token_logprobs(logits, got.tokens[:2], 1.0)
    m = got.mask[:2]
    assert torch.allclose(recomputed[m], got.logps[:2][m], atol=1e-4)


def test_the_loss_has_no_gradient_on_the_envs_tokens(played):
    """The clipped surrogate over an episode: its gradient with respect to the log-probs is zero
    on every token the env wrote (and on padding), non-zero on the model's."""
    import torch
    from embedded_trainer import grpo

    _, got = played
    new = got.logps[:2].clone().requires_grad_(True)
    loss = grpo.clipped_surrogate(new, got.logps[:2], torch.tensor([1.0, -1.0]), got.mask[:2], 0.2)
    loss.backward()
    assert (new.grad[~got.mask[:2]] == 0).all()
    assert (new.grad[got.mask[:2]] != 0).all()


def test_the_warm_start_reads_whole_episodes_with_the_envs_messages_masked():
    """An episode of the game's warm-start corpus: the SFT labels are its replies and their end
    tokens; the env's messages and the template's markers are never a target."""
    import hidden_number

    from embedded_trainer import recipe

    tok = recipe.build_tokenizer()
    row = hidden_number.warm_start_corpus(1, seed=3)[0]
    (_, ids, mask), = recipe.sft_examples([row], tok)
    replies = [m["content"] for m in row["info"]["reference_trajectory"] if m["role"] == "assistant"]
    assert len(replies) >= 2
    assert tok.decode([t for t, k in zip(ids, mask) if k]) == "".join(r + tok.eos_token for r in replies)
    env_text = tok.decode([t for t, k in zip(ids, mask) if not k])
    for m in row["info"]["reference_trajectory"]:
        if m["role"] == "user":
            assert m["content"] in env_text


def test_introspection_records_the_episodes_kind_turn_limit_settings_and_the_keys_its_logic_reads():
    """hub_env.json's interaction for a user's multi-turn env: multi-turn, max_turns 14 (the
    loader's), its own setting say_range, and lo/hi, which only env_response reads (the rubric
    reads max_guesses); `driver introspect` says the same in words."""
    from driver.envs.describe import interaction_line
    from driver.envs.introspect import introspect

    hub = introspect(PY, "guess_game")
    it = hub["interaction"]
    assert it["kind"] == "multi_turn" and it["max_turns"] == 14
    assert it["settings"]["say_range"] is True and it["settings"]["max_turns"] == 14
    assert {"lo", "hi"} <= set(it["env_info_keys_read"]) and hub["info_keys_read"] == ["max_guesses"]
    assert it["env_response"] == "GuessEnv"
    line = interaction_line(hub)
    assert "multi-turn" in line and "max_turns 14" in line and "lo" in line
    r = driver(["introspect", "hidden_number"], dict(os.environ))
    assert "multi-turn" in r.stdout and "max_turns 8" in r.stdout and "out_of_guesses" in r.stdout
    assert "hi, lo, max_guesses" in r.stdout


PLAY_CHECK = r"""
import json, sys
sys.path.insert(0, sys.argv[4])
import episodes, verifiers as vf
name, hub_id, moves = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
gen, hub = vf.load_environment(name), vf.load_environment(hub_id)
row = dict(gen.get_dataset()[0])
out = {"max_turns": [gen.max_turns, hub.max_turns], "say_range": [gen.say_range, hub.say_range],
       "class": [type(gen).__name__, type(hub).__name__],
       "gen": episodes.play(gen, row, episodes.moves_reply(moves)),
       "hub": episodes.play(hub, row, episodes.moves_reply(moves))}
print(json.dumps(out))
"""


def test_a_generated_env_keeps_the_hubs_turn_limit_and_plays_the_same_turns(tmp_path):
    """The generated env of the user's multi-turn env: its max_turns is the hub's 14 (verifiers'
    default, -1 for unlimited, before), its own setting is the hub's, and the same moves get the
    same replies and the same reward, turn by turn."""
    from driver.envs.install import cleanup, install_generated
    from driver.envs.introspect import introspect
    from driver.envs.packages import write_package
    from guess_game import rows

    hub = introspect(PY, "guess_game")
    name = f"guess_game_t{uuid.uuid4().hex[:6]}_iter_1"
    data = rows(5, 12)
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    try:
        install_generated(PY, write_package(tmp_path, name, hub, tmp_path / "d.jsonl"), 12)
        secret, lo, hi = int(data[0]["answer"]), data[0]["info"]["lo"], data[0]["info"]["hi"]
        moves = ["<guess>0</guess>", f"<guess>{lo}</guess>", "no idea", f"<guess>{hi}</guess>",
                 f"<guess>{secret}</guess>"]
        r = python_c(PLAY_CHECK, name, "guess_game", json.dumps(moves), ROOT / "driver" / "envside")
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout.splitlines()[-1])
    finally:
        cleanup(PY, name)
    assert out["max_turns"] == [14, 14] and out["say_range"] == [True, True]
    assert out["class"] == ["GuessEnv", "GuessEnv"]
    assert out["gen"]["completion"] == out["hub"]["completion"]
    assert out["gen"]["turns"] == 5 and out["gen"]["reward"] == out["hub"]["reward"] == 1.0
    assert out["gen"]["stop_condition"] == "has_final_env_response"


def test_a_tool_using_env_written_outside_the_project_is_played_not_refused(student):
    """verifiers' ToolEnv (tests/envs/tool_lookup.py) on the embedded trainer: its episodes are
    played by its own loop, the student's text parsed for tool calls (a student with random
    weights writes none, so ToolEnv ends each episode at its first reply). The tool calls
    themselves: tests/test_tool_student.py."""
    import torch
    import tool_lookup

    from driver.backends import local
    from embedded_trainer.rollouts import render_prompt, sample_and_score

    env = tool_lookup.load_environment()
    model, tok = student
    rows = list(env.get_dataset())[:2]
    got = sample_and_score(model, tok, [render_prompt(tok, r["prompt"]) for r in rows], [env] * 2, rows,
                           2, 12, 1.0, torch.Generator().manual_seed(0), 1024)
    assert [s["error"] for s in got.scores] == [None] * 4
    assert {s["stop_condition"] for s in got.scores} == {"no_tools_called"}
    assert all(s["metrics"]["total_tool_calls"] == 0.0 for s in got.scores)
    assert local.Local("python", None).refuse_episodes({"interaction": {"kind": "tools"}}) is None


# --------------------------------------------------------------------------------------------
# The teacher's side: whole episodes in failures.jsonl, TEACHER.md's words, the gate on episodes


def _ctx(tmp_path: Path, retries: int = 3):
    """What the weakness phase reads of a run: its iteration directories, the classic dialect
    (steps read through its layout) and the teacher's retries."""
    from types import SimpleNamespace

    from driver import dialects

    said: list[str] = []
    return SimpleNamespace(iter_dir=lambda k: tmp_path / f"iter_{k}", dialect=dialects.get("classic"),
                           state=SimpleNamespace(teacher_retries=retries, iter_0_step=3, steps_per_run=3),
                           say=said.append, said=said)


def _episode(turns: int, reward: float, example_id: int) -> dict:
    completion = []
    for t in range(turns):
        completion.append({"role": "assistant", "content": f"<guess>{t}</guess>"})
        if t < turns - 1:
            completion.append({"role": "user", "content": f"Higher: from {t + 1} to 40."})
    return {"example_id": example_id, "prompt": [{"role": "user", "content": "q"}], "completion": completion,
            "answer": "39", "info": {"lo": 1, "hi": 40, "max_guesses": turns}, "reward": reward, "metrics": {},
            "is_truncated": False, "stop_condition": "out_of_guesses"}


def test_failures_hold_whole_episodes_with_idx_and_step_from_across_the_steps(tmp_path):
    """failures.jsonl, as TEACHER.md describes it: each row's `idx` is its line (0 first), its
    `step` the train step it came from, its completion the whole episode with its turn count and
    stop condition; failures tied at the lowest reward come from every step read, not one."""
    from driver.phases import iteration
    from rl_contract.classic import ClassicLayout

    ctx = _ctx(tmp_path)
    out = ctx.iter_dir(0) / "prime_out"
    layout = ClassicLayout()
    for s in (1, 2, 3):   # iter_0 trains steps 1..3; classic writes step s's batch at rows_step(s)
        rows = [_episode(5, 0.0, 10 * s + j) for j in range(150)] + [_episode(3, 1.0, 999)]
        path = layout.train_file(out, layout.rows_step(s))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    failures, sample, span = iteration.write_failures(ctx, 1)
    got = [json.loads(line) for line in failures.read_text().splitlines()]
    assert len(got) == iteration.MAX_FAILURE_ROWS
    assert [r["idx"] for r in got] == list(range(len(got)))
    steps = [layout.trained_step(s) for s in ctx.dialect.train_steps(out)]
    assert {r["step"] for r in got} == set(steps) == {1, 2, 3}
    assert all(r["reward"] == 0.0 and r["turns"] == 5 and r["stop_condition"] == "out_of_guesses" for r in got)
    assert [m["role"] for m in got[0]["completion"]] == ["assistant", "user"] * 4 + ["assistant"]
    assert span == "train_step_1..train_step_3 of iter_0"


def _brief(tmp_path: Path, hub: dict, **kw):
    from driver.teachers import Brief

    d = tmp_path / "iter_2"
    d.mkdir(parents=True, exist_ok=True)
    (tmp_path / "failures.jsonl").write_text(json.dumps(_episode(5, 0.0, 1) | {"idx": 0, "step": 3}) + "\n")
    return Brief(run_dir=tmp_path, iter_dir=d, iteration=2, hub=hub, failures_path=tmp_path / "failures.jsonl",
                 failures_step="train_step_3..train_step_4 of iter_0", eval_accs={"iter_0": 0.3}, **kw)


def _teacher_md(brief) -> str:
    from driver.errors import WaitingForTeacher
    from driver.teachers.agent import AgentTeacher

    with pytest.raises(WaitingForTeacher) as w:
        AgentTeacher().teach(brief)
    return Path(w.value.brief_path).read_text()


@pytest.fixture(scope="module")
def game_hub():
    from driver.envs.introspect import introspect

    return introspect(PY, "hidden_number")


def test_teacher_md_tells_a_multi_turn_envs_teacher_what_an_episode_and_a_row_are(tmp_path, game_hub):
    """TEACHER.md of a multi-turn hub env: the episodes section names the env's turn limit, its own
    stop condition and the info keys its episode logic reads, and says a row is an initial
    state whose info.reasoning is the list of winning replies the gate plays; a single-turn
    env's brief has no such section."""
    text = _teacher_md(_brief(tmp_path, game_hub))
    flat = " ".join(text.split())
    assert "## Episodes: the hub env plays each one itself" in text
    assert "max_turns 8" in flat and "`out_of_guesses`" in flat
    assert "(`hi`, `lo`, `max_guesses`)" in flat
    assert "`info.reasoning` is a list: the replies, one per turn, that win the episode" in flat
    assert "a skeleton row cites one as `skeleton:train_step_<step>_idx_<idx>`" in flat
    single = _teacher_md(_brief(tmp_path / "s", {**game_hub, "interaction": {"kind": "single_turn"}}))
    assert "## Episodes" not in single


def test_a_rejection_renames_exactly_what_teacher_md_said_it_would(tmp_path, game_hub):
    """A scripted teacher reads, before writing, which files a rejection sets aside and how they
    are named; the driver's rejection then renames exactly those it wrote (and what the driver
    made of them), and the next brief lists the attempt."""
    from driver.phases import iteration

    brief = _brief(tmp_path, game_hub, retries=3)
    text = _teacher_md(brief)
    said = re.search(r"renames every file of it in `([^`]+)` \((.*?)\) to `NAME\.rejected-(\d+)`",
                     " ".join(text.split()))
    assert said and Path(said.group(1)) == brief.iter_dir and said.group(3) == "1"
    names = re.findall(r"`([^`]+)`", said.group(2))
    assert {"weakness.json", "gen_dataset.py", "dataset.jsonl", "probe_rollouts.jsonl"} <= set(names)
    written = ["weakness_report.md", "weakness.json", "gen_dataset.py", "scratchpad_entry.md", "dataset.jsonl"]
    for name in written:
        (brief.iter_dir / name).write_text("{}" if name.endswith(".json") else "x")
    (brief.iter_dir / "notes.txt").write_text("mine")   # not named: left where it is
    ctx = _ctx(tmp_path)
    assert iteration.reject(ctx, 2, ["rows well-formed: False (line 3)"]) == "retry"
    left = sorted(p.name for p in brief.iter_dir.iterdir())
    assert left == sorted(["attempts.json", "notes.txt", "TEACHER.md"] + [f"{n}.rejected-1" for n in written])
    history = json.loads((brief.iter_dir / "attempts.json").read_text())["history"]
    assert history == [{"attempt": 1, "failures": ["rows well-formed: False (line 3)"], "tried": "no allocations"}]


def test_the_brief_after_a_skipped_iteration_says_what_was_tried_and_why_it_was_rejected(tmp_path, game_hub):
    """Iteration 1 skipped after three attempts (two gate rejections, one probe verdict): the
    next brief, on the same rollouts, names each attempt, what it aimed at and its verdict;
    a brief with nothing skipped says none of it."""
    from driver.phases import iteration

    ctx = _ctx(tmp_path, retries=3)
    d1 = ctx.iter_dir(1)
    verdicts = [["smallest (domain, sub_domain) >=3%: False (wide ranges/no spare guess: 0.01)"],
                ["reasoning earns full reward (hub rubric): False (wide ranges/a spare guess: 40 rows)"],
                ["probe: the dataset carries no gradient for the student: live fraction 0.000 < 0.1 on "
                 "32 prompts x 4 (all solved: 32, none solved: 0, mean reward 1.000)"]]
    for k, failures in enumerate(verdicts, 1):
        d1.mkdir(parents=True, exist_ok=True)
        (d1 / "weakness.json").write_text(json.dumps({"allocations": {f"narrow ranges / attempt {k}": 600}}))
        outcome = iteration.reject(ctx, 1, failures)
    assert outcome == "skip"
    rec = iteration.skipped_record(ctx, 1)
    text = _teacher_md(_brief(tmp_path, game_hub, skipped=[rec]))
    flat = " ".join(text.split())
    assert "Iteration 1 was skipped (no dataset passed the gate and the probe) after 3 attempts" in flat
    for k, failures in enumerate(verdicts, 1):
        assert f"attempt {k} tried narrow ranges / attempt {k}: 600 rows; rejected: {failures[0]}" in flat
    assert "same ones the skipped iteration read" in flat
    assert "was skipped" not in _teacher_md(_brief(tmp_path / "none", game_hub))


def _rows_for_gate(n: int) -> list[dict]:
    from hidden_number.game import halving_moves, question
    import random

    rng = random.Random(4)
    rows = []
    for k in range(n):
        lo = rng.randint(1, 30)
        hi = lo + rng.randint(8, 30)
        secret, budget = rng.randint(lo, hi), 7
        rows.append({"question": question(lo, hi, budget, rng), "answer": str(secret),
                     "info": {"lo": lo, "hi": hi, "max_guesses": budget, "domain": "d", "sub_domain": "s",
                              "reasoning": halving_moves(lo, hi, secret, budget)}})
    return rows


def test_the_gate_plays_a_multi_turn_rows_replies_through_the_envs_own_turns(tmp_path):
    """info.reasoning of a multi-turn env's row is its replies: the halving player's win the
    episode (full reward); replies that miss, or stop before the env ends the game, score below
    it, and the line says the episode wanted more; a single string is one reply."""
    from driver.gates import accuracy

    rows = _rows_for_gate(6)
    rows[1]["info"]["reasoning"] = rows[1]["info"]["reasoning"][:-1]         # stops one reply short
    wrong = int(rows[2]["answer"]) + 1 if int(rows[2]["answer"]) < rows[2]["info"]["hi"] else int(rows[2]["answer"]) - 1
    rows[2]["info"]["reasoning"] = [f"<guess>{wrong}</guess>"] * 7          # never the number
    rows[3]["info"]["reasoning"] = f"<guess>{rows[3]['answer']}</guess>"     # a string: one reply
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    scored = accuracy.score_rows(PY, "hidden_number", {}, tmp_path / "d.jsonl")
    rewards = [r["reward"] for r in scored["rows"]]
    assert scored["ceiling"] == 1.0 and rewards == [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    short = scored["rows"][1]["errors"]
    assert any("still wanted a reply after the" in e for e in short), short
    n_bad, detail = accuracy.failures(scored)
    assert n_bad == 2 and "d/s: 2 rows" in detail


def test_effort_and_length_quartiles_read_the_students_replies_not_the_envs_messages():
    """An episode's length, for the gradient diagnosis's effort and the built-in teacher's
    length quartiles, is the student's replies: the env's messages between them do not count."""
    from driver.analysis.diagnose import completion_length
    from driver.teachers.builtin import _completion_text

    short, chatty = _episode(3, 0.0, 1), _episode(3, 0.0, 2)
    for m in chatty["completion"]:
        if m["role"] == "user":
            m["content"] *= 20
    assert completion_length(short) == completion_length(chatty) == len("<guess>0</guess><guess>1</guess><guess>2</guess>")
    assert _completion_text(short) == _completion_text(chatty) == "<guess>0</guess> <guess>1</guess> <guess>2</guess>"


# --------------------------------------------------------------------------------------------
# The student for an interactive env: a solver that plays episodes, a build that fits its limit

HALVING = """
import re

def next_move(messages, info):
    # the range left is the last "from LO to HI" said in the conversation
    lo, hi = map(int, re.findall(r"from (\\d+) to (\\d+)", " ".join(m["content"] for m in messages))[-1])
    return f"<guess>{(lo + hi) // 2}</guess>"
"""

STUBBORN = """
def next_move(messages, info):
    return "<guess>1</guess>" if len(messages) < 6 else None
"""


@pytest.mark.extended   # the whole game played by a solver (about 20 s); the single-turn solver route stays in the main suite (test_cpu_student)
def test_a_solver_plays_a_multi_turn_envs_episodes_and_its_wins_become_the_warm_start(tmp_path, runs):
    """--student-solver on the game: next_move(messages, info) is asked each turn with the
    conversation so far and the env plays every train row with it; a solver that wins few
    episodes is refused with their transcripts, one that wins them all becomes the student's
    corpus of whole episodes (here the build it names is then too long for the limit, which is
    refused before a run directory exists, with the limit that fits)."""
    env = cpu_user_env(tmp_path)
    small = ["--env-args", '{"num_train_examples": 400}']   # the floor: 200 rows and half the split
    (tmp_path / "stubborn.py").write_text(STUBBORN)
    r = driver(["run", "--dataset", "hidden_number", "--backend", "local", "--teacher", "agent", *small,
                "--student-solver", str(tmp_path / "stubborn.py"), "--runs-dir", str(runs)], env, timeout=600)
    assert r.returncode == 2 and list(runs.iterdir()) == [], r.stderr[-3000:]
    err = " ".join(r.stderr.split())
    assert "next_move() played 400 episodes" in err and "over the whole episode" in err
    assert "Episodes the rubric scored below full reward" in err and "user: 1 is out of range" in err

    (tmp_path / "solve.py").write_text(HALVING)
    r = driver(["run", "--dataset", "hidden_number", "--backend", "local", "--teacher", "agent", *small,
                "--student-solver", str(tmp_path / "solve.py"), "--model",
                "builtin:tiny-char-qwen2?sft_steps=1000000", "--runs-dir", str(runs)], env, timeout=600)
    assert r.returncode == 2 and list(runs.iterdir()) == [], r.stderr[-3000:]
    err = " ".join(r.stderr.split())
    assert "400 of the 400 train rows of hidden_number passed: next_move() played 400 episodes" in err
    corpus = Path(re.search(r"\(corpus (\S+)\)", err).group(1))
    rows = [json.loads(line) for line in corpus.read_text().splitlines()]
    traj = rows[0]["info"]["reference_trajectory"]
    assert len(rows) == 400 and [m["role"] for m in traj][:2] == ["assistant", "user"]
    # the build it names is sized and timed before anything is created, and refused past the limit
    said = re.search(r"is built before iter_0 trains: ([\d,]+) parameters, 1000000 SFT steps of 32 on \d+\+ "
                     r"warm-start examples, ([\d.]+) s a step here .*?about (\d+) min", err)
    assert said and int(said.group(1).replace(",", "")) > 100_000
    # the seconds a step are printed to 2 decimals (0.32 is 0.315 to 0.325), the minutes whole
    step_s, minutes = float(said.group(2)), int(said.group(3))
    assert 1_000_000 * (step_s - 0.005) / 60 - 1 <= minutes <= 1_000_000 * (step_s + 0.005) / 60 + 1
    assert "longer than --startup-timeout (10 min)" in err
    assert re.search(r"Run again with --startup-timeout \d+m", err) and "Nothing was created" in err


@pytest.mark.extended
def test_the_student_build_is_sized_and_timed_before_it_starts(tmp_path, runs):
    """A student that must be built: `driver run` says its size and how long its SFT will take
    here (measured over a few steps) before anything is created; with a limit that fits, the
    run goes on (a dry run here). Extended: the refusal past the limit, with the same numbers,
    is in the main suite (the solver test)."""
    r = driver(["run", "--dataset", "hidden_number", "--backend", "local", "--teacher", "agent", "--dry-run",
                "--model", "builtin:tiny-char-qwen2?corpus=stream&sft_steps=4000", "--startup-timeout", "400h",
                "--runs-dir", str(runs)], cpu_user_env(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    said = re.search(r"student build: the student \S+ is built before iter_0 trains: ([\d,]+) parameters, "
                     r"4000 SFT steps of 32 on \d+\+ warm-start examples, ([\d.]+) s a step here .*about (\d+) min",
                     " ".join(r.stderr.split()))
    assert said, r.stderr[-2000:]
    assert int(said.group(1).replace(",", "")) > 100_000 and float(said.group(2)) > 0
    assert abs(int(said.group(3)) - 4000 * float(said.group(2)) / 60) <= 1 + 4000 * 0.005 / 60


def test_the_build_says_where_it_is_at_least_every_half_minute(monkeypatch):
    """SFT progress lines: at least 20 a build, and one whenever half a minute has gone since
    the last, however slow a step (a clock that gains 40 s a step: a line every step)."""
    from types import SimpleNamespace

    from embedded_trainer import recipe

    tok = recipe.build_tokenizer()
    spec = {**recipe.parse_recipe("builtin:tiny-char-qwen2?hidden_size=16&ffn=32&heads=2&layers=1"),
            "sft_steps": 60, "sft_batch": 1}
    model = recipe.build_model(spec, len(tok))
    examples = [([3, 5, 6], [40, 41, tok.eos_token_id], [1, 1, 1])]
    lines: list[str] = []
    recipe.sft(model, examples, spec, log=lines.append)   # a real clock: steps of milliseconds
    assert len(lines) == 21 and lines[0].startswith("sft step 1/60")
    clock = iter(range(0, 10 ** 6, 40))
    monkeypatch.setattr(recipe, "time", SimpleNamespace(time=lambda: next(clock)))
    lines.clear()
    recipe.sft(model, examples, spec, log=lines.append)
    assert len(lines) == 60


def test_driver_resume_may_lengthen_the_startup_timeout(tmp_path, runs):
    """A run whose student build needs longer than --startup-timeout: `driver resume
    --startup-timeout` changes it for the arms to come (recorded in run.json); a value that is
    not a duration is refused before anything changes."""
    from conftest import driver_env

    env = driver_env(tmp_path, DOUBLE_CRASH_AT_STEP="1")
    r = driver(["run", "--dataset", "hidden_number", "--dry-run", "--runs-dir", str(runs)], env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    from conftest import run_dir_from

    rd = run_dir_from(r.stdout)
    before = json.loads((rd / "run.json").read_text())["startup_timeout_s"]
    bad = driver(["resume", str(rd), "--startup-timeout", "soon"], env)
    assert bad.returncode == 2 and json.loads((rd / "run.json").read_text())["startup_timeout_s"] == before
    r = driver(["resume", str(rd), "--startup-timeout", "3h"], env, timeout=600)
    assert "--startup-timeout: 60 min -> 180 min" in r.stderr, r.stderr[-2000:]
    assert json.loads((rd / "run.json").read_text())["startup_timeout_s"] == 3 * 3600


# --------------------------------------------------------------------------------------------
# Whole runs (extended: their unit-level twins above stay in the main suite)

LOAD_GENERATED = r"""
import json, sys
import verifiers as vf
env = vf.load_environment(sys.argv[1])
print(json.dumps({"class": type(env).__name__, "max_turns": env.max_turns, "rows": len(env.get_dataset())}))
"""


@pytest.mark.extended
def test_on_prime_rl_a_multi_turn_hub_envs_iteration_installs_a_generated_env_with_its_turn_limit(tmp_path, runs):
    """prime-rl's `rl` (the trainer double) on the built-in game loaded with max_turns=11 (its
    class's default is 8): iteration 1's config is rendered, its generated env installed, and in
    a fresh interpreter that env is the hub's class with the hub's turn limit; the teacher's
    failures came with their idx and step; control C drew the family's untargeted games."""
    from conftest import FAST, driver_env, run_dir_from

    r = driver(["run", "--dataset", "hidden_number", "--env-args", '{"max_turns": 11}', "--max-iters", "2",
                *FAST, "--runs-dir", str(runs)], driver_env(tmp_path), timeout=1500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "episodes: multi-turn" in r.stderr and "max_turns 11" in r.stderr
    rd = run_dir_from(r.stdout)
    it1 = rd / "iter_1"
    assert (it1 / "rl.toml").exists() and "max_turns = 11" in (it1 / "rl.toml").read_text()
    installed = json.loads((it1 / "env_installed.json").read_text())
    name = next(p.name for p in it1.iterdir() if p.is_dir() and p.name.startswith("hidden_number_iter_1"))
    out = python_c(LOAD_GENERATED, name)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.splitlines()[-1])
    assert got == {"class": "HiddenNumberEnv", "max_turns": 11, "rows": installed["rows"]}
    failures = [json.loads(line) for line in (it1 / "teacher_input" / "failures.jsonl").read_text().splitlines()]
    assert [f["idx"] for f in failures] == list(range(len(failures))) and all("step" in f for f in failures)
    assert "untargeted rows from generators.hidden_number.untargeted" in r.stdout + r.stderr


@pytest.mark.long   # the game's whole CPU run (10–20 min on 2 cores): outside CI
def test_on_cpu_the_loop_trains_a_student_on_the_built_in_game_through_an_iteration_and_the_controls(tmp_path, runs):
    """`driver run --backend local` on hidden_number, its shipped student, the built-in teacher:
    iter_0, an iteration and the three controls train for real; every train rollout is an
    episode of several replies with the env's feedback between them, as the game's rules give it;
    the probe finds live groups on the teacher's rows; the run completes."""
    from conftest import run_dir_from
    from driver import dialects
    from hidden_number.game import feedback, parse_guess

    env = cpu_user_env(tmp_path)
    env["EMBEDDED_TRAINER_CACHE"] = str(tmp_path / "cache")   # nothing built: the shipped student
    r = driver(["run", "--dataset", "hidden_number", "--backend", "local", "--max-iters", "2",
                "--steps-per-run", "4", "--batch-size", "64", "--eval-examples", "40",
                "--max-completion-tokens", "32",
                "--env-args", '{"num_eval_examples": 40}', "--budget", "2h", "--runs-dir", str(runs)],
               env, timeout=3000)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    assert_loop_finished_one_iteration(rd, "builtin:tiny-char-qwen2?corpus=stream&sft_steps=600&c_slip_share=0.2")
    classic = dialects.get("classic")
    for k in (0, 1):
        out = rd / f"iter_{k}" / "prime_out"
        rows = [row for s in classic.train_steps(out) for row in classic.train_rows(out, s)]
        assert rows
        for row in rows:
            replies = [m for m in row["completion"] if m["role"] == "assistant"]
            said = [m["content"] for m in row["completion"] if m["role"] == "user"]
            lo, hi, secret = row["info"]["lo"], row["info"]["hi"], int(row["answer"])
            expected = []
            for reply in replies:
                lo, hi, text, found = feedback(parse_guess(reply["content"]), secret, lo, hi)
                expected.append("Correct!" if found else text)
            assert said == expected[:len(said)] and len(said) >= len(replies) - 1
        assert sum(len([m for m in row["completion"] if m["role"] == "assistant"]) >= 2 for row in rows) > len(rows) / 2
