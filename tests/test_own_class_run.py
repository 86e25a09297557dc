"""A whole run on a hub env whose class builds its own data and takes no `dataset` argument
(tests/envs/own_data_gym.py, shaped like verifiers' ReasoningGymEnv): introspection records that
generated envs are verifiers' single-turn class with the hub's parser and rubric, a teacher that
knows only TEACHER.md writes rows that pass the gate, and the run goes on through training,
evaluation and three controls to finalize."""
from __future__ import annotations

import json
import re
import subprocess
import sys

from conftest import FAST, driver, driver_env, run_dir_from, with_test_envs
from test_agent_path import cite, read_brief


GENERATOR = r'''
import json, random
from generators import RowWriter, clone_key

PLAN = json.loads(__PLAN__)
rng = random.Random(PLAN["seed"])
LEADS = ["Please", "Kindly", "Now", "Quickly", "Carefully", "Next", "Then", "For this task,",
         "As a warm-up,", "In your head,", "Step by step,", "Without a calculator,"]
VERBS = ["multiply", "find the product of", "work out the product of", "compute", "calculate",
         "give the product of", "take the product of", "evaluate the product of", "determine",
         "figure out"]
ENDS = [".", ", and reply with one number.", ", giving a single integer.", ", then state it.",
        ", and report the result.", " for me."]

def features(a, b):
    f = []
    if a >= 100 or b >= 100: f.append("three_digits")
    if "0" in f"{a}{b}": f.append("zero_digit")
    if any(len(set(str(x))) < len(str(x)) for x in (a, b)): f.append("repeated_digit")
    if (a % 10) * (b % 10) >= 10: f.append("carry_in_units")
    return f

def pair(dom, sub, hard):
    big = dom == "three-digit factor" or sub == "three-digit"
    while True:
        a = rng.randint(100 if big else 10, 999 if big else 99)
        b = rng.randint(10, 999 if hard else 99)
        f = features(a, b)
        if dom == "zeros inside" and "zero_digit" not in f:
            continue
        if (len(f) >= 3) if hard else (len(f) == 2):   # TEACHER.md: every row >= 2 features
            return a, b, f

seen = set()
for p in PLAN["prior"]:
    with open(p) as fh:
        seen |= {clone_key(json.loads(l)["question"]) for l in fh if l.strip()}

def wording(a, b):
    for _ in range(10000):
        q = f"{rng.choice(LEADS)} {rng.choice(VERBS)} {a} times {b}{rng.choice(ENDS)}"
        if clone_key(q) not in seen:
            seen.add(clone_key(q))
            return q
    raise SystemExit("ran out of wordings")

w = json.load(open("weakness.json"))
writer = RowWriter("dataset.jsonl")
n_skel = 0
for bucket, count in w["allocations"].items():
    dom, sub = bucket.split(" / ")
    for i in range(count):
        hard = i % 20 < PLAN["hard_per_20"]
        a, b, f = pair(dom, sub, hard)
        source = "template:" + sub
        if n_skel < PLAN["skeleton_rows"] and PLAN["skeletons"]:
            source = "skeleton:" + PLAN["skeletons"][n_skel % len(PLAN["skeletons"])]
            n_skel += 1
        info = {"domain": dom, "sub_domain": sub, "source": source,
                "difficulty": "hard" if len(f) >= 3 else "medium", "structural_features": f,
                "reasoning_depth": len(f"{a}{b}"), "reasoning": f"<answer>{a * b}</answer>"}
        missing = [fld for fld in PLAN["fields"] if fld.startswith("info.") and fld[5:] not in info]
        assert not missing, missing
        writer.add(wording(a, b), str(a * b), info)
print(writer.write(), "rows")
'''


def _teacher(brief_path, env) -> subprocess.CompletedProcess:
    """Writes the iteration's files from what TEACHER.md says, runs its check lines, and returns
    `driver validate`'s answer."""
    b = read_brief(brief_path)
    assert "<answer>" in b["answer_format"]
    failures = [json.loads(line) for line in b["failures"].open()]
    need = int(re.search(r"at least (\d+) distinct domains", " ".join(b["text"].split())).group(1))
    buckets = [("two-digit factors", "small"), ("two-digit factors", "with carries"),
               ("three-digit factor", "by two digits"), ("three-digit factor", "by three digits"),
               ("zeros inside", "two-digit"), ("zeros inside", "three-digit")]
    per = 600 // len(buckets)
    assert per / 600 >= b["bucket"] and len({d for d, _ in buckets}) >= need
    weakness = {
        "prev_eval_acc": None, "reward_by_length_quartile": [0.5, 0.4, 0.3, 0.2],
        "domains": [{"name": d, "severity": "high", "evidence": "failed train products of that size",
                     "sub_domains": [{"name": s} for d2, s in buckets if d2 == d]}
                    for d in dict.fromkeys(d for d, _ in buckets)],
        "allocations": {f"{d} / {s}": per for d, s in buckets},
        "structural_features": [{"name": n, "definition": d} for n, d in [
            ("three_digits", "a factor has three digits"), ("zero_digit", "a factor has a zero"),
            ("repeated_digit", "a factor repeats a digit"), ("carry_in_units", "the units carry")]],
    }
    plan = {"seed": b["iteration"], "prior": re.findall(r"--prior (\S+)", b["checks"]),
            "skeletons": [cite(b, r) for r in failures if r["reward"] < 1],
            "skeleton_rows": int(600 * (b["skeleton"] + 0.05)),
            "hard_per_20": round(20 * (b["hard"] + 0.15)), "fields": b["fields"]}
    files = {
        "weakness_report.md": "# Weakness report\n\nLarger factors fail most.\n",
        "weakness.json": json.dumps(weakness, indent=1),
        "gen_dataset.py": GENERATOR.replace("__PLAN__", repr(json.dumps(plan))),
        "scratchpad_entry.md": (f"## Iteration {b['iteration']}\n### (1) Understanding\nlarge factors\n"
                                "### (2) Buckets\n6 x 100\n### (3) Plan\ntemplates by size\n"
                                "### (4) Changes\nnone\n### (5) Results\npending\n"),
    }
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
    assert validated is not None, "TEACHER.md's checks name no `driver validate` line"
    return validated


def test_a_hub_class_without_a_dataset_argument_runs_from_introspection_to_finalize(tmp_path, runs):
    env = driver_env(tmp_path)
    env["PYTHONPATH"] = with_test_envs(env)
    r = driver(["run", "--dataset", "own_data_gym", "--teacher", "agent", "--max-iters", "2",
                "--runs-dir", str(runs), *FAST], env)
    rd = run_dir_from(r.stdout)
    hub = json.loads((rd / "hub_env.json").read_text())
    assert hub["generated_env_class"]["class"] == "SingleTurnEnv"
    stops = 0
    while r.returncode == 3:
        stops += 1
        st = json.loads((rd / "run.json").read_text())
        v = _teacher(rd / f"iter_{st['iteration']}" / "TEACHER.md", env)
        assert v.returncode == 0, v.stdout[-3000:]
        r = driver(["resume", str(rd)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert stops == 1
    gate = json.loads((rd / "iter_1" / "gate_report.json").read_text())
    assert gate["passed"] and "reasoning earns full reward (hub rubric)" in [x["name"] for x in gate["lines"]]
    m = json.loads((rd / "metrics.json").read_text())
    assert [i["iter"] for i in m["iters"]] == [0, 1]
    assert m["iters"][1]["rows"] == 600
    assert {c["run"] for c in m["controls"]} == {"run_a", "run_b", "run_c"}
    assert json.loads((rd / "run.json").read_text())["status"] == "max_iters_reached"
