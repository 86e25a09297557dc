"""The three teachers against the driver: the built-in teacher on both family environments, the
LLM teacher against a faithful fake API on 127.0.0.1, a scripted coding agent through TEACHER.md,
and a canary planted in eval prompts and answers that no teacher input or output, and no file
under the run directory once its arm is evaluated, may carry."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

from conftest import FAST, ROOT, driver, driver_env, launches, run_dir_from, with_test_envs
from fake_llm import FakeLLM
import teacher_files
from tests_support import assert_every_eval_file_is_sealed

sys.path.insert(0, str(ROOT / "tests" / "envs"))
from canary_stock import CANARY  # noqa: E402



def canary_env(tmp_path, **extra) -> dict:
    env = driver_env(tmp_path, **extra)
    env["PYTHONPATH"] = with_test_envs(env)
    return env


def files_with_canary(run_dir: Path) -> list[str]:
    """Every file under the run directory that carries the canary: what a teacher with a shell
    finds looking through all of it (the trainer's eval files are sealed once their arm is
    evaluated, so none may)."""
    hits = []
    for folder, _dirs, files in os.walk(run_dir):
        for name in files:
            p = Path(folder) / name
            if p.is_file() and CANARY.encode() in p.read_bytes():
                hits.append(str(p.relative_to(run_dir)))
    return hits


# what TEACHER.md tells a teacher with a shell about eval files (the driver enforces it)
SEAL_RULE = re.compile(r"once an arm is evaluated, every eval file\s+under the run directory holds "
                       r"numbers only .*?no eval\s+prompt, reply or answer is left in any file there", re.S)


# --------------------------------------------------------------------------------------------
# built-in teacher

def _brief(tmp_path, env_id, rows):
    from driver.teachers import Brief

    d = tmp_path / "iter_1"
    d.mkdir()
    failures = tmp_path / "failures.jsonl"
    failures.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return Brief(run_dir=tmp_path, iter_dir=d, iteration=1, hub={"env_id": env_id, "env_args": {}},
                 failures_path=failures, failures_step="train_step_30", eval_accs={"iter_0": 0.2})


@pytest.mark.parametrize("env_id,fails", [
    # a constructed student: it fails every story with a borrow / every multi-file task
    ("stock_arithmetic", lambda info: __import__("generators.stock_arithmetic", fromlist=["x"]).borrows(info["problem"]) > 0),
    ("model_router", lambda info: info["files_touched"] >= 3),
])
def test_builtin_teacher_passes_the_gate_and_ranks_the_failing_structure_first(tmp_path, env_id, fails):
    import verifiers as vf

    from driver.teachers import generator_run
    from driver.gates import dataset
    from driver.gates import accuracy, decontam
    from driver.teachers.builtin import BuiltinTeacher

    train = list(vf.load_environment(env_id).get_dataset())[:200]
    rows = sorted(({"prompt": r["prompt"], "completion": "x" * (i % 7), "answer": r["answer"],
                    "info": r["info"], "reward": 0.0 if fails(r["info"]) else 1.0}
                   for i, r in enumerate(train)), key=lambda r: r["reward"])
    brief = _brief(tmp_path, env_id, rows)
    BuiltinTeacher().teach(brief)
    w = json.loads((brief.iter_dir / "weakness.json").read_text())
    # domains come ranked by their worst bucket's failure rate (the rates themselves are
    # checked against hand counts in the next test)
    worst = [max(s["failure_rate"] for s in d["sub_domains"]) for d in w["domains"]]
    assert worst == sorted(worst, reverse=True) and worst[0] > worst[-1]
    assert sum(w["allocations"].values()) == 600
    run = generator_run.run(brief.iter_dir)
    assert run["ok"], run
    fp = decontam.eval_fingerprints(sys.executable, env_id)
    scored = accuracy.score_rows(sys.executable, env_id, None, brief.iter_dir / "dataset.jsonl")
    rep = dataset.check(brief.iter_dir / "dataset.jsonl", w, eval_fingerprints=fp, scored=scored)
    assert rep.passed, rep.render()
    # every skeleton row cites a failed train rollout that exists
    sources = [json.loads(l)["info"]["source"] for l in (brief.iter_dir / "dataset.jsonl").open()]
    idx = {int(s.rsplit("_", 1)[1]) for s in sources if s.startswith("skeleton:")}
    assert idx and all(rows[i]["reward"] == 0.0 for i in idx)


def test_builtin_teacher_failure_rates_are_the_hand_counted_smoothed_rates(tmp_path):
    """Six train problems counted by hand. Both deliveries cross a tens boundary in the first
    four (18+5=23, 23+9=32; 27+4=31, 31+19=50; 35+6=41, 41+9=50; 12+9=21, 21+9=30), in neither
    of the last two; no problem needs two borrows. The student fails three of the four
    double-carry problems and one of the others. A bucket's rate is (failed + 1) / (seen + 2),
    so double carries: (3 + 1) / (4 + 2) = 0.667, and a structure never seen: 1 / 2."""
    from driver.teachers.builtin import BuiltinTeacher

    problems = [(18, 5, 9, 0), (27, 4, 19, 0), (35, 6, 9, 0), (12, 9, 9, 1), (10, 1, 1, 0), (20, 5, 3, 1)]
    sample = [{"step": 30, "example_id": i, "reward": float(ok),
               "info": {"problem": {"initial": a, "deliveries": [b, c], "withdrawals": [1, 1]}}}
              for i, (a, b, c, ok) in enumerate(problems)]
    b = _brief(tmp_path, "stock_arithmetic", [r for r in sample if not r["reward"]])
    b.train_sample_path = tmp_path / "train_sample.jsonl"
    b.train_sample_path.write_text("".join(json.dumps(r) + "\n" for r in sample))
    BuiltinTeacher().teach(b)
    w = json.loads((b.iter_dir / "weakness.json").read_text())
    rate = {s["name"]: s["failure_rate"] for d in w["domains"] for s in d["sub_domains"]}
    assert rate["double carry sums"] == 0.667
    assert rate["double borrow withdrawals"] == 0.5
    assert w["train_rollouts_read"] == 6


def test_builtin_teacher_refuses_an_env_without_a_family_generator(tmp_path):
    from driver.errors import DriverError
    from driver.teachers.builtin import BuiltinTeacher

    brief = _brief(tmp_path, "parity_toy", [{"prompt": "p", "completion": "c", "reward": 0.0}])
    with pytest.raises(DriverError, match="--teacher agent"):
        BuiltinTeacher().teach(brief)
    assert not list(brief.iter_dir.iterdir())


# The gen_dataset.py text the built-in teacher wrote as a str.format constant before it became
# templates/teacher_builtin/gen_dataset.py.j2: the template must render it byte for byte.
OLD_GEN_SCRIPT = '''"""Generator for this iteration (written by the built-in teacher). Run from this directory.
The driver's gate scores every row's reasoning with the hub rubric (the accuracy line), so this
script does not load the hub env for a round trip of its own."""
import json

from generators import cold_read
from {family} import generate

weakness = json.load(open("weakness.json"))
skeletons = json.load(open("skeletons.json"))
rows = generate(weakness, skeletons, out="dataset.jsonl", seed={seed}, prior={prior!r}{style_arg})
print(cold_read(rows))
print(f"wrote {{len(rows)}} rows")
'''


@pytest.mark.parametrize("family", ["generators.stock_arithmetic", "generators.model_router"])
@pytest.mark.parametrize("style", [None, "stories", "plain"])
@pytest.mark.parametrize("surface", [{}, {"distractor_numbers": 0.0},
                                     {"distractor_numbers": 0.07, "interleaved_order": 0.0}])
@pytest.mark.parametrize("prior", [[], ["/runs/r/iter_1/dataset.jsonl", "/runs/it's/iter_2/dataset.jsonl"]])
def test_the_generator_template_renders_the_old_script_byte_for_byte(family, style, surface, prior):
    from driver.teachers.builtin import gen_script

    style_arg = ("" if style is None else f", style={style!r}") + (f", surface={surface!r}" if surface else "")
    old = OLD_GEN_SCRIPT.format(family=family, style_arg=style_arg, seed=7012, prior=prior)
    assert gen_script(family, 7012, prior, style, surface) == old


def test_each_family_declares_the_interface_and_optional_members_default():
    from generators import FAMILIES, Family, family_for
    from generators import model_router
    from generators import stock_arithmetic

    assert family_for({"env_id": "stock-arithmetic"}) is stock_arithmetic.FAMILY
    assert family_for({"env_id": "owner/model_router@1.0"}) is model_router.FAMILY
    assert family_for({"env_id": "parity_toy"}) is None
    from generators import hidden_number

    assert family_for({"env_id": "hidden-number"}) is hidden_number.FAMILY
    from generators import tool_calculator

    assert family_for({"env_id": "tool-calculator"}) is tool_calculator.FAMILY
    assert set(FAMILIES) == {"stock_arithmetic", "model_router", "hidden_number", "tool_calculator"}
    for fam in (stock_arithmetic.FAMILY, model_router.FAMILY, hidden_number.FAMILY, tool_calculator.FAMILY):
        assert isinstance(fam, Family) and fam.buckets and fam.feature_definitions and fam.data_plan
    assert stock_arithmetic.FAMILY.module == "generators.stock_arithmetic"
    assert stock_arithmetic.FAMILY.styles == ("stories", "plain") and stock_arithmetic.FAMILY.untargeted is stock_arithmetic.untargeted
    # stock_arithmetic's style hooks: plain rows keep their distractors, and interleave nothing
    assert stock_arithmetic.FAMILY.shares("plain", {"distractor_numbers": 0.0}) == {
        "distractor_numbers": 0.45, "interleaved_order": 0.0}
    assert "interleaved_order" not in stock_arithmetic.FAMILY.features("plain")
    # model_router declares none of the optional members: each has its default
    r = model_router.FAMILY
    assert (r.styles, dict(r.surface_shares), dict(r.magnitudes), r.untargeted) == ((), {}, {}, None)
    assert r.shares(None) == {} and r.features(None) == model_router.FEATURE_DEFINITIONS


def test_a_teacher_that_cannot_teach_the_env_is_refused_before_iter_0_and_resume_switches(tmp_path, runs):
    env = canary_env(tmp_path)
    r = driver(["run", "--dataset", "canary_stock", "--teacher", "builtin", "--max-iters", "2",
                "--runs-dir", str(runs), *FAST], env)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "no family generator for 'canary_stock'" in r.stderr and "--teacher agent" in r.stderr
    rd = run_dir_from(r.stdout)
    assert launches(tmp_path) == [] and not (rd / "iter_0").exists()   # nothing trained
    # the LLM teacher without its key variable set is refused the same way, before anything runs
    env_nokey = {k: v for k, v in env.items() if k != "NO_SUCH_KEY_VAR"}
    r = driver(["resume", str(rd), "--teacher", "llm", "--llm-model", "m", "--llm-key-env",
                "NO_SUCH_KEY_VAR"], env_nokey)
    assert r.returncode == 2 and "$NO_SUCH_KEY_VAR, which is not set" in r.stderr, r.stderr[-2000:]
    assert json.loads((rd / "run.json").read_text())["teacher"] == "builtin"
    r = driver(["resume", str(rd), "--teacher", "agent"], env)
    assert r.returncode == 3, r.stderr[-2000:]            # iter_0 trained, then the brief
    assert "teacher: builtin -> agent" in r.stderr
    assert json.loads((rd / "run.json").read_text())["teacher"] == "agent"
    assert (rd / "iter_1" / "TEACHER.md").exists() and len(launches(tmp_path)) == 1


def test_hparams_bounds_are_checked_field_by_field(tmp_path):
    from driver.gates import hparams

    (tmp_path / "hparams.json").write_text(json.dumps({"lr": 3e-5, "batch_size": 8}))
    rep = hparams.check(tmp_path)
    assert not rep.passed and "batch_size: pinned by the procedure" in rep.lines[0][2]
    (tmp_path / "hparams.json").write_text(json.dumps({"lr": 0.5, "max_completion_tokens": 4, "dropout": 0.1}))
    rep = hparams.check(tmp_path)
    assert not rep.passed
    detail = rep.lines[0][2]
    assert "lr" in detail and "max_completion_tokens" in detail and "dropout" in detail
    (tmp_path / "hparams.json").write_text(json.dumps({"seq_len": 4096}))
    assert hparams.check(tmp_path).passed
    assert hparams.knob_overrides(hparams.load(tmp_path)) == {"seq_len": 4096}


# --------------------------------------------------------------------------------------------
# LLM teacher

_ROW = re.compile(r"### idx (\d+) · step (\d+) · reward (\S+)\n.*?\ninfo: (.*?)\n", re.S)


def _passing_from_prompt(body: dict) -> str:
    """What a capable model answers: skeletons of the failed rows it was shown."""
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    cite = re.search(r'a skeleton row cites it as `info.source = "skeleton:([^"]+)"`', user).group(1)
    skeletons = []
    for idx, step, reward, info in _ROW.findall(user):
        try:
            info = json.loads(info)
        except json.JSONDecodeError:
            continue
        if float(reward) < 0.5 and isinstance(info, dict) and "problem" in info:
            source = cite.replace("<step>", step).replace("<idx>", idx)
            skeletons.append({"source": source, "problem": info["problem"]})
    n = int(re.search(r"# Iteration (\d+)", user).group(1))
    return teacher_files.as_reply(teacher_files.passing(skeletons, n, "canary_stock"))


# a whole run with a fake LLM endpoint (1.5 min): the extended command; the LLM teacher's refusals
# and unreachable endpoint stay in the main suite, its canary check on a taskset is extended too
@pytest.mark.extended
def test_llm_teacher_is_re_asked_with_the_gate_lines_and_no_eval_canary_reaches_it(tmp_path, runs):
    script = [lambda body: "I think the student struggles with borrows.",           # no files
              lambda body: teacher_files.as_reply(teacher_files.failing(1)),       # gate fails
              _passing_from_prompt]                                                 # passes
    with FakeLLM(script) as llm:
        env = canary_env(tmp_path, TEACHER_TEST_KEY="sk-test-123")
        r = driver(["run", "--dataset", "canary_stock", "--max-iters", "2", "--runs-dir", str(runs),
                    "--teacher", "llm", "--llm-base-url", llm.url + "/v1", "--llm-model", "fake-1",
                    "--llm-key-env", "TEACHER_TEST_KEY", "--llm-price-in", "3",
                    "--llm-price-out", "15", *FAST], env)
        requests = llm.requests
    assert r.returncode == 0, r.stderr[-3000:]
    rd = run_dir_from(r.stdout)
    # the endpoint was asked once before iter_0 trained (the free model listing, with the key)
    assert [q["path"] for q in llm.listings] == ["/v1/models"]
    assert llm.listings[0]["headers"]["authorization"] == "Bearer sk-test-123"
    assert "LLM teacher: fake-1 at " in r.stderr and "LLM teacher: WARNING" not in r.stderr
    assert [q["path"] for q in requests] == ["/v1/chat/completions"] * 3
    assert requests[0]["headers"]["authorization"] == "Bearer sk-test-123"
    # the format re-ask carries the first reply; the third request carries the gate's lines
    assert "missing" in requests[1]["body"]["messages"][-1]["content"]
    third = requests[2]["body"]["messages"][-1]["content"]
    gate = json.loads((rd / "iter_1" / "gate_report.json").read_text())
    assert gate["passed"] is True
    rejected = (rd / "iter_1" / "gen_dataset.py.rejected-1").read_text()
    assert "previous answer was rejected" in third and "range(10, 50)" in third
    assert re.search(r"rows .*40", third)
    assert rejected.strip() in third
    # tokens and cost of all three calls in metrics.json
    m = json.loads((rd / "metrics.json").read_text())
    it1 = next(i for i in m["iters"] if i["iter"] == 1)
    u = it1["teacher_usage"]
    calls = json.loads((rd / "iter_1" / "teacher_usage.json").read_text())["per_call"]
    assert u["calls"] == 3 and len(calls) == 3
    assert u["input_tokens"] == sum(c["input_tokens"] for c in calls) > 0
    assert u["cost_usd"] == pytest.approx((u["input_tokens"] * 3 + u["output_tokens"] * 15) / 1e6)
    # the report: numbers and plots from the records
    rep = driver(["report", str(rd), "--json"], env)
    assert rep.returncode == 0, rep.stderr
    report = (rd / "report.md").read_text()
    assert "lift vs iter_0 [95% CI]" in report and "iter_1 " in report
    # canary_stock has one eval split: the teacher is told its accuracies come from it
    assert "Accuracy so far on the eval split" in json.dumps(requests[0]["body"])
    for png in ("eval_accuracy.png", "train_reward.png"):
        assert (rd / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # sealing: the canary reached no request, and no file under the run directory, the
    # trainer's eval rollouts included (sealed once each arm was evaluated)
    assert len(assert_every_eval_file_is_sealed(rd, "classic")) == 5   # iter_0, iter_1 and the three controls
    assert not any(CANARY in json.dumps(q["body"]) for q in requests)
    assert files_with_canary(rd) == []
    assert CANARY not in r.stdout + r.stderr
    assert "sk-test-123" not in "".join(p.read_text(errors="replace") for p in rd.rglob("*.json"))


def test_llm_teacher_speaks_anthropic_messages_api(tmp_path):
    from driver.run.model import LLMConfig
    from driver.teachers.llm import LLMTeacher

    files = teacher_files.passing([], 1, "stock_arithmetic")
    with FakeLLM([lambda body: teacher_files.as_reply(files)]) as llm:
        cfg = LLMConfig(api="anthropic", base_url=llm.url, model="claude-x", key_env="ANTH_TEST_KEY",
                        price_in=None, price_out=None)
        os.environ["ANTH_TEST_KEY"] = "k-anth"
        try:
            text, usage = LLMTeacher(cfg).chat("sys", [{"role": "user", "content": "hello"}])
        finally:
            del os.environ["ANTH_TEST_KEY"]
        req = llm.requests[0]
    assert req["path"] == "/v1/messages"
    assert req["headers"]["x-api-key"] == "k-anth" and req["headers"]["anthropic-version"]
    assert req["body"]["system"] == "sys" and req["body"]["messages"][0]["content"] == "hello"
    assert set(teacher_files.as_reply(files).split()) == set(text.split())
    assert usage["output_tokens"] > 0


def test_llm_teacher_needs_a_model_before_a_run_directory_exists(tmp_path, runs):
    r = driver(["run", "--teacher", "llm", "--runs-dir", str(runs)], driver_env(tmp_path))
    assert r.returncode == 2 and "--llm-model" in r.stderr and not list(runs.iterdir())


def test_an_unreachable_llm_endpoint_is_named_with_what_to_check_and_resume():
    from driver.errors import DriverError
    from driver.run.model import LLMConfig
    from driver.teachers.llm import LLMTeacher

    cfg = LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", price_in=None, price_out=None)
    with pytest.raises(DriverError) as e:
        LLMTeacher(cfg).chat("sys", [{"role": "user", "content": "hello"}])
    assert "could not reach http://127.0.0.1:9/v1/chat/completions" in str(e.value)
    assert "--llm-base-url" in str(e.value) and "`driver resume`" in str(e.value)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_the_llm_endpoint_is_asked_before_iter_0_and_each_fault_is_named_with_its_fix(api, monkeypatch):
    """What `driver run` prints before iter_0 trains (the teacher's first call comes only after):
    the free model listing, never a billed call, and for each fault it can see the flag or
    variable to fix and that `driver resume` continues."""
    from driver.run.model import LLMConfig
    from driver.teachers.llm import LLMTeacher

    def check(base_url, model="fake-1"):
        return LLMTeacher(LLMConfig(api=api, base_url=base_url, model=model, key_env="T_KEY",
                                    price_in=None, price_out=None)).check_endpoint(timeout_s=2)

    path = "/v1/models"
    down = check("http://127.0.0.1:9" + ("" if api == "anthropic" else "/v1"))
    assert f"WARNING http://127.0.0.1:9{path} did not answer" in down
    assert "--llm-base-url" in down and "`driver resume`" in down
    with FakeLLM([], models=("fake-1", "fake-2"), key="k-right") as llm:
        base = llm.url + ("" if api == "anthropic" else "/v1")
        monkeypatch.delenv("T_KEY", raising=False)
        unset = check(base)
        monkeypatch.setenv("T_KEY", "k-wrong")
        wrong = check(base)
        monkeypatch.setenv("T_KEY", "k-right")
        unlisted, ok = check(base, model="fake-9"), check(base)
        assert llm.requests == []   # nothing billed: listings only
        assert {q["path"] for q in llm.listings} == {path} and len(llm.listings) == 4
    assert "answered 401: T_KEY is not set" in unset and "`driver resume`" in unset
    assert "answered 401: it refused the key in T_KEY" in wrong
    assert "--llm-model fake-9 is not among the 2 models it lists (fake-1, fake-2)" in unlisted
    assert "WARNING" not in ok and f"LLM teacher: fake-1 at {base} ({api} API" in ok
    assert "the model listed" in ok
    if api == "anthropic":   # a paged list (has_more) does not show a model missing
        with FakeLLM([], models=("fake-1",), has_more=True) as llm:
            paged = check(llm.url, model="fake-9")
        assert "WARNING" not in paged and "the model listed" not in paged


@pytest.mark.extended   # a run through iter_0 (about 10 s); the teacher's own call is tested above
def test_an_unreachable_llm_endpoint_fails_the_run_at_its_weakness_phase(tmp_path, runs):
    env = driver_env(tmp_path)
    r = driver(["run", "--teacher", "llm", "--llm-model", "m", "--llm-base-url",
                "http://127.0.0.1:9/v1", "--max-iters", "2", "--runs-dir", str(runs), *FAST],
               {**env, "OPENAI_API_KEY": "k"})   # a key is set; the endpoint is what fails
    assert r.returncode == 1 and "could not reach http://127.0.0.1:9/v1" in r.stderr
    # said before iter_0 trained, as well as when the call failed after it
    assert r.stderr.index("WARNING http://127.0.0.1:9/v1/models did not answer") < r.stderr.index(
        "could not reach")
    rd = run_dir_from(r.stdout)
    st = json.loads((rd / "run.json").read_text())
    assert st["status"] == "failed" and st["phase"] == "weakness"


# --------------------------------------------------------------------------------------------
# agent teacher: a scripted agent follows TEACHER.md

def scripted_agent(brief_path: Path, env: dict, extra: dict | None = None, expect_valid: bool = True,
                   env_id: str = "canary_stock") -> None:
    """Reads only what TEACHER.md points to, writes the four files (and `extra` ones), runs the
    generator and the checks the brief lists (except `driver resume`, which the caller runs).
    A teacher with a shell, it takes TEACHER.md at its word that every arm evaluated so far left
    no eval prompt, reply or answer in any file under the run directory, and looks through all
    of it."""
    text = brief_path.read_text()
    assert CANARY not in text
    iter_dir = Path(re.search(r"Write these files in `([^`]+)`", text).group(1))
    assert SEAL_RULE.search(text), "TEACHER.md no longer states the eval seal"
    assert files_with_canary(iter_dir.parent) == []
    failures = Path(re.search(r"lowest reward first: `([^`]+)`", text).group(1))
    # TEACHER.md: each failure has its `idx` and `step`; a row cites it as train_step_<step>_idx_<idx>
    cite = re.search(r"cites one as `skeleton:(train_step_<step>_idx_<idx>)`", text).group(1)
    n = int(re.search(r"# Teacher brief — iteration (\d+)", text).group(1))
    rows = [json.loads(l) for l in failures.open()]
    assert not any(CANARY in json.dumps(r) for r in rows)
    # the pass-rate evidence TEACHER.md names: train rollouts only, cut to numbers and info
    sample_path = Path(re.search(r"`info`, `reward`, `metrics`,\s+`is_truncated`: `([^`]+)`", text).group(1))
    sample = [json.loads(l) for l in sample_path.open()]
    assert sample and {"step", "example_id", "info", "reward"} <= set(sample[0])
    assert not any("completion" in r or CANARY in json.dumps(r) for r in sample)
    skeletons = [{"source": cite.replace("<step>", str(r["step"])).replace("<idx>", str(r["idx"])),
                   "problem": r["info"]["problem"]}
                 for r in rows if r["reward"] < 0.5]
    checks = re.search(r"## Check, then hand back\n.*?```\n(.*?)```", text, re.S).group(1)
    prior = re.findall(r"--prior (\S+)", checks)      # earlier iterations' rows: no clones of them
    assert len(prior) == n - 1
    for name, body in {**teacher_files.passing(skeletons, n, env_id, prior=prior),
                       **(extra or {})}.items():
        (iter_dir / name).write_text(body)
    ran = []
    for line in checks.strip().splitlines():
        if line.startswith("driver validate"):
            v = driver(line.split()[1:], env)
            assert (v.returncode == 0) == expect_valid, v.stdout + v.stderr
        elif "gen_dataset.py" in line:
            subprocess.run(line.replace("python ", f"{sys.executable} ", 1), shell=True, env=env,
                           check=True, capture_output=True)
        ran.append(line.split()[0:2])
    assert ["driver", "validate"] in ran and ["driver", "resume"] in ran


def run_with_the_scripted_agent(args: list[str], env: dict, env_id: str) -> tuple[Path, int]:
    """`driver run ARGS --teacher agent`, the scripted agent answering every TEACHER.md and
    resuming, to the run's end: its directory and how many times it stopped for the teacher."""
    r = driver(["run", "--dataset", env_id, "--teacher", "agent", *args], env)
    assert CANARY not in r.stdout + r.stderr
    rd = run_dir_from(r.stdout)
    stops = 0
    while r.returncode == 3:
        stops += 1
        st = json.loads((rd / "run.json").read_text())
        assert st["status"] == "waiting_teacher"
        scripted_agent(rd / f"iter_{st['iteration']}" / "TEACHER.md", env, env_id=env_id)
        r = driver(["resume", str(rd)], env)
        assert CANARY not in r.stdout + r.stderr
    assert r.returncode == 0, r.stderr[-3000:]
    return rd, stops


def assert_the_eval_was_sealed(rd: Path, arms: int) -> None:
    """The canary was in every eval and selection prompt the trainer saw; once measured, every
    arm's eval file holds numbers only, and no file under the run directory carries the canary.
    The train rows the teacher reads are there."""
    assert json.loads((rd / "hub_env.json").read_text())["selection"]["split"] == "selection"
    m = json.loads((rd / "metrics.json").read_text())
    assert all(e.get("n_selection") for e in m["iters"] + m["controls"])
    assert len(assert_every_eval_file_is_sealed(rd, "classic")) == arms
    assert (rd / "iter_1" / "teacher_input" / "failures.jsonl").stat().st_size > 0
    assert files_with_canary(rd) == []


# a whole 3-iteration run with its controls (~25 s); test_agent_path plays the same teacher in the
# main suite, and test_eval_seal.py and the reference runs check the seal there
@pytest.mark.extended
def test_scripted_agent_follows_teacher_md_and_the_run_completes(tmp_path, runs):
    env = canary_env(tmp_path)
    rd, stops = run_with_the_scripted_agent(["--max-iters", "3", "--runs-dir", str(runs), *FAST], env,
                                            "canary_selection")
    assert stops == 2
    m = json.loads((rd / "metrics.json").read_text())
    assert [i["iter"] for i in m["iters"]] == [0, 1, 2]
    assert all(i.get("eval_acc") is not None for i in m["iters"])
    assert_the_eval_was_sealed(rd, arms=6)


# a whole run of the embedded trainer with its controls (~75 s on 2 cores): the extended command
@pytest.mark.extended
def test_no_eval_canary_is_left_under_the_run_directory_of_the_embedded_trainer(tmp_path, runs):
    pytest.importorskip("torch")
    from test_local_backend import MODEL

    env = canary_env(tmp_path, EMBEDDED_TRAINER_CACHE=tmp_path / "cache")
    env.pop("DRIVER_RL_COMMAND")
    rd, stops = run_with_the_scripted_agent(
        ["--backend", "local", "--model", MODEL, "--max-iters", "2", "--steps-per-run", "2",
         "--eval-examples", "24", "--max-completion-tokens", "24", "--probe-prompts", "8",
         "--probe-min-live", "0", "--seed", "5", "--runs-dir", str(runs)], env, "canary_selection")
    assert stops == 1
    assert json.loads((rd / "run.json").read_text())["backend"] == "local"
    assert_the_eval_was_sealed(rd, arms=5)


def test_builtin_teacher_answers_a_none_solved_probe_with_plain_rows_that_pass_the_gate(tmp_path):
    import verifiers as vf

    from driver.teachers import generator_run
    from driver.gates import dataset
    from driver.gates import accuracy, decontam
    from driver.teachers.builtin import BuiltinTeacher

    train = list(vf.load_environment("stock_arithmetic").get_dataset())[:120]
    rows = [{"prompt": r["prompt"], "completion": "x", "answer": r["answer"], "info": r["info"],
             "reward": float(i % 3 == 0)} for i, r in enumerate(train)]
    brief = _brief(tmp_path, "stock_arithmetic", sorted(rows, key=lambda r: r["reward"]))
    brief.last_probe = {"prompts": 32, "k": 4, "live_fraction": 0.0, "all_solved": 0,
                        "none_solved": 32, "mean_reward": 0.0, "min_live": 0.1, "passed": False}
    brief.attempt = 1
    BuiltinTeacher().teach(brief)
    w = json.loads((brief.iter_dir / "weakness.json").read_text())
    assert w["style"] == "plain"
    # no probe has seen a surface yet, but plain rows keep their distractors at their share
    assert w["surface"] == {} and w["surface_reach"]["distractor_numbers"]["trial"]
    assert "interleaved_order" not in {f["name"] for f in w["structural_features"]}
    assert "style='plain'" in (brief.iter_dir / "gen_dataset.py").read_text()
    assert generator_run.run(brief.iter_dir)["ok"]
    rep = dataset.check(brief.iter_dir / "dataset.jsonl", w,
                        eval_fingerprints=decontam.eval_fingerprints(sys.executable, "stock_arithmetic"),
                        scored=accuracy.score_rows(sys.executable, "stock_arithmetic", None,
                                                   brief.iter_dir / "dataset.jsonl"))
    assert rep.passed, rep.render()
    first = json.loads((brief.iter_dir / "dataset.jsonl").open().readline())["question"]
    assert " starts the day with " in first and "A first delivery brings" in first
    # without that evidence the teacher keeps the story style
    d2 = tmp_path / "again"
    d2.mkdir()
    brief2 = _brief(d2, "stock_arithmetic", rows)
    BuiltinTeacher().teach(brief2)
    assert json.loads((brief2.iter_dir / "weakness.json").read_text())["style"] == "stories"


def test_builtin_teacher_leaves_out_a_surface_the_probe_saw_never_solved_and_control_c_follows(tmp_path):
    """Rows whose distractors the student never solved in the gradient probe carry no gradient:
    the next dataset draws none (and still passes the gate); the other surface stays, and
    control C's untargeted rows take the same shares."""
    import verifiers as vf

    from driver.teachers import generator_run
    from driver.gates import dataset
    from driver.gates import accuracy, decontam
    from driver.teachers.builtin import SURFACE_EVIDENCE, BuiltinTeacher, surface_reach
    from generators import stock_arithmetic

    train = list(vf.load_environment("stock_arithmetic").get_dataset())[:120]
    rows = [{"prompt": r["prompt"], "completion": "x", "answer": r["answer"], "info": r["info"],
             "reward": float(i % 3 == 0)} for i, r in enumerate(train)]
    brief = _brief(tmp_path, "stock_arithmetic", sorted(rows, key=lambda r: r["reward"]))
    # the last attempt's probe: distractor rows never solved, interleaved ones sometimes
    probe = [{"info": {"structural_features": feats}, "reward": reward}
             for feats, reward in [(["carry", "distractor_numbers"], 0.0)] * SURFACE_EVIDENCE
             + [(["borrow", "interleaved_order"], float(i % 4 == 0)) for i in range(SURFACE_EVIDENCE)]]
    # a rejected attempt's rollouts, as the loop sets them aside
    (brief.iter_dir / "probe_rollouts.jsonl.rejected-1").write_text(
        "".join(json.dumps(r) + "\n" for r in probe))
    reach = surface_reach(brief, stock_arithmetic.FAMILY)
    assert reach["distractor_numbers"] == {"probe_rollouts": SURFACE_EVIDENCE, "solved": 0,
                                           "off": True, "trial": False}
    assert reach["interleaved_order"]["off"] is False and reach["interleaved_order"]["solved"] == 4
    BuiltinTeacher().teach(brief)
    w = json.loads((brief.iter_dir / "weakness.json").read_text())
    assert w["surface"] == {"distractor_numbers": 0.0} and w["style"] == "stories"
    assert "distractor_numbers" not in {f["name"] for f in w["structural_features"]}
    assert "never solved" in (brief.iter_dir / "weakness_report.md").read_text()
    assert generator_run.run(brief.iter_dir)["ok"]
    out = [json.loads(x) for x in (brief.iter_dir / "dataset.jsonl").read_text().splitlines()]
    assert not any("distractor_numbers" in r["info"]["structural_features"] for r in out)
    assert sum("interleaved_order" in r["info"]["structural_features"] for r in out) > 0.1 * len(out)
    rep = dataset.check(brief.iter_dir / "dataset.jsonl", w,
                        eval_fingerprints=decontam.eval_fingerprints(sys.executable, "stock_arithmetic"),
                        scored=accuracy.score_rows(sys.executable, "stock_arithmetic", None,
                                                   brief.iter_dir / "dataset.jsonl"))
    assert rep.passed, rep.render()
    # one rollout short of the evidence: the surface stays
    (brief.iter_dir / "probe_rollouts.jsonl.rejected-1").unlink()
    (brief.iter_dir / "probe_rollouts.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in probe[1:SURFACE_EVIDENCE]))
    assert surface_reach(brief, stock_arithmetic.FAMILY)["distractor_numbers"]["off"] is False
    # control C, as the controls phase builds it from this iteration's weakness.json, draws its
    # untargeted rows with the same shares, and says so
    from types import SimpleNamespace

    from driver.arms.table import untargeted

    ctx = SimpleNamespace(rd=SimpleNamespace(path=tmp_path), hub=brief.hub, state=SimpleNamespace(seed=0))
    said = untargeted(ctx, {"dataset": "iter_1/dataset.jsonl"}, tmp_path / "c.jsonl")
    c = [json.loads(x) for x in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert len(c) == len(out)
    assert not any("distractor_numbers" in r["info"]["structural_features"] for r in c)
    assert any("interleaved_order" in r["info"]["structural_features"] for r in c)
    assert "(style stories) (surface {'distractor_numbers': 0.0})" in said
    # the plain style keeps its distractors (its wordings would be clones without them): the
    # teacher leaves nothing out there and its report says why
    d4 = tmp_path / "plain"
    d4.mkdir()
    brief4 = _brief(d4, "stock_arithmetic", rows)
    (brief4.iter_dir / "probe_rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in probe))
    brief4.last_probe = {"prompts": 32, "k": 4, "live_fraction": 0.0, "all_solved": 0,
                         "none_solved": 32, "mean_reward": 0.0, "min_live": 0.1, "passed": False}
    brief4.attempt = 1
    BuiltinTeacher().teach(brief4)
    w4 = json.loads((brief4.iter_dir / "weakness.json").read_text())
    assert w4["style"] == "plain" and w4["surface"] == {}
    assert "distractor_numbers" in {f["name"] for f in w4["structural_features"]}
    assert "never solved, but kept: plain rows need it" in (brief4.iter_dir / "weakness_report.md").read_text()


def test_builtin_teacher_aims_at_the_edge_of_competence_from_pass_rates(tmp_path):
    """Pass rates come from every rollout of the last train steps (train_sample.jsonl), not
    from the failures file; rows go where the student fails most but still sometimes solves,
    and a probe rejection moves the aim the way its numbers point."""
    from driver.teachers.builtin import BuiltinTeacher, difficulty_shift, edge_weight
    from generators.stock_arithmetic import running

    assert edge_weight(0.8) > edge_weight(0.5) > edge_weight(0.2)       # weakest first ...
    assert edge_weight(0.99) < edge_weight(0.2)                          # ... unless never solved
    assert edge_weight(0.5, -1) > edge_weight(0.9, -1)                   # easier: peak at 50%
    assert edge_weight(0.99, +1) > edge_weight(0.8, +1)                  # harder: all the way up
    brief = types.SimpleNamespace(last_probe={"passed": False, "none_solved": 30, "all_solved": 0})
    assert difficulty_shift(brief) == -1
    brief.last_probe = {"passed": False, "none_solved": 1, "all_solved": 20}
    assert difficulty_shift(brief) == 1
    brief.last_probe = None
    assert difficulty_shift(brief) == 0

    import verifiers as vf
    train = list(vf.load_environment("stock_arithmetic").get_dataset())
    # a constructed student: solves 15% of stories whose stock reaches 100, 70% of the rest
    sample = [{"step": 30, "example_id": i, "info": r["info"],
               "reward": float((i % 20) < (3 if max(running(r["info"]["problem"])) >= 100 else 14))}
              for i, r in enumerate(train)]
    failures = sorted(sample, key=lambda r: r["reward"])[:200]
    b = _brief(tmp_path, "stock_arithmetic", failures)
    b.train_sample_path = tmp_path / "train_sample.jsonl"
    b.train_sample_path.write_text("".join(json.dumps(r) + "\n" for r in sample))
    BuiltinTeacher().teach(b)
    w = json.loads((b.iter_dir / "weakness.json").read_text())
    assert w["train_rollouts_read"] == len(sample) and w["difficulty_shift"] == 0
    alloc = w["allocations"]
    three = alloc["long running totals / large intermediate stock"] + \
        alloc["carry-heavy deliveries / carry past one hundred"]
    # most rows aim at the weak structure (allocating in proportion to the failure rate, as
    # before, would give these two buckets 49%)
    assert three > 0.65 * sum(alloc.values())


def test_builtin_teacher_finds_the_failing_range_of_a_magnitude_and_the_rows_follow(tmp_path):
    """A constructed student fails 90% of the train problems whose peak stock is 120 or more and
    10% of the rest: the teacher finds that edge from the train sample alone (rows with a
    distractor, failed at any peak, do not count), draws 60% of the rows in the range, spread
    over it rather than bunched at its low end, and the dataset still passes every gate line
    (a peak of 120 never ends below 10, so the other buckets owe the near-zero rows). A later
    iteration keeps the first aim, whatever its own sample shows; a student that fails evenly
    gives no aim."""
    import verifiers as vf

    from driver.teachers import generator_run
    from driver.gates import dataset
    from driver.gates import accuracy, decontam
    from driver.teachers.builtin import AIM_SHARE, BuiltinTeacher, failing_range
    from generators import stock_arithmetic

    train = list(vf.load_environment("stock_arithmetic").get_dataset())
    peak = [max(stock_arithmetic.running(r["info"]["problem"])) for r in train]
    sample = [{"step": 30, "example_id": i, "info": r["info"],
               "reward": float((i % 10 == 0) == (peak[i] >= 120))} for i, r in enumerate(train)]
    sample += [{"step": 30, "example_id": 2000 + i, "reward": 0.0,
                "info": {**r["info"], "structural_features": ["carry", "distractor_numbers"]}}
               for i, r in enumerate(train[:300]) if peak[i] < 60]
    b = _brief(tmp_path, "stock_arithmetic", sorted(sample, key=lambda r: r["reward"])[:200])
    b.train_sample_path = tmp_path / "train_sample.jsonl"
    b.train_sample_path.write_text("".join(json.dumps(r) + "\n" for r in sample))
    BuiltinTeacher().teach(b)
    w = json.loads((b.iter_dir / "weakness.json").read_text())
    aim = w["aim"]
    assert aim["magnitude"] == "peak stock" and aim["at_least"] == min(v for v in peak if v >= 120)
    assert aim["inside"]["rollouts"] == sum(v >= 120 for v in peak)    # clean rollouts only
    assert aim["share"] == AIM_SHARE and aim["found_in"] == "iter_1"
    report = (b.iter_dir / "weakness_report.md").read_text()
    assert f"peak stock at least {aim['at_least']}" in report and "60% of the rows" in report
    # no probe has seen a surface yet: each is tried on a small share of the rows
    assert "too few to judge" in report
    assert generator_run.run(b.iter_dir)["ok"]
    rows = [json.loads(x) for x in (b.iter_dir / "dataset.jsonl").read_text().splitlines()]
    inside = [r for r in rows if stock_arithmetic.in_aim(r["info"]["problem"], aim)]
    # the aim's share holds over the buckets whose structure admits the range (none of a
    # "withdrawal to near zero" row's peaks can reach 120)
    open_buckets = {r["info"]["sub_domain"] for r in inside}
    assert len(inside) >= AIM_SHARE * sum(r["info"]["sub_domain"] in open_buckets for r in rows)
    # spread over the range: in the train split 35% of the peaks of 120 or more reach 130
    assert sum(max(stock_arithmetic.running(r["info"]["problem"])) >= 130 for r in inside) > 0.5 * len(inside)
    for f in ("distractor_numbers", "interleaved_order"):
        assert 0.1 <= sum(f in r["info"]["structural_features"] for r in rows) / len(rows) <= 0.25
    rep = dataset.check(b.iter_dir / "dataset.jsonl", w,
                        eval_fingerprints=decontam.eval_fingerprints(sys.executable, "stock_arithmetic"),
                        scored=accuracy.score_rows(sys.executable, "stock_arithmetic", None,
                                                   b.iter_dir / "dataset.jsonl"))
    assert rep.passed, rep.render()
    # iteration 2 reads rollouts on the teacher's own rows; it keeps iteration 1's aim
    flat = [{**r, "reward": float(r["example_id"] % 3 == 0)} for r in sample]
    pairs = [(r, stock_arithmetic.structure_of(r["info"])) for r in flat]
    assert failing_range(pairs, stock_arithmetic.FAMILY) is None
    d2 = b.run_dir / "iter_2"
    d2.mkdir()
    b.iter_dir, b.iteration = d2, 2
    b.train_sample_path.write_text("".join(json.dumps(r) + "\n" for r in flat))
    BuiltinTeacher().teach(b)
    assert json.loads((d2 / "weakness.json").read_text())["aim"] == aim


def test_teacher_md_says_which_split_its_accuracies_come_from(tmp_path):
    from driver.errors import WaitingForTeacher
    from driver.teachers.agent import AgentTeacher

    for split, words in (("selection", "Accuracy so far on the hub's selection split (the test split is kept"),
                         ("eval", "Accuracy so far on the eval split")):
        d = tmp_path / split
        d.mkdir()
        b = _brief(d, "stock_arithmetic", [])
        b.accs_split, b.train_sample_path = split, d / "train_sample.jsonl"
        b.hub = {**b.hub, "answer_format_instruction": "one JSON object"}
        with pytest.raises(WaitingForTeacher):
            AgentTeacher().teach(b)
        text = (b.iter_dir / "TEACHER.md").read_text()
        assert words in text and f"`{b.train_sample_path}`" in text


def test_teacher_md_and_the_llm_prompt_state_every_row_field_and_gate_line(tmp_path):
    from driver.errors import WaitingForTeacher
    from driver.gates import rules
    from driver.teachers.agent import AgentTeacher
    from driver.teachers.llm import render_prompt

    b = _brief(tmp_path, "stock_arithmetic", [{"prompt": "p", "completion": "c", "reward": 0.0}])
    b.train_sample_path = tmp_path / "train_sample.jsonl"
    b.hub = {**b.hub, "answer_format_instruction": "one JSON object",
             "info_keys_read": ["population", "problem"]}
    with pytest.raises(WaitingForTeacher):
        AgentTeacher().teach(b)
    texts = {"TEACHER.md": (b.iter_dir / "TEACHER.md").read_text(), "LLM prompt": render_prompt(b)[1]}
    for where, text in texts.items():
        flat = " ".join(text.split())
        for f in rules.ROW_FIELDS:
            assert f"`{f.name}`" in text and " ".join(f.meaning.split()) in flat, (where, f.name)
        for g in rules.LINES:
            assert g.name in text and " ".join(g.rule.split()) in flat, (where, g.name)
        assert "`population`, `problem`" in text or "population, problem" in text, where
        assert "### (5) Results" in text, where


@pytest.mark.parametrize("heading", ["### (5) Results", "### 5. Results", "## (5) Results: pending"])
def test_the_results_section_is_filled_in_not_appended_whatever_its_spelling(heading):
    from driver.reporting.scratchpad import _RESULTS

    entry = f"## Iteration 1\n### (1) Understanding\nx\n{heading}\npending\n"
    filled = _RESULTS.sub(lambda m: m.group(1) + "\n" + "- eval_acc: 0.5\n", entry)
    assert filled.count("Results") == 1 and "pending" not in filled and filled.endswith("- eval_acc: 0.5\n")


def test_the_llm_teacher_may_add_hparams_json_and_is_told_its_bounds(tmp_path):
    from driver.teachers.llm import parse_files, render_prompt

    reply = ("<<<FILE weakness.json>>>\n{}\n<<<END FILE>>>\n<<<FILE hparams.json>>>\n{\"lr\": 3e-05}\n"
             "<<<END FILE>>>\n<<<FILE notes.txt>>>\nx\n<<<END FILE>>>")
    assert parse_files(reply) == {"weakness.json": "{}\n", "hparams.json": "{\"lr\": 3e-05}\n"}
    b = _brief(tmp_path, "stock_arithmetic", [{"prompt": "p", "completion": "c", "reward": 0.0}])
    system, user = render_prompt(b)
    assert "A fifth, hparams.json, is optional" in " ".join(system.split())
    assert "`lr`: learning rate, in (0, 0.01]" in user and "pinned and refused" in " ".join(user.split())


def test_every_teacher_choice_is_one_registry_entry_that_builds_a_teacher_and_says_why_it_cannot_teach(monkeypatch):
    """--teacher's choices and the registry name the same teachers; each builds an object with
    the protocol's `name` and `teach`; the refusals are the registry's, read before iter_0."""
    from types import SimpleNamespace

    from driver import teachers
    from driver.errors import UsageError
    from driver.run.model import TEACHER_NAMES

    assert set(teachers.REGISTRY) == set(TEACHER_NAMES)
    llm = SimpleNamespace(key_env="SSI_TEST_TEACHER_KEY")
    monkeypatch.delenv("SSI_TEST_TEACHER_KEY", raising=False)
    for name in TEACHER_NAMES:
        t = teachers.get(SimpleNamespace(teacher=name, llm=llm))
        assert t.name == name and callable(t.teach)
    with pytest.raises(UsageError, match=r"\$SSI_TEST_TEACHER_KEY, which is not set"):
        teachers.preflight(SimpleNamespace(teacher="llm", llm=llm), {})
    monkeypatch.setenv("SSI_TEST_TEACHER_KEY", "k")
    teachers.preflight(SimpleNamespace(teacher="llm", llm=llm), {})
    with pytest.raises(UsageError, match="no family generator"):
        teachers.preflight(SimpleNamespace(teacher="builtin", llm=None), {"env_id": "someone_elses_env"})
    with pytest.raises(UsageError, match="choose one of"):
        teachers.get(SimpleNamespace(teacher="oracle", llm=None))


def test_the_failing_range_is_the_sharpest_edge_not_the_widest_significant_cut():
    """A student that fails every train problem whose peak stock is 120 or more, 40% of the more
    common ones peaking at 101..119 and 3% below, as the train split's peaks run (few of 120 or
    more): the cut at 101 has the most evidence (the smallest Fisher p, the first step), but
    its core at 120, where every rollout fails, fails clearly more than its margin; rows spread
    from 101 would put most of the aim where the student mostly succeeds."""
    from scipy.stats import fisher_exact

    from driver.teachers.builtin import failing_range
    from generators import stock_arithmetic

    def problem(peak: int) -> dict:
        third = peak // 3
        return {"initial": third, "deliveries": [third, peak - 2 * third], "withdrawals": [5, 5]}

    rollouts = [(40 + i % 61, i % 33 == 0) for i in range(700)]           # peaks 40..100
    rollouts += [(101 + i % 19, i % 5 < 2) for i in range(150)]           # 101..119: 40%
    rollouts += [(120 + i % 25, True) for i in range(50)]                 # 120..144: all
    pairs = [({"reward": 0.0 if fail else 1.0, "info": {"structural_features": []}},
              stock_arithmetic.structure_of({"problem": problem(peak)})) for peak, fail in rollouts]

    def p_at_least(t: int) -> float:
        inside = [f for v, f in rollouts if v >= t]
        out = [f for v, f in rollouts if v < t]
        return fisher_exact([[sum(inside), len(inside) - sum(inside)], [sum(out), len(out) - sum(out)]],
                            alternative="greater")[1]

    assert p_at_least(101) < p_at_least(120)       # the most evidence: the wide cut
    aim = failing_range(pairs, stock_arithmetic.FAMILY)
    assert aim["magnitude"] == "peak stock" and aim["at_least"] == 120
    assert aim["inside"] == {"rollouts": 50, "failed": 50}
