"""What a multi-turn run says about itself: a student build counted apart from training steps
(progress, ETA, `driver status`), the student's context beside the env's turn limit, diagnosis
that reads a game's structure as the env's, the gate's list of replies, the build sized for the
machine, and every limit a loop's end reached. Unit level: seconds."""
from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace

import pytest

from driver import dialects
from driver.analysis import diagnose
from driver.arms import progress
from driver.envs import describe
from driver.errors import UsageError
from driver.run.model import RunState


# --------------------------------------------------------------------------------------------
# progress: the build is not a step

def _build_file(out, step, steps, eta_s, at):
    out.mkdir(parents=True, exist_ok=True)
    path = out / progress.BUILD_PROGRESS
    path.write_text(json.dumps({"step": step, "steps": steps, "loss": 1.25, "elapsed_s": 10.0, "eta_s": eta_s}))
    os.utime(path, (at, at))


def _step_file(dialect, out, step, at):
    f = dialect.train_file(out, step)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("{}\n")
    os.utime(f, (at, at))


def test_a_build_under_way_is_shown_with_its_own_progress_not_step_0_eta_unknown(tmp_path):
    d, out = dialects.get("classic"), tmp_path / "prime_out"
    launched = time.time() - 120
    _build_file(out, 300, 1500, 480.0, time.time())
    p = progress.training(d, out, 0, 8, launched)
    assert p["step"] == 0 and p["eta_s"] is None
    assert p["build"]["step"] == 300 and p["build"]["steps"] == 1500 and not p["build"]["done"]
    line = progress.line("iter_0", p)
    assert line.startswith("[iter_0] building the student: sft step 300/1500 ")
    assert "eta 8m00s" in line and "(then 8 train steps)" in line and "eta ?" not in line
    # a progress file older than the launch is another launch's: no build shown
    _build_file(out, 300, 1500, 480.0, launched - 3600)
    assert progress.training(d, out, 0, 8, launched)["build"] is None


def test_the_first_steps_time_is_measured_from_the_builds_end_not_the_launch(tmp_path):
    """A 10-minute build then a 40-second first step: the ETA of the 7 steps left is about
    7 x 40 s, not 7 x 10 min 40 s."""
    d, out = dialects.get("classic"), tmp_path / "prime_out"
    launched = time.time() - 700
    _build_file(out, 1500, 1500, 0.0, launched + 600)    # the build's last line: its end
    _step_file(d, out, d.rows_step(1), launched + 640)   # trainer step 1's batch
    p = progress.training(d, out, 0, 8, launched)
    assert p["step"] == 1 and p["build"] is None
    assert p["eta_s"] == pytest.approx(7 * 40, abs=1)
    # without a build the launch's start is the origin, as before
    (out / progress.BUILD_PROGRESS).unlink()
    assert progress.training(d, out, 0, 8, launched)["eta_s"] == pytest.approx(7 * 640, abs=1)


def test_driver_status_shows_the_build_while_it_runs(tmp_path, monkeypatch, capsys):
    from driver.commands import status
    from driver.run.model import TrainerProcess

    run_dir, out = tmp_path / "run", tmp_path / "run" / "iter_0" / "prime_out"
    _build_file(out, 40, 600, 300.0, time.time())
    st = RunState(start_ts=time.time() - 60, dataset="hidden_number", backend="local",
                  trainer=TrainerProcess(pid=1, create_time=0.0, output_dir=str(out), config_paths=[],
                                         start_step=0, final_step=8, launched_ts=time.time() - 30))
    monkeypatch.setattr("driver.reporting.status.RunDir", lambda p: SimpleNamespace(
        path=run_dir, load=lambda: st, load_metrics=lambda: {"iters": [], "controls": []}))
    status.main(SimpleNamespace(run_dir=str(run_dir), json=False))
    shown = capsys.readouterr().out
    assert "training [iter_0] building the student: sft step 40/600 " in shown and "eta ?" not in shown


# --------------------------------------------------------------------------------------------
# the loop's end names every limit it reached

def _ctx(tmp_path, **state):
    st = RunState(start_ts=time.time(), dataset="hidden_number", backend="local", **state)
    return SimpleNamespace(state=st, rd=SimpleNamespace(path=tmp_path), say=lambda *a: None)


def test_a_loop_that_reaches_its_budget_and_its_iteration_cap_names_both(tmp_path):
    from driver import loop

    ctx = _ctx(tmp_path, max_iters=2, budget_seconds=60)
    ctx.state.start_ts -= 120             # the budget is spent
    ctx.state.iteration = 1               # and iteration 2 is past --max-iters 2
    assert loop.gate(ctx) == loop.after_controls_from(0)
    assert ctx.state.loop_end == "budget_exhausted"            # as before: the first
    assert ctx.state.loop_limits == ["budget_exhausted", "max_iters_reached"]
    assert ctx.state.limits_reached() == ["budget_exhausted", "max_iters_reached"]


def test_an_older_run_json_without_loop_limits_reads_its_loop_end(tmp_path):
    st = RunState(start_ts=time.time(), dataset="hidden_number", backend="local",
                  loop_end="max_iters_reached")
    old = json.loads(st.model_dump_json())
    del old["loop_limits"]
    again = RunState.model_validate(old)
    assert again.loop_limits == [] and again.limits_reached() == ["max_iters_reached"]


# --------------------------------------------------------------------------------------------
# the gate: a multi-turn row's replies are a list

def test_a_multi_turn_rows_reasoning_must_be_a_list_and_the_error_says_what_to_write():
    from driver.gates import dataset

    row = {"question": "A number from 1 to 40 is hidden.", "answer": "29",
           "info": {"domain": "d", "sub_domain": "s", "difficulty": "hard", "structural_features": ["x"], "source": "teacher",
                    "reasoning": "20 then 30 then 25"}}
    assert dataset.row_problem(row) == ""                      # a single-turn env's completion
    said = dataset.row_problem(row, multi_turn=True)
    assert "must be a list of replies on a multi-turn env" in said and "one string" in said
    listed = {**row, "info": {**row["info"], "reasoning": ["20", "30", "25"]}}
    assert dataset.row_problem(listed, multi_turn=True) == ""
    assert describe.multi_turn({"interaction": {"kind": "multi_turn"}})
    assert not describe.multi_turn({"interaction": {"kind": "single_turn"}}) and not describe.multi_turn(None)


# --------------------------------------------------------------------------------------------
# diagnosis: an episode's length is the env's

def _episode(ex, reward, replies, stop="has_final_env_response", truncated=False):
    comp = []
    for k, r in enumerate(replies):
        comp.append({"role": "assistant", "content": r})
        if k < len(replies) - 1:
            comp.append({"role": "user", "content": "Higher. 3 guesses left."})
    return {"example_id": ex, "completion": comp, "reward": reward, "stop_condition": stop,
            "is_truncated": truncated}


def test_a_win_that_ends_a_game_early_is_not_effort_buys_risk():
    """Wins take 2 replies, losses run to the 6-turn limit: per episode, length and reward
    correlate at -1; per reply (each reply the same length) they do not."""
    rows = [_episode(ex, 1.0, ["<guess>20</guess>"] * 2) if k % 2 else
            _episode(ex, 0.0, ["<guess>20</guess>"] * 6, stop="max_turns_reached")
            for ex in range(8) for k in range(4)]
    per_episode = [float(diagnose.completion_length(r)) for r in rows]
    assert diagnose._pearson(per_episode, [r["reward"] for r in rows]) < -0.99
    d = diagnose.diagnose(rows)
    assert d["effort_kind"] == "reply_length" and d["effort_correlation"] is None
    assert d["verdict"] == "PASS", d["reasons"]


def test_truncation_advice_names_the_cause_it_saw():
    ctx = [_episode(ex, 0.0, ["<guess>20</guess>"] * 5, stop="prompt_too_long", truncated=True)
           for ex in range(4) for _ in range(2)]
    won = [_episode(ex, 1.0, ["<guess>20</guess>"]) for ex in range(4) for _ in range(2)]
    d = diagnose.diagnose(ctx + won)
    assert d["truncation_causes"] == {"context": 8, "past_closing_tag": 0, "reply_limit": 0}
    (why,) = [r for r in d["reasons"] if r.startswith("truncation rate")]
    assert "8 of 16 episodes ended prompt_too_long" in why and "raise the completion limit" not in why
    ran_on = [_episode(ex, 0.0, ["<guess>20</guess> and then I think more about it"],
                       stop="max_tokens", truncated=True) for ex in range(4) for _ in range(2)]
    d = diagnose.diagnose(ran_on + won)
    (why,) = [r for r in d["reasons"] if r.startswith("truncation rate")]
    assert "ran on past their closing tag (</guess>)" in why and "will not help" in why
    cut = [_episode(ex, 0.0, ["I think the number is"], stop="max_tokens", truncated=True)
           for ex in range(4) for _ in range(2)]
    (why,) = [r for r in diagnose.diagnose(cut + won)["reasons"] if r.startswith("truncation rate")]
    assert "raise the completion limit" in why
    # a few context cuts, below the bar: still named
    d = diagnose.diagnose(ctx[:1] + won * 2)
    assert not [r for r in d["reasons"] if r.startswith("truncation rate")]
    assert d["notes"] and "1 of 17 episodes ended prompt_too_long" in d["notes"][0]


# --------------------------------------------------------------------------------------------
# the student's context beside the env's turn limit

HUB = {"system_prompt": "x" * 94, "sample_train_rows": [{"question": "q" * 100}],
       "interaction": {"kind": "multi_turn", "max_turns": 14}}


def test_the_students_context_is_stated_beside_the_turn_limit_and_a_short_one_warned():
    line, warn = describe.context_lines(HUB, 1024, 2048, 32, chars=True)
    assert line.startswith("student context: 1024 tokens (the student's 1024 positions) beside the "
                           "env's max_turns 14: 14 replies at the reply limit (32) take 448 and the prompt about 200")
    assert "leaving 376 for the env's messages (about 26 a turn)" in line and warn is None
    line, warn = describe.context_lines(HUB, 1024, 512, 32, chars=True)
    assert "student context: 512 tokens (--seq-len 512)" in line
    assert warn and "cannot hold a full episode of 14 turns" in warn and "take 648" in warn
    assert describe.context_lines({"interaction": {"kind": "single_turn"}}, 1024, 2048, 32, True) == (None, None)


# --------------------------------------------------------------------------------------------
# the build sized for the machine

BUILD = {"params": 340_000, "sft_steps": 1500, "sft_batch": 32, "examples": 96,
         "seconds_per_step": 0.8, "estimate_s": 1200.0}


def test_a_default_build_too_long_for_the_startup_timeout_is_sized_to_fit(capsys):
    from driver.backends import local_student

    st = SimpleNamespace(model="builtin:tiny-char-qwen2?corpus=stream", startup_timeout_s=600.0)
    local_student._check_build_time(st, dict(BUILD), sizable=True)
    assert st.model == "builtin:tiny-char-qwen2?corpus=stream&sft_steps=625"   # 600 / 1.2 / 0.8
    err = capsys.readouterr().err
    assert "sized to fit it" in err and "625 of the recipe's 1500 steps" in err and "--startup-timeout 30m" in err
    # a size the user named is theirs: refused with the limit that fits
    st = SimpleNamespace(model="builtin:tiny-char-qwen2?sft_steps=1500", startup_timeout_s=600.0)
    with pytest.raises(UsageError, match="Run again with --startup-timeout 30m"):
        local_student._check_build_time(st, dict(BUILD), sizable=False)
    # and one a quarter of whose steps do not fit is refused too (too weak a student)
    st = SimpleNamespace(model="builtin:tiny-char-qwen2", startup_timeout_s=60.0)
    with pytest.raises(UsageError, match="longer than --startup-timeout"):
        local_student._check_build_time(st, dict(BUILD), sizable=True)
