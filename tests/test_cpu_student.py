"""A student for any env on CPU: `driver run --backend local --student-solver solve.py` on an env
with no family generator, no warm-start corpus and no reference completions (digit_tally). The
solver runs on the env's train rows only, the env's own rubric scores its completions, those at
full reward become a corpus keyed by its content, and the built-in student warm-starts on it
(recipe corpus=solver), its build shown as progress lines. Too few passing rows is refused
before a run directory exists."""
from __future__ import annotations

import json
import re
import sys
import textwrap

import pytest

from conftest import ENVS, cpu_user_env, driver, run_dir_from

pytest.importorskip("torch")

# a tiny recipe: the test checks the route, not the student's quality
TINY = "builtin:tiny-char-qwen2?sft_steps=20&sft_batch=8&hidden_size=32&ffn=64&layers=1&heads=2"


def _digit_tally():
    if ENVS not in sys.path:
        sys.path.insert(0, ENVS)
    import digit_tally

    return digit_tally


# What the refusal says to write: solve(question, info) -> a completion in the env's answer
# format (digit_tally's system prompt: <think>...</think> then <answer>...</answer>), or None.
# This one is wrong on purpose where the total is a multiple of 7.
SOLVER = '''
import re

def solve(question: str, info: dict) -> str | None:
    numbers = re.findall(r"\\d+", question)
    total = sum(int(c) for n in numbers for c in n)
    if total % 7 == 0:
        total += 1   # a wrong answer: the rubric drops it
    return f"<think>\\n{' + '.join(c for n in numbers for c in n)}\\n</think>\\n<answer>\\n{total}\\n</answer>"
'''

# answers only one-number questions, raises on two, is wrong on three
SOLVES_TOO_FEW = '''
import re

def solve(question: str, info: dict) -> str | None:
    numbers = re.findall(r"\\d+", question)
    if len(numbers) == 2:
        raise ValueError("two numbers: not handled")
    if len(numbers) == 3:
        return "<think>\\nguess\\n</think>\\n<answer>\\n0\\n</answer>"
    return f"<think>\\nsum\\n</think>\\n<answer>\\n{sum(int(c) for c in numbers[0])}\\n</answer>"
'''


@pytest.fixture(scope="module")
def solver_run(tmp_path_factory):
    """`driver run --student-solver` with the solver the refusal describes, as a dry run."""
    tmp_path = tmp_path_factory.mktemp("solver")
    env = cpu_user_env(tmp_path)
    (tmp_path / "solve.py").write_text(textwrap.dedent(SOLVER))
    r = driver(["run", "--dataset", "digit_tally", "--backend", "local", "--runs-dir",
                str(tmp_path / "runs"), "--model", TINY, "--student-solver", "solve.py",
                "--teacher", "agent", "--dry-run"], env, cwd=tmp_path)
    return tmp_path, r


def test_the_solver_corpus_holds_only_train_rows_the_rubric_scored_at_full_reward(solver_run):
    tmp_path, r = solver_run
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    dt = _digit_tally()
    train, evals = dt._rows(0, 800), dt._rows(1, 200)
    right = [row for row in train if digit_total_of(dt, row) % 7]
    state = json.loads((run_dir_from(r.stdout) / "run.json").read_text())
    m = re.fullmatch(r"builtin:tiny-char-qwen2\?sft_steps=20&sft_batch=8&hidden_size=32&ffn=64"
                     r"&layers=1&heads=2&corpus=solver&solver=([0-9a-f]{16})", state["model"])
    assert m, state["model"]
    assert state["student_solver"] == str(tmp_path / "solve.py")
    err = " ".join(r.stderr.split())
    assert (f"{len(right)} of the 800 train rows of digit_tally passed: solve() returned a "
            f"completion for 800, and the env's rubric gave {len(right)} of them the full reward "
            "(1.2)") in err
    corpus = tmp_path / "cache" / "corpora" / f"solver-{m[1]}.jsonl"
    rows = [json.loads(line) for line in corpus.read_text().splitlines()]
    assert len(rows) == len(right) < 800   # the wrong completions were dropped
    questions = [row["prompt"][-1]["content"] for row in rows]
    assert questions == [row["question"] for row in right]   # train rows, in order
    assert rows[0]["prompt"][0] == {"role": "system", "content": dt.SYSTEM_PROMPT}
    eval_only = {row["question"] for row in evals} - {row["question"] for row in train}
    assert len(eval_only) > 150 and not eval_only & set(questions)
    for row, want in zip(rows, right):
        got = re.search(r"<answer>\n(\d+)\n</answer>", row["info"]["reference_completion"])
        assert got and int(got[1]) == dt.digit_total(want["info"]["numbers"])


def digit_total_of(dt, row) -> int:
    return dt.digit_total(row["info"]["numbers"])


def test_the_built_in_student_is_built_from_the_solver_corpus_with_progress_lines(solver_run, monkeypatch):
    """The recipe run.json names builds from that corpus (a tiny recipe), logging each SFT step's
    loss and ETA; the driver's iter_0 shows the last of those lines before the first train step."""
    from driver.arms import progress
    from embedded_trainer import recipe

    tmp_path, r = solver_run
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    monkeypatch.setenv("EMBEDDED_TRAINER_CACHE", str(tmp_path / "cache"))
    model = json.loads((run_dir_from(r.stdout) / "run.json").read_text())["model"]
    kept = len((tmp_path / "cache" / "corpora" / f"solver-{model[-16:]}.jsonl").read_text().splitlines())
    key = json.dumps({"id": "digit_tally", "args": {}}, sort_keys=True)
    lines: list[str] = []
    shown: list[str | None] = []
    out = tmp_path / "iter_0_out"
    assert progress.student_build(out) is None          # no build under way

    def log(text: str) -> None:   # the driver's poll, as it would see the output dir at each line
        lines.append(text)
        shown.append(progress.student_build(out))

    built = recipe.materialize(model, None, key, log=log,   # the env is not read
                               progress=out / recipe.BUILD_PROGRESS)
    assert progress.BUILD_PROGRESS == recipe.BUILD_PROGRESS
    assert built == tmp_path / "cache" / "models" / recipe.model_dir_name(model, key)
    assert (built / "DONE").exists()
    made = json.loads((built / recipe.MARKER).read_text())
    assert made["spec"]["corpus"] == "solver" and made["spec"]["solver"] == model[-16:]
    assert f"SFT on {kept} solver rows, 20 steps" in lines[0]
    steps = [ln for ln in lines if ln.startswith("sft step ")]
    assert [int(re.match(r"sft step (\d+)/20 ", ln)[1]) for ln in steps] == list(range(1, 21))
    assert all(re.fullmatch(r"sft step \d+/20 loss \d+\.\d{4} \(\d+s, eta \d+s\)", ln) for ln in steps)
    assert steps[-1].endswith(", eta 0s)")
    # the progress file trails the log line by one write: at line k the file says step k-1
    assert shown[0] is None and shown[1] is None        # the build's first line, then step 1
    for k, ln in enumerate(steps[:-1], start=1):
        step, loss = re.match(r"sft step (\d+)/20 loss (\S+) ", ln).groups()
        assert shown[k + 1] is not None and shown[k + 1].startswith(
            f"building the student: sft step {step}/20 loss {loss} · eta "), (k, shown[k + 1])
    assert progress.student_build(out).startswith("building the student: sft step 20/20 ")
    (out / recipe.BUILD_PROGRESS).write_text("{")      # torn: shown as nothing, never an error
    assert progress.student_build(out) is None
    # another corpus is another student
    other = model[:-16] + "0" * 16
    assert recipe.model_dir_name(other, key) != recipe.model_dir_name(model, key)


def test_a_solver_that_passes_too_few_rows_is_refused_before_a_run_directory(tmp_path):
    env = cpu_user_env(tmp_path)
    runs = tmp_path / "runs"
    solver = tmp_path / "few.py"
    solver.write_text(textwrap.dedent(SOLVES_TOO_FEW))
    dt = _digit_tally()
    train = dt._rows(0, 800)
    ones = sum(len(row["info"]["numbers"]) == 1 for row in train)
    twos = sum(len(row["info"]["numbers"]) == 2 for row in train)
    r = driver(["run", "--dataset", "digit_tally", "--backend", "local", "--runs-dir", str(runs),
                "--model", TINY, "--student-solver", str(solver)], env)
    assert r.returncode == 2, r.stdout + r.stderr[-3000:]
    err = " ".join(r.stderr.split())
    assert (f"--student-solver: {ones} of the 800 train rows of digit_tally passed: solve() "
            f"returned a completion for {800 - twos}, raised on {twos} (first: ValueError: two "
            f"numbers: not handled), and the env's rubric gave {ones} of them the full reward "
            "(1.2); the built-in student's warm start needs at least 400") in err
    assert "Completions the rubric scored below full reward: - question: 'What is the total" in err
    assert "Make solve() answer more train rows" in err
    assert not runs.exists() and not (tmp_path / "cache" / "corpora").exists()
    # a missing file, and the flag on a backend without the built-in student, are refused too
    r = driver(["run", "--dataset", "digit_tally", "--backend", "local", "--runs-dir", str(runs),
                "--student-solver", str(tmp_path / "nope.py")], env)
    assert r.returncode == 2 and f"--student-solver {tmp_path / 'nope.py'} is not a file" in r.stderr
    r = driver(["run", "--dataset", "digit_tally", "--backend", "prime_rl", "--prime-rl-dir",
                str(tmp_path), "--runs-dir", str(runs), "--student-solver", str(solver)], env)
    assert r.returncode == 2
    assert "--student-solver warm-starts the embedded trainer's built-in student" in " ".join(r.stderr.split())
    assert not runs.exists()


@pytest.mark.extended   # a real trainer run (~25 s); its unit-level twin above stays in the main suite
def test_iter_0_builds_the_solver_student_showing_its_sft_steps_then_trains_and_evaluates_it(tmp_path):
    """The real embedded trainer, no double: `driver run --student-solver` with a tiny recipe
    builds the student inside iter_0's launch, the driver prints the build's SFT lines before the
    first train step, then iter_0 trains and evaluates that student (the agent teacher stops the
    run with exit 3 after it)."""
    env = cpu_user_env(tmp_path)
    (tmp_path / "solve.py").write_text(textwrap.dedent(SOLVER))
    model = TINY.replace("sft_steps=20", "sft_steps=300")
    r = driver(["run", "--dataset", "digit_tally", "--backend", "local", "--runs-dir",
                str(tmp_path / "runs"), "--model", model, "--student-solver", "solve.py",
                "--teacher", "agent", "--steps-per-run", "2", "--eval-examples", "32"], env,
               cwd=tmp_path)
    assert r.returncode == 3, r.stdout + r.stderr[-3000:]
    shown = re.findall(r"^\[iter_0\] building the student: sft step (\d+)/300 loss \d+\.\d{4} · eta \S+$",
                       r.stderr, re.MULTILINE)
    assert shown and int(shown[-1]) == 300, r.stderr[-3000:]
    assert r.stderr.index("building the student") < r.stderr.index("[iter_0] evaluated")
    rd = run_dir_from(r.stdout)
    it0 = next(e for e in json.loads((rd / "metrics.json").read_text())["iters"] if e["iter"] == 0)
    assert it0["n_eval"] == 32 and 0 <= it0["eval_acc"] <= 1
    built = list((tmp_path / "cache" / "models").iterdir())
    assert len(built) == 1 and json.loads((built[0] / "recipe.json").read_text())["recipe"] == \
        json.loads((rd / "run.json").read_text())["model"]


@pytest.mark.long   # a whole run on the real trainer (3–6 min on 2 cores): outside CI
def test_a_cpu_user_on_an_env_without_a_generator_is_refused_then_served_then_runs_to_finalize(tmp_path):
    """A CPU user on digit_tally (no family generator, no warm-start corpus, no reference
    completions): refused before a run directory exists with the solver route, then served by
    that route, then a whole run on the real embedded trainer, a teacher knowing only TEACHER.md,
    through training, evaluation and three controls to finalize."""
    from test_agent_path import teacher_from_brief

    env = cpu_user_env(tmp_path)
    runs = tmp_path / "runs"
    model = "builtin:tiny-char-qwen2?sft_steps=20&hidden_size=32&ffn=64&layers=1&heads=2"
    r = driver(["run", "--dataset", "digit_tally", "--backend", "local", "--runs-dir", str(runs),
                "--model", model], env)
    assert r.returncode == 2 and not runs.exists(), r.stderr[-3000:]
    route = re.search(r"driver run --dataset digit_tally --backend local --student-solver solve\.py",
                      " ".join(r.stderr.split()))
    assert route, r.stderr[-3000:]
    (tmp_path / "solve.py").write_text(textwrap.dedent(SOLVER))
    r = driver(["run", "--dataset", "digit_tally", "--backend", "local", "--runs-dir", str(runs),
                "--model", model, "--student-solver", "solve.py", "--teacher", "agent",
                "--max-iters", "2", "--steps-per-run", "2", "--eval-examples", "24",
                "--max-completion-tokens", "24", "--probe-prompts", "8", "--probe-min-live", "0"],
               env, cwd=tmp_path)
    rd = run_dir_from(r.stdout)
    stops = 0
    while r.returncode == 3:
        stops += 1
        st = json.loads((rd / "run.json").read_text())
        out = teacher_from_brief(rd / f"iter_{st['iteration']}" / "TEACHER.md", env)
        assert out["validate"].returncode == 0, out["validate"].stdout[-3000:]
        r = driver(["resume", str(rd)], env)
    assert r.returncode == 0, r.stderr[-4000:]
    assert stops == 1
    state = json.loads((rd / "run.json").read_text())
    assert state["status"] == "max_iters_reached" and state["backend"] == "local"
    assert "corpus=solver&solver=" in state["model"]
    m = json.loads((rd / "metrics.json").read_text())
    assert [i["iter"] for i in m["iters"]] == [0, 1] and all(i["n_eval"] == 24 for i in m["iters"])
    assert {c["run"] for c in m["controls"]} == {"run_a", "run_b", "run_c"}
    best = json.loads((rd / "best_iter.json").read_text())   # the one trained iteration
    assert best["best_iter"] == 1 and (rd / best["dataset"]).is_file() and (rd / best["env_dir"]).is_dir()
    assert "Holm p" in r.stdout     # finalize printed the summary table
    # the student every arm started from was built once, from the solver's corpus
    built = list((tmp_path / "cache" / "models").iterdir())
    assert len(built) == 1 and json.loads((built[0] / "recipe.json").read_text())["recipe"] == state["model"]
