"""Auxiliary rewards are bounded: an aux function reads only its completion, answer and info (the
text check), and returns a number in [0, 1] on every generated row (run in the training
interpreter, driver/envside/aux.py). A failure names the function.

The rows are StockArithmetic's, from its built-in generator; `sys.executable` is the training
interpreter. The last tests play a teacher that knows only TEACHER.md's words, on a real run.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

import teacher_files
from conftest import FAST, driver, driver_env, run_dir_from
from driver.envs import envside
from driver.gates import aux_rewards
from generators.stock_arithmetic import BUCKETS, generate
from stock_arithmetic.data import build_splits

PY = sys.executable
WEAKNESS = teacher_files.weakness(None)
MODE = next(iter(BUCKETS))[1]   # a sub-domain of WEAKNESS: the failure mode an aux reward names
SIG = "(completion, answer, info=None, state=None, **kwargs) -> float"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("aux") / "dataset.jsonl"
    skeletons = [{"source": f"train_step_3_idx_{i}", "problem": r["info"]["problem"]}
                 for i, r in enumerate(build_splits(0)["train"][:200])]
    generate(WEAKNESS, skeletons, out=str(path), seed=1)
    return path


def hard_lines(dataset: Path) -> list[int]:
    return [n for n, line in enumerate(dataset.read_text().splitlines(), 1)
            if json.loads(line)["info"]["difficulty"] == "hard"]


def aux_file(tmp_path: Path, *functions: tuple[str, str], head: str = "", weight: float = 0.1) -> Path:
    """aux_rewards.py declaring each (name, body) at `weight` for MODE."""
    decl = ", ".join(f"({name!r}, {weight}, {MODE!r})" for name, _ in functions)
    text = head + f"AUX_REWARDS = [{decl}]\n\n"
    for name, body in functions:
        text += f"\nasync def {name}{SIG}:\n" + "".join(f"    {b}\n" for b in body.splitlines()) + "\n"
    p = tmp_path / "aux_rewards.py"
    p.write_text(text)
    return p


def line(rep, name: str) -> tuple[bool, str]:
    [(ok, detail)] = [(ok, d) for n, ok, d in rep.lines if n == name]
    return ok, detail


# --------------------------------------------------------------------------------------------
# the range line: every declared function on every row

def test_a_reward_of_10_fails_the_range_line_naming_the_function_its_value_and_rows(tmp_path, dataset):
    p = aux_file(tmp_path, ("ten_on_hard", 'return 10.0 if info["difficulty"] == "hard" else 0.0'),
                 ("steady", "return 0.5"))
    ok, detail = line(aux_rewards.check_rows(PY, p, dataset), aux_rewards.RANGE_LINE)
    hard = hard_lines(dataset)
    assert not ok
    assert detail == (f"ten_on_hard returned 10.0 (not a number in [0, 1]) on {len(hard)} rows, "
                      f"lines {', '.join(map(str, hard[:5]))} ...")
    assert "steady" not in detail      # a function in range is not blamed


def test_a_reward_of_one_half_passes_every_line(tmp_path, dataset):
    p = aux_file(tmp_path, ("steady", "return 0.5"))
    rep = aux_rewards.check_with_rows(PY, p, WEAKNESS, dataset)
    assert rep.passed, rep.render()
    assert [n for n, _, _ in rep.lines][-2:] == [aux_rewards.READS_LINE, aux_rewards.RANGE_LINE]


@pytest.mark.parametrize("value", ["-0.5", "1.0001", "float('nan')", "None", "'0.5'", "[0.5]"])
def test_anything_but_a_number_in_0_1_fails(tmp_path, dataset, value):
    p = aux_file(tmp_path, ("odd", f"return {value}"))
    ok, detail = line(aux_rewards.check_rows(PY, p, dataset), aux_rewards.RANGE_LINE)
    shown = repr(eval(value))
    assert not ok and detail.startswith(f"odd returned {shown} (not a number in [0, 1]) on 600 rows, "
                                        "lines 1, 2, 3, 4, 5 ..."), detail


@pytest.mark.parametrize("value", ["0", "1", "0.25", "True"])
def test_the_bounds_and_numbers_inside_them_pass(tmp_path, dataset, value):
    assert line(aux_rewards.check_rows(PY, aux_file(tmp_path, ("edge", f"return {value}")), dataset),
                aux_rewards.RANGE_LINE) == (True, "")


def test_a_function_that_raises_fails_with_its_name_and_the_exception_text(tmp_path, dataset):
    p = aux_file(tmp_path, ("reads_a_missing_key", 'return 1.0 if info["no_such_key"] else 0.0'),
                 ("steady", "return 0.5"))
    ok, detail = line(aux_rewards.check_rows(PY, p, dataset), aux_rewards.RANGE_LINE)
    assert not ok
    assert detail == "reads_a_missing_key raised KeyError: 'no_such_key' on 600 rows, lines 1, 2, 3, 4, 5 ..."


def test_the_function_gets_the_reasoning_as_the_assistant_message_and_the_rows_answer_and_info(tmp_path, dataset):
    # 1.0 exactly when the three arguments are the row's, in the shape the hub rubric scores
    body = ('ok = completion == [{"role": "assistant", "content": info["reasoning"]}]\n'
            'return 1.0 if ok and answer in info["reasoning"] and isinstance(answer, str) else 2.0')
    assert line(aux_rewards.check_rows(PY, aux_file(tmp_path, ("shape", body)), dataset), aux_rewards.RANGE_LINE) == (True, "")


def test_a_function_past_its_time_limit_fails_named_and_the_check_goes_on(tmp_path, dataset):
    p = aux_file(tmp_path, ("spins", "while True:\n    pass"), ("too_big", "return 3"))
    ok, detail = line(aux_rewards.check_rows(PY, p, dataset, call_timeout=0.5), aux_rewards.RANGE_LINE)
    assert not ok
    assert detail.startswith("spins ran past its 0.5 s limit on 1 row, line 1; too_big returned 3"), detail


def test_a_file_that_does_not_load_fails_the_range_line_with_the_cause(tmp_path, dataset):
    p = aux_file(tmp_path, ("steady", "return 0.5"), head="LIMIT = 1 / 0\n")
    ok, detail = line(aux_rewards.check_rows(PY, p, dataset), aux_rewards.RANGE_LINE)
    assert not ok and detail == "aux_rewards.py did not load: ZeroDivisionError: division by zero"


# --------------------------------------------------------------------------------------------
# the reads line: the text check

@pytest.mark.parametrize("body,words", [
    ('return 1.0 if state else 0.0', "reads `state`"),
    ('return kwargs.get("bonus", 0.0)', "reads `kwargs`"),
    ('return 1.0 if "state" in locals() else 0.0', "calls `locals`"),
    ('global LIMIT\nLIMIT = 0\nreturn 0.0', "declares global LIMIT"),
    ('return getattr(completion, "x", 0.0)', "calls `getattr`"),
    ('return 0.0 if __file__ else 1.0', "reads `__file__`, a name it does not define"),
    ('import inspect\nreturn 0.0 if inspect.currentframe().f_back else 1.0', "imports inspect"),
])
def test_reading_anything_but_completion_answer_info_fails_the_reads_line_naming_the_function(
        tmp_path, dataset, body, words):
    p = aux_file(tmp_path, ("peeks", body), ("steady", "return 0.5"), head="LIMIT = 1\n")
    rep = aux_rewards.check_with_rows(PY, p, WEAKNESS, dataset)
    ok, detail = line(rep, aux_rewards.READS_LINE)
    assert not ok and detail.startswith(f"peeks: {words}") and "steady" not in detail, detail
    # a file the text check refuses is never run
    assert line(rep, aux_rewards.RANGE_LINE) == (False, "not run: the functions run on the rows once the "
                                                 "aux lines above pass")


def test_a_helper_function_and_constants_of_the_same_file_pass(tmp_path, dataset):
    head = ('import re\nfrom math import isclose\n\nBRACE = re.compile(r"^\\s*\\{")\nFULL = 1.0\n\n\n'
            'def _text(completion):\n    return completion[-1]["content"] if completion else ""\n\n')
    p = aux_file(tmp_path, ("starts_with_brace",
                            "hit = bool(BRACE.search(_text(completion)))\n"
                            "return FULL if hit and isclose(FULL, 1.0) else 0.0"), head=head)
    rep = aux_rewards.check_with_rows(PY, p, WEAKNESS, dataset)
    assert rep.passed, rep.render()


def test_a_helper_may_not_read_what_an_aux_function_may_not(tmp_path, dataset):
    head = "def _peek():\n    return vars()\n\n"
    p = aux_file(tmp_path, ("steady", "return 0.5 if _peek() is not None else 0.0"), head=head)
    assert line(aux_rewards.check(p, WEAKNESS), aux_rewards.READS_LINE) == (False, "_peek: calls `vars`")


# --------------------------------------------------------------------------------------------
# a teacher that knows only TEACHER.md's words

def read_aux_rule(text: str) -> dict:
    """The aux rule as TEACHER.md (or the LLM prompt) states it, parsed from its words."""
    flat = " ".join(text.split())
    return {
        "signature": re.search(r"`async def fn(\([^`]*\) -> float)`", flat).group(1),
        "decl": re.search(r"`AUX_REWARDS = \[\(\"fn_name\", weight, \"failure mode\"\)\]`", flat).group(0),
        "max_weight": float(re.search(r"each weight at most ([\d.]+)", flat).group(1)),
        "reads": re.findall(r"`(\w+)`", re.search(r"reads only its (.*?) \(", flat).group(1)),
        "never": re.findall(r"`(\w+)`", re.search(r"\(never (.*?), no `global`", flat).group(1)),
        "range": tuple(map(float, re.search(r"returns a number in \[(\d), (\d)\]", flat).groups())),
        "per_call_s": float(re.search(r"(\d+) seconds per call", flat).group(1)),
        "lines": re.findall(r"\*\*([^*]+)\*\*", flat[flat.index("Its gate lines:"):].split(".", 1)[0]),
    }


def aux_to_the_words(rule: dict, name: str, body: str, mode: str) -> str:
    return (rule["decl"].strip("`").replace('"fn_name"', repr(name)).replace("weight", str(rule["max_weight"]))
            .replace('"failure mode"', repr(mode))
            + f"\n\n\nasync def {name}{rule['signature']}:\n    {body}\n")


def test_teacher_md_and_the_llm_prompt_state_the_aux_rule_the_gate_enforces(tmp_path):
    from driver.errors import WaitingForTeacher
    from driver.teachers import Brief
    from driver.teachers.agent import AgentTeacher
    from driver.teachers.llm import render_prompt

    d = tmp_path / "iter_1"
    d.mkdir()
    (tmp_path / "failures.jsonl").write_text(json.dumps({"prompt": "p", "completion": "c", "reward": 0.0}) + "\n")
    b = Brief(run_dir=tmp_path, iter_dir=d, iteration=1,
              hub={"env_id": "stock_arithmetic", "env_args": {}, "answer_format_instruction": "JSON"},
              failures_path=tmp_path / "failures.jsonl", failures_step="train_step_3",
              eval_accs={"iter_0": 0.2})
    with pytest.raises(WaitingForTeacher):
        AgentTeacher().teach(b)
    system, user = render_prompt(b)
    for where, text in (("TEACHER.md", (d / "TEACHER.md").read_text()), ("LLM prompt", user)):
        rule = read_aux_rule(text)
        assert rule["reads"] == ["completion", "answer", "info"], where
        assert rule["never"] == list(aux_rewards.UNREAD) and rule["range"] == (0.0, 1.0), where
        assert rule["signature"] == SIG and rule["max_weight"] == aux_rewards.MAX_WEIGHT, where
        assert rule["lines"] == [aux_rewards.READS_LINE, aux_rewards.RANGE_LINE], where
        assert rule["per_call_s"] == envside.AuxRequest.model_fields["call_timeout"].default, where
    flat = " ".join(system.split())
    assert "read only completion, answer and info and return a number in [0, 1]" in flat
    assert "on every generated row" in flat


@pytest.mark.extended   # a run to iter_1's gate, three times (15-20 s); each gate line is tested above
def test_a_teacher_knowing_only_teacher_md_is_refused_for_10_or_state_and_passes_to_the_words(tmp_path):
    """Through the iteration's dataset phase: two attempts refused by the lines TEACHER.md names,
    the third, written to its words, passes the gate (the run is stopped right after it: what
    an aux reward does in training is tests/test_environments.py's)."""
    env = driver_env(tmp_path)
    r = driver(["run", "--teacher", "agent", "--max-iters", "2", "--runs-dir", str(tmp_path / "runs"), *FAST], env)
    assert r.returncode == 3, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    brief = rd / "iter_1" / "TEACHER.md"
    text = brief.read_text()
    rule = read_aux_rule(text)
    iter_dir = Path(re.search(r"Write these files in `([^`]+)`", text).group(1))
    failures = Path(re.search(r"lowest reward first: `([^`]+)`", text).group(1))
    # TEACHER.md: each failure has its `idx` and `step`; a row cites it as train_step_<step>_idx_<idx>
    cite = re.search(r"cites one as `skeleton:(train_step_<step>_idx_<idx>)`", text).group(1)
    skeletons = [{"source": cite.replace("<step>", str(r["step"])).replace("<idx>", str(r["idx"])),
                  "problem": r["info"]["problem"]}
                 for r in (json.loads(l) for l in failures.open()) if r["reward"] < 0.5]
    mode = json.loads(teacher_files.passing(skeletons, 1, "stock_arithmetic")["weakness.json"])[
        "domains"][0]["sub_domains"][0]["name"]
    reads, never = rule["reads"], rule["never"]
    attempts = [   # (aux function, its body, the gate line TEACHER.md names that must refuse it)
        ("peeks_at_state", f"return 1.0 if {never[0]} else 0.0", rule["lines"][0]),
        ("ten_times", f"return {rule['range'][1] * 10} if {reads[1]} else 0.0", rule["lines"][1]),
        ("json_first", f'return 1.0 if {reads[0]}[-1]["content"].lstrip().startswith("{{") else 0.0', None),
    ]
    for name, body, refused_by in attempts:
        files = {**teacher_files.passing(skeletons, 1, "stock_arithmetic"),
                 "aux_rewards.py": aux_to_the_words(rule, name, body, mode)}
        for fname, content in files.items():
            (iter_dir / fname).write_text(content)
        stop = {} if refused_by else {"DRIVER_FAULT_BUG_AT": "phase:environment:start"}
        r = driver(["resume", str(rd)], {**env, **stop})
        gate = json.loads((iter_dir / "gate_report.json").read_text())
        verdict = {x["name"]: (x["ok"], x["detail"]) for x in gate["lines"]}
        if refused_by:
            assert r.returncode == 3, r.stderr[-3000:]          # back to the teacher
            ok, detail = verdict[refused_by]
            assert not ok and detail.startswith(name), detail
            assert name in brief.read_text().split("## The gate's last verdict", 1)[1]
        else:
            assert "simulated unexpected error at phase:environment:start" in r.stderr, r.stderr[-3000:]
            assert gate["passed"] and verdict[rule["lines"][0]] == verdict[rule["lines"][1]] == (True, "")
            assert (iter_dir / "dataset_record.json").exists()
    assert json.loads((iter_dir / "attempts.json").read_text())["attempts"] == 2
