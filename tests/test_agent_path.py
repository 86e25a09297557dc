"""A user's own environment through the agent path, played by a teacher that knows only what
TEACHER.md states (and the files it points to): never the gate's code.

The env (tests/envs/digit_tally.py) is third-party-style: XMLParser with think/answer, a shaped
reward whose maximum is 1.2, a correctness function that reads `info["numbers"]`, and no family
generator. The teacher reads the row schema, the gate's thresholds, the info keys the rubric
reads and the answer format from TEACHER.md, writes a generator, and must pass the gate on its
first attempt in both iterations.
"""
from __future__ import annotations

import json
import tomllib
import re
import subprocess
import sys
from pathlib import Path

from conftest import ENVS, FAST, driver, driver_env, run_dir_from, with_test_envs
from tests_support import assert_every_eval_file_is_sealed, files_holding



def _env(tmp_path) -> dict:
    env = driver_env(tmp_path)
    env["PYTHONPATH"] = with_test_envs(env)
    return env


def _pct(text: str, rule: str) -> float:
    """A threshold stated in TEACHER.md's gate lines, e.g. 'at least 40% of rows are hard'."""
    return int(re.search(rule, text).group(1)) / 100


GENERATOR = r'''
import json, random
from generators import RowWriter, clone_key

PLAN = json.loads(__PLAN__)
rng = random.Random(PLAN["seed"])
prior = set()
for p in PLAN["prior"]:
    with open(p) as f:
        prior |= {clone_key(json.loads(l)["question"]) for l in f if l.strip()}
LEADS = ["Please", "Kindly", "Now", "Quickly", "Carefully", "Next", "Then", "For this task,",
         "As a warm-up,", "In your head,", "Step by step,", "Without a calculator,"]
VERBS = ["add up every digit of", "sum each digit in", "total the digits of", "combine all digits of",
         "accumulate the digits across", "find the digit sum over", "tally every digit within",
         "count up the digits of", "work out the sum of digits in", "compute the digit total of"]
ENDS = [".", ", and reply with one number.", ", giving a single integer.", ", then state it.",
        ", and report the result.", " for me."]   # TEACHER.md: plan the wordings before the count

def features(nums):
    f = []
    if len(nums) >= 2: f.append("several_numbers")
    if len(nums) >= 3: f.append("three_numbers")
    if any("0" in str(x) for x in nums): f.append("zero_digit")
    if any(x >= 1000 for x in nums): f.append("four_digits")
    if any(len(set(str(x))) < len(str(x)) for x in nums): f.append("repeated_digit")
    return f

def numbers(k, hard):
    while True:
        nums = [rng.randint(1000 if hard else 10, 9999 if hard else 999) for _ in range(k)]
        f = features(nums)
        if len(f) >= (3 if hard else 2):
            return nums, f

def wording(k, nums):
    for _ in range(10000):
        q = f"{rng.choice(LEADS)} {rng.choice(VERBS)} " + " and ".join(map(str, nums)) + rng.choice(ENDS)
        if clone_key(q) not in seen:
            return q
    raise SystemExit("ran out of wordings")

w = json.load(open("weakness.json"))
seen = set(prior)
writer = RowWriter("dataset.jsonl")
skeletons = PLAN["skeletons"]
n_skel = 0
for bucket, count in w["allocations"].items():
    dom, sub = bucket.split(" / ")
    k = {"one number": 1, "two numbers": 2, "three numbers": 3}[dom]
    for i in range(count):
        hard = i % 20 < PLAN["hard_per_20"]
        nums, f = numbers(k + (1 if sub.endswith("with a fourth") else 0), hard)
        q = wording(k, nums)
        seen.add(clone_key(q))
        source = "template:" + sub
        if n_skel < PLAN["skeleton_rows"] and skeletons:
            source = "skeleton:" + skeletons[n_skel % len(skeletons)]
            n_skel += 1
        total = sum(int(c) for x in nums for c in str(x))
        digits = [c for x in nums for c in str(x)]
        info = {"domain": dom, "sub_domain": sub, "source": source,
                "difficulty": "hard" if len(f) >= 3 else "medium",
                "structural_features": f, "reasoning_depth": len(digits),
                "reasoning": "<think>" + "+".join(digits) + f"={total}</think><answer>{total}</answer>"}
        for key in PLAN["info_keys_read"]:     # what the hub rubric reads, as TEACHER.md lists it
            info[key] = nums
        missing = [fld for fld in PLAN["fields"] if fld.startswith("info.") and fld[5:] not in info]
        assert not missing, missing
        writer.add(q, str(total), info)
print(writer.write(), "rows")
'''


def read_brief(brief: Path) -> dict:
    """Everything the teacher uses, parsed from TEACHER.md's own words."""
    text = brief.read_text()
    flat = " ".join(text.split())
    fields = re.findall(r"^\s*- `((?:info\.)?\w+)` \(", text, re.M)
    keys = re.search(r"The hub rubric reads these `info` keys of a row: (.*?)\. Every row", flat).group(1)
    return {
        "text": text,
        "iter_dir": Path(re.search(r"Write these files in `([^`]+)`", text).group(1)),
        "failures": Path(re.search(r"lowest reward first: `([^`]+)`", text).group(1)),
        # how a skeleton row cites a failure: the row's own step and idx in the failures file
        "cite": re.search(r"a skeleton row cites one as `skeleton:([^`]+)`", flat).group(1),
        "iteration": int(re.search(r"# Teacher brief — iteration (\d+)", text).group(1)),
        "fields": fields,
        "info_keys_read": re.findall(r"`(\w+)`", keys),
        "answer_format": re.search(r"The answer format is the hub env's: (.*?) - ", flat).group(1),
        "hard": _pct(flat, r"at least (\d+)% of rows are hard"),
        "skeleton": _pct(flat, r"at least (\d+)% of rows have a source starting with"),
        "bucket": _pct(flat, r"every \(domain, sub_domain\) bucket holds at least (\d+)% of rows"),
        "checks": re.search(r"## Check, then hand back\n.*?```\n(.*?)```", text, re.S).group(1),
    }


def cite(b: dict, row: dict) -> str:
    """A failure as TEACHER.md says a skeleton row cites it (`train_step_<step>_idx_<idx>`)."""
    return b["cite"].replace("<step>", str(row["step"])).replace("<idx>", str(row["idx"]))


def eval_prompts_found(run_dir: Path) -> list[str]:
    """The files where a teacher with a shell finds any of digit_tally's eval prompts, looking
    through every file under the run directory: TEACHER.md tells it that once an arm is
    evaluated no eval prompt, reply or answer is left in any file there. A prompt the train
    split also holds is fair game, and is not looked for."""
    sys.path.insert(0, ENVS)
    from digit_tally import _rows

    sought = {r["question"] for r in _rows(1, 200)} - {r["question"] for r in _rows(0, 800)}
    return files_holding(run_dir, sorted(sought))


def teacher_from_brief(brief_path: Path, env: dict) -> dict:
    b = read_brief(brief_path)
    # what TEACHER.md states, asserted so that a brief that stops saying it fails here
    assert {"question", "answer", "info.reasoning", "info.reasoning_depth", "info.difficulty"} <= set(b["fields"])
    assert re.search(r"once an arm is evaluated, every eval file\s+under the run directory holds numbers only",
                     b["text"]), "TEACHER.md no longer states the eval seal"
    assert eval_prompts_found(b["iter_dir"].parent) == []   # every arm so far is evaluated
    assert b["info_keys_read"] == ["numbers"]
    assert "<answer>" in b["answer_format"]
    failures = [json.loads(l) for l in b["failures"].open()]
    full = max(r["reward"] for r in failures)   # a shaped reward: failed rows are below the top
    skel = [cite(b, r) for r in failures if r["reward"] < full or full < 1.2]
    prior = re.findall(r"--prior (\S+)", b["checks"])
    buckets = [("one number", "short numbers"), ("one number", "long numbers"),
               ("two numbers", "mixed lengths"), ("two numbers", "both long"),
               ("three numbers", "small parts"), ("three numbers", "large parts")]
    per = 600 // len(buckets)
    assert per / 600 >= b["bucket"]
    weakness = {
        "prev_eval_acc": None, "reward_by_length_quartile": [0.5, 0.4, 0.3, 0.2],
        "domains": [{"name": d, "severity": "high", "evidence": "failed train prompts list that many numbers",
                     "sub_domains": [{"name": s} for d2, s in buckets if d2 == d]}
                    for d in dict.fromkeys(d for d, _ in buckets)],
        "allocations": {f"{d} / {s}": per for d, s in buckets},
        "structural_features": [{"name": n, "definition": d} for n, d in [
            ("several_numbers", "two or more numbers"), ("three_numbers", "three numbers"),
            ("zero_digit", "a number has a zero digit"), ("four_digits", "a number has four digits"),
            ("repeated_digit", "a number repeats a digit")]],
    }
    plan = {"seed": b["iteration"], "prior": prior, "skeletons": skel,
            "skeleton_rows": int(600 * (b["skeleton"] + 0.05)),
            "hard_per_20": round(20 * (b["hard"] + 0.15)),
            "info_keys_read": b["info_keys_read"], "fields": b["fields"]}
    files = {
        "weakness_report.md": "# Weakness report\n\nLong lists of numbers fail most.\n",
        "weakness.json": json.dumps(weakness, indent=1),
        "gen_dataset.py": GENERATOR.replace("__PLAN__", repr(json.dumps(plan))),
        "scratchpad_entry.md": (f"## Iteration {b['iteration']}\n### (1) Understanding\nlong lists\n"
                                "### (2) Buckets\n6 x 100\n### (3) Plan\ntemplates by count\n"
                                "### (4) Changes\nnone\n### (5) Results\npending\n"),
    }
    if b["iteration"] == 1:   # section (4): this iteration trains with its own hyperparameters
        assert "`hparams.json`" in b["text"] and "`lr`: learning rate, in (0, 0.01]" in b["text"]
        # what the teacher is told it changes: training (and the probe), never an eval
        assert "it never changes an eval" in b["text"]
        files["hparams.json"] = json.dumps({"lr": 3e-5, "max_completion_tokens": 160, "temperature": 0.7})
    for name, body in files.items():
        (b["iter_dir"] / name).write_text(body)
    validated = None
    for line in b["checks"].strip().splitlines():
        if "gen_dataset.py" in line:
            g = subprocess.run(line.replace("python ", f"{sys.executable} ", 1), shell=True, env=env,
                               capture_output=True, text=True)
            assert g.returncode == 0, g.stderr[-2000:]
        elif line.startswith("driver validate"):
            validated = driver(line.split()[1:], env)
    return {"validate": validated, "iteration": b["iteration"]}


# a whole run on a third-party env (about 7 s in-process)
def test_a_teacher_knowing_only_teacher_md_passes_the_gate_first_time_on_a_third_party_env(tmp_path, runs):
    env = _env(tmp_path)
    r = driver(["run", "--dataset", "digit_tally", "--teacher", "builtin", "--max-iters", "3",
                "--runs-dir", str(runs), *FAST], env)
    assert r.returncode == 2 and "--teacher agent" in r.stderr      # refused before iter_0
    rd = run_dir_from(r.stdout)
    r = driver(["resume", str(rd), "--teacher", "agent"], env)
    stops = 0
    while r.returncode == 3:
        stops += 1
        st = json.loads((rd / "run.json").read_text())
        out = teacher_from_brief(rd / f"iter_{st['iteration']}" / "TEACHER.md", env)
        assert out["validate"].returncode == 0, out["validate"].stdout[-3000:]   # first attempt
        r = driver(["resume", str(rd)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert stops == 2
    # the eval seal, looked for as the brief states it: after the controls, every eval file
    # holds numbers only and no eval prompt is in any file under the run directory
    assert len(assert_every_eval_file_is_sealed(rd, "classic")) == 6
    assert eval_prompts_found(rd) == []
    for n in (1, 2):
        assert not (rd / f"iter_{n}" / "attempts.json").exists()          # never rejected
        gate = json.loads((rd / f"iter_{n}" / "gate_report.json").read_text())
        assert gate["passed"] and "reasoning earns full reward (hub rubric)" in [x["name"] for x in gate["lines"]]
    m = json.loads((rd / "metrics.json").read_text())
    assert [i["iter"] for i in m["iters"]] == [0, 1, 2]
    assert {c["run"] for c in m["controls"]} == {"run_a", "run_b", "run_c"}
    assert "Holm p" in r.stdout    # one eval split: the best is chosen where it is reported
    assert "Shaped reward: the hub rubric's full reward is 1.2, not 1." in r.stdout
    assert driver(["report", str(rd)], env).returncode == 0
    assert "Shaped reward: the hub rubric's full reward is 1.2, not 1." in (rd / "report.md").read_text()
    # iteration 1's hparams.json reached its training only (its eval keeps the run's one eval
    # configuration), a control replaying iteration 1 replays it, and nothing else has it
    cfg = tomllib.loads((rd / "iter_1" / "rl.toml").read_text())
    run_limit = json.loads((rd / "run.json").read_text())["max_completion_tokens"]
    assert cfg["trainer"]["optim"]["lr"] == 3e-5
    assert cfg["orchestrator"]["train"]["sampling"] == {"max_completion_tokens": 160, "temperature": 0.7}
    assert cfg["orchestrator"]["eval"]["sampling"]["max_completion_tokens"] == run_limit != 160
    best = json.loads((rd / "best_iter.json").read_text())["best_iter"]
    for other in ("iter_2/rl.toml", "iter_0/base_rl.toml", "run_a_best_from_iter0/rl.toml",
                  "run_c_untargeted_from_iter0/rl.toml"):
        carries = other.startswith(("run_a", "run_c")) and best == 1   # controls train as the best
        text = (rd / other).read_text()
        assert ("3e-05" in text) == carries and ("= 160" in text) == carries, other
    assert m["iters"][1]["hparams"] == {"lr": 3e-5, "max_completion_tokens": 160, "temperature": 0.7}
    assert "hyperparameters (hparams.json): lr = 3e-05" in (rd / "scratchpad.md").read_text()


def test_wrong_answers_in_reasoning_fail_the_accuracy_line_by_template_and_line(tmp_path, monkeypatch):
    """The same teacher's rows, with one template's reasoning ending in a wrong total: `driver
    validate --env` (the hub's rubric, loaded in this interpreter) names the template and lines."""
    from driver.envs.introspect import introspect
    from driver.errors import WaitingForTeacher
    from driver.teachers import Brief
    from driver.teachers.agent import AgentTeacher

    env = _env(tmp_path)
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    d = tmp_path / "iter_1"
    d.mkdir()
    failures = tmp_path / "failures.jsonl"
    failures.write_text("".join(json.dumps({"idx": i, "step": 3, "reward": 0.2, "info": {"numbers": [12, 345]}})
                                + "\n" for i in range(20)))
    b = Brief(run_dir=tmp_path, iter_dir=d, iteration=1, hub=introspect(sys.executable, "digit_tally"),
              failures_path=failures, failures_step="train_step_3", eval_accs={"iter_0": 0.2},
              train_sample_path=failures)
    try:
        AgentTeacher().teach(b)
    except WaitingForTeacher:
        pass
    brief = d / "TEACHER.md"   # outside a run directory, validate needs the env named
    brief.write_text(brief.read_text().replace("--weakness", "--env digit_tally --weakness"))
    assert teacher_from_brief(brief, env)["validate"].returncode == 0
    rows = [json.loads(line) for line in (d / "dataset.jsonl").read_text().splitlines()]
    bad = (rows[0]["info"]["domain"], rows[0]["info"]["sub_domain"])
    for r in rows:
        if (r["info"]["domain"], r["info"]["sub_domain"]) == bad:
            r["info"]["reasoning"] = r["info"]["reasoning"].replace("<answer>", "<answer>9")
    (d / "dataset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    v = driver(["validate", str(d / "dataset.jsonl"), "--weakness", str(d / "weakness.json"),
                "--env", "digit_tally", "--json"], env)
    assert v.returncode == 1
    lines = {x["name"]: x for x in json.loads(v.stdout)["lines"]}
    assert [n for n, x in lines.items() if not x["ok"]] == ["reasoning earns full reward (hub rubric)"]
    detail = lines["reasoning earns full reward (hub rubric)"]["detail"]
    assert f"{bad[0]}/{bad[1]}: 100 rows, reward 0.2 of 1.2, lines 1, 2, 3, 4, 5 ..." in detail


def test_a_qwen3_student_is_warned_before_iter_0_when_the_hub_parser_strips_think_blocks(tmp_path, runs):
    env = _env(tmp_path)
    r = driver(["run", "--dataset", "digit_tally", "--env-args", '{"parser_kind": "think"}',
                "--model", "Qwen/Qwen3-0.6B", "--teacher", "agent", "--max-iters", "1",
                "--runs-dir", str(runs), *FAST], env)
    assert r.returncode == 0, r.stderr[-2000:]
    warning = r.stderr.index("[introspect] warning: the student Qwen/Qwen3-0.6B emits <think>")
    assert "ThinkParser strips them" in r.stderr and warning < r.stderr.index("[iter_0]")
    r = driver(["run", "--dataset", "digit_tally", "--model", "Qwen/Qwen3-0.6B", "--teacher", "agent",
                "--max-iters", "1", "--runs-dir", str(runs), *FAST], env)
    assert r.returncode == 0 and "[introspect] warning" not in r.stderr    # XMLParser: no warning
