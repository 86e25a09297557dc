"""A multi-turn env is played as the env defines it, everywhere: introspection records its kind,
turn limit, settings and the info keys its episode logic reads; the embedded trainer plays its
episodes by the env's own rollout loop, with log-probs and loss on the model's tokens only; the
generated env keeps the hub's turn limit and settings and plays the same turns; the built-in
student warm-starts on whole episodes with the env's messages masked; and a kind the embedded
trainer cannot play (tools) is refused before a run directory exists.

The envs: environments/hidden_number (the built-in game), tests/envs/guess_game.py (a user's
own MultiTurnEnv with no constructor of its own, loaded with max_turns=14 and a setting its
env_response reads), tests/envs/tool_lookup.py (verifiers' ToolEnv).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import torch

from conftest import ENVS, ROOT, cpu_user_env, driver, with_test_envs

PY = sys.executable
sys.path.insert(0, ENVS)
sys.path.insert(0, str(ROOT / "driver" / "envside"))


@pytest.fixture(scope="module", autouse=True)
def test_envs_on_path():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTHONPATH", with_test_envs(os.environ))
        yield


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
    from driver.envs import hub as envs

    hub = envs.introspect(PY, "guess_game")
    it = hub["interaction"]
    assert it["kind"] == "multi_turn" and it["max_turns"] == 14
    assert it["settings"]["say_range"] is True and it["settings"]["max_turns"] == 14
    assert {"lo", "hi"} <= set(it["env_info_keys_read"]) and hub["info_keys_read"] == ["max_guesses"]
    assert it["env_response"] == "GuessEnv"
    line = envs.interaction_line(hub)
    assert "multi-turn" in line and "max_turns 14" in line and "lo" in line
    r = subprocess.run([PY, "-m", "driver.cli", "introspect", "hidden_number"], capture_output=True, text=True,
                       timeout=120)
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
    from driver.envs import hub as envs
    from guess_game import rows

    hub = envs.introspect(PY, "guess_game")
    name = f"guess_game_t{uuid.uuid4().hex[:6]}_iter_1"
    data = rows(5, 12)
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    try:
        envs.install_generated(PY, envs.write_package(tmp_path, name, hub, tmp_path / "d.jsonl"), 12)
        secret, lo, hi = int(data[0]["answer"]), data[0]["info"]["lo"], data[0]["info"]["hi"]
        moves = ["<guess>0</guess>", f"<guess>{lo}</guess>", "no idea", f"<guess>{hi}</guess>",
                 f"<guess>{secret}</guess>"]
        r = subprocess.run([PY, "-c", PLAY_CHECK, name, "guess_game", json.dumps(moves),
                            str(ROOT / "driver" / "envside")], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout.splitlines()[-1])
    finally:
        envs.cleanup(PY, name)
    assert out["max_turns"] == [14, 14] and out["say_range"] == [True, True]
    assert out["class"] == ["GuessEnv", "GuessEnv"]
    assert out["gen"]["completion"] == out["hub"]["completion"]
    assert out["gen"]["turns"] == 5 and out["gen"]["reward"] == out["hub"]["reward"] == 1.0
    assert out["gen"]["stop_condition"] == "has_final_env_response"


def test_a_tool_using_env_is_refused_before_a_run_directory_exists(tmp_path, runs):
    """verifiers' ToolEnv on --backend local: exit 2, nothing created, and the message names
    what the embedded trainer plays and what works instead; the trainer itself refuses it too."""
    import tool_lookup

    from embedded_trainer.episodes import refusal

    r = driver(["run", "--dataset", "tool_lookup", "--backend", "local", "--teacher", "agent",
                "--runs-dir", str(runs)], cpu_user_env(tmp_path), timeout=300)
    assert r.returncode == 2, r.stdout + r.stderr
    assert list(runs.iterdir()) == []
    err = r.stderr
    assert "tool-using" in err and "lookup" in err and "Nothing was created" in err
    assert "single-turn and multi-turn" in err and "--backend prime_rl" in err
    assert "run directory" not in r.stdout
    assert "tool calls" in refusal(tool_lookup.load_environment())
