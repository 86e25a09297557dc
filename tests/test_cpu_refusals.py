"""What `driver resume` cannot fix is refused before a run directory exists: a CPU user's own env
(no family generator, no warm-start corpus, no reference completions) with the built-in student,
which the embedded trainer cannot build for it; and `driver resume RUN --model X`, since a run's
student is fixed."""
from __future__ import annotations

import json
import time

import pytest

from conftest import cpu_user_env, driver, launches, run_dir_from

pytest.importorskip("torch")



def test_a_cpu_user_on_an_env_the_built_in_student_cannot_warm_start_on_is_refused_before_a_run_directory(tmp_path):
    """digit_tally has no family generator, no warm_start_corpus and no reference completions:
    the default student (corpus=stream) and the train-corpus one are both refused with exit 2,
    naming the cause and the commands that work, and nothing is created, not even --runs-dir."""
    env = cpu_user_env(tmp_path)
    runs = tmp_path / "runs"
    r = driver(["run", "--dataset", "digit_tally", "--backend", "local", "--runs-dir", str(runs)], env)
    assert r.returncode == 2, r.stdout + r.stderr[-3000:]
    err = " ".join(r.stderr.split())
    assert "--model builtin:tiny-char-qwen2 cannot be built for digit_tally" in err
    assert "digit_tally has no warm_start_corpus(count, seed, **options)" in err
    assert "its train rows carry no reference completions either" in err
    assert "`driver resume` cannot change --model), so nothing was created" in err
    assert "driver run --dataset digit_tally --backend local --model PATH" in err
    assert "driver run --dataset digit_tally --backend prime_rl --prime-rl-dir DIR" in err
    assert "corpus=train" in err and "--model 'builtin" not in err   # no recipe route here
    # the CPU route for any env: a solver (tests/test_cpu_student.py follows it)
    assert "write solve.py defining solve(question: str, info: dict) -> str | None" in err
    assert "keeps the completions the env's rubric scores at full reward" in err
    assert "at least 200 of them (all of a smaller split) and 50% of the split" in err
    assert "driver run --dataset digit_tally --backend local --student-solver solve.py" in err
    assert "run directory:" not in r.stdout and not runs.exists()
    assert launches(tmp_path) == []

    r = driver(["run", "--dataset", "digit_tally", "--backend", "local", "--runs-dir", str(runs),
                "--model", "builtin:tiny-char-qwen2?corpus=train&sft_steps=20"], env)
    assert r.returncode == 2, r.stdout + r.stderr[-3000:]
    err = " ".join(r.stderr.split())
    assert "warm-starts by SFT on reference completions (corpus=train), and none of the" in err
    assert "train rows of digit_tally carries one (info.reference_completion, or info.reference_trajectory" in err
    assert not runs.exists()


def test_a_stream_student_on_an_env_with_reference_completions_is_pointed_at_corpus_train(tmp_path):
    env = cpu_user_env(tmp_path)
    runs = tmp_path / "runs"
    r = driver(["run", "--dataset", "parity_toy", "--backend", "local", "--runs-dir", str(runs)], env)
    assert r.returncode == 2, r.stdout + r.stderr[-3000:]
    err = " ".join(r.stderr.split())
    assert "parity_toy has no warm_start_corpus" in err
    assert ("the built-in student warm-started on the 800 train rows that carry a reference "
            "completion: driver run --dataset parity_toy --backend local --model "
            "'builtin:tiny-char-qwen2?corpus=train'") in err
    assert not runs.exists()


def test_a_student_that_can_be_built_or_is_built_already_is_not_refused(tmp_path):
    """The route the refusal names works (parity_toy's reference completions, corpus=train), and
    a student already built for the env (in the cache) needs no corpus at all."""
    from embedded_trainer import recipe

    env = cpu_user_env(tmp_path)
    runs = tmp_path / "runs"
    # the build's time is measured on this machine: a generous limit, so a busy one is not refused
    r = driver(["run", "--dataset", "parity_toy", "--backend", "local", "--runs-dir", str(runs),
                "--model", "builtin:tiny-char-qwen2?corpus=train", "--teacher", "agent", "--dry-run",
                "--startup-timeout", "6h"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "dry run: nothing trained" in r.stdout
    built = tmp_path / "cache" / "models" / recipe.model_dir_name(
        recipe.RECIPE_PREFIX, json.dumps({"id": "digit_tally", "args": {}}, sort_keys=True))
    built.mkdir(parents=True)
    (built / "DONE").write_text("")
    r = driver(["run", "--dataset", "digit_tally", "--backend", "local", "--runs-dir", str(runs),
                "--teacher", "agent", "--dry-run"], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert run_dir_from(r.stdout).exists()


def test_resume_with_another_model_is_refused_with_the_command_that_works(tmp_path):
    from driver.run.model import RunState
    from driver.run.rundir import RunDir

    rd = RunDir.create(tmp_path / "runs", "digit_tally")
    rd.save(RunState(dataset="digit_tally", model="builtin:tiny-char-qwen2", backend="local",
                     start_ts=time.time(), teacher="agent", phase="train", iteration=0))
    before = rd.run_json.read_text()
    env = cpu_user_env(tmp_path)
    r = driver(["resume", str(rd.path), "--model", "/models/qwen3-0.6b", "--budget", "2h"], env)
    assert r.returncode == 2, r.stdout + r.stderr[-3000:]
    err = " ".join(r.stderr.split())
    assert "`driver resume` cannot change the student" in err
    assert ("`driver run --dataset digit_tally --backend local --model /models/qwen3-0.6b` "
            "(add your other flags)") in err
    assert f"`--init-from {rd.path}` reuses this run's iter_0 only for a run of the same model" in err
    assert rd.run_json.read_text() == before and launches(tmp_path) == []   # nothing changed
    r = driver(["resume", str(rd.path), "--model", "builtin:tiny-char-qwen2"], env)
    assert r.returncode == 2 and "student already is builtin:tiny-char-qwen2" in r.stderr
    h = driver(["resume", "--help"], env)
    assert "--model MODEL" in h.stdout and "refused: a run's student is fixed" in " ".join(h.stdout.split())
