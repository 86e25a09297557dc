"""Did a named weakness shrink? From iteration 2 each brief states, per bucket of the last trained
iteration's weakness report, the train failure rate before that iteration trained on its rows and
after (driver/analysis/weakness_diff.py); TEACHER.md, the LLM prompt and the report show the
table, and the built-in teacher gives a bucket the diff shows fixed only the allocation floor."""
from __future__ import annotations

import json
import re
import types
from pathlib import Path

import pytest

from conftest import FAST, driver, driver_env, run_dir_from
import teacher_files

W = {"domains": [{"name": "carries", "sub_domains": [{"name": "single"}, {"name": "double"}]},
                 {"name": "borrows", "sub_domains": [{"name": "single"}, {"name": "double"}]}]}


def _rows(domain, sub, failed, passed, **extra):
    return ([{"info": {"domain": domain, "sub_domain": sub}, "reward": 0.0, **extra}] * failed
            + [{"info": {"domain": domain, "sub_domain": sub}, "reward": 1.0, **extra}] * passed)


def test_the_diff_counts_each_buckets_train_failures_before_and_after_with_intervals():
    from driver.analysis import weakness_diff
    from driver.analysis.evaluation import wilson_interval

    before = (_rows("carries", "single", 12, 8) + _rows("carries", "double", 8, 2)
              + _rows("borrows", "single", 5, 5)
              + _rows("elsewhere", "single", 9, 0)            # not a bucket of the report
              + [{"reward": 0.0}, {"info": None, "reward": 0.0}])
    after = (_rows("carries", "single", 2, 38) + _rows("carries", "double", 7, 3)
             # a reward at the threshold passes; a missing one fails; info as a JSON string counts
             + [{"info": {"domain": "carries", "sub_domain": "double"}, "reward": 0.5},
                {"info": json.dumps({"domain": "carries", "sub_domain": "double"}), "reward": None}])
    diff = weakness_diff.compute(W, before, after, iteration=1,
                                 before={"source": "probe", "steps": None},
                                 after={"source": "last_train_steps", "steps": [5, 6]})
    by = {(b["domain"], b["sub_domain"]): b for b in diff["buckets"]}
    assert list(by) == [("carries", "single"), ("carries", "double"), ("borrows", "single"),
                        ("borrows", "double")]
    one = by[("carries", "single")]
    assert (one["before"]["rollouts"], one["before"]["failed"]) == (20, 12)
    assert (one["after"]["rollouts"], one["after"]["failed"]) == (40, 2)
    assert one["before"]["failure_rate"] == 0.6 and one["after"]["failure_rate"] == 0.05
    assert one["after"]["ci95"] == [round(x, 4) for x in wilson_interval(2, 40)]
    assert one["change"] == -0.55 and one["verdict"] == "shrank"
    two = by[("carries", "double")]
    assert (two["after"]["rollouts"], two["after"]["failed"]) == (12, 8)
    assert two["verdict"] == "unclear"                       # 8/10 -> 8/12: intervals overlap
    gone = by[("borrows", "single")]
    assert gone["after"]["rollouts"] == 0 and gone["change"] is None and gone["verdict"] == "unclear"
    assert by[("borrows", "double")]["before"]["rollouts"] == 0
    assert diff["before"]["rollouts"] == len(before) and diff["after"]["rollouts"] == len(after)
    table = weakness_diff.table_markdown(diff)
    assert "| carries / single | 12 / 20 = 0.60 [" in table and "| -0.55 | shrank |" in table
    assert "| borrows / single | 5 / 10 = 0.50" in table and "| no rollouts | - | unclear |" in table
    assert "gradient probe's 51 rollouts" in table and "last train steps 5-6" in table


def _write_steps(out: Path, steps: dict[int, list[dict]]) -> None:
    """Each trainer step's batch, where classic prime-rl files it (one rollouts dir below)."""
    from driver import dialects

    for s, rows in steps.items():
        d = out / "run_default" / "rollouts" / f"step_{dialects.get('classic').rows_step(s)}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "train_rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_weakness_phase_takes_before_from_the_probe_else_the_first_step_and_after_from_the_last(tmp_path):
    """iter_1 trained steps 4-6 on its rows: the student failed every 'carries / single' rollout
    of step 4 and none after. Without a probe, before is step 4 and after is steps 5-6 (the first
    step left out of the window); with iter_1's probe rollouts, before is those and after is the
    whole window. Iteration 1's brief has no diff: iter_0 trained on the hub's own rows."""
    from driver import dialects
    from driver.phases.iteration import write_failures, write_weakness_diff

    state = types.SimpleNamespace(iter_0_step=3, steps_per_run=3, dataset="stock_arithmetic",
                                  env_tag="abc123")
    ctx = types.SimpleNamespace(iter_dir=lambda k: tmp_path / f"iter_{k}",
                                dialect=dialects.get("classic"), state=state)
    _write_steps(tmp_path / "iter_0" / "prime_out", {3: [{"info": {}, "reward": 1.0}]})
    (tmp_path / "iter_1").mkdir()
    (tmp_path / "iter_1" / "weakness.json").write_text(json.dumps(W))
    _, sample, _ = write_failures(ctx, 1)
    assert write_weakness_diff(ctx, 1, sample) is None
    _write_steps(tmp_path / "iter_1" / "prime_out", {
        4: _rows("carries", "single", 10, 0) + _rows("borrows", "double", 1, 1),
        5: _rows("carries", "single", 0, 10), 6: _rows("carries", "single", 0, 10)})
    _, sample, _ = write_failures(ctx, 2)
    path = write_weakness_diff(ctx, 2, sample)
    assert path == tmp_path / "iter_2" / "teacher_input" / "weakness_diff.json"
    diff = json.loads(path.read_text())
    assert diff["iteration"] == 1
    assert diff["before"] == {"source": "first_train_step", "steps": [4], "rollouts": 12}
    assert diff["after"] == {"source": "last_train_steps", "steps": [5, 6], "rollouts": 20}
    one = diff["buckets"][0]
    assert (one["before"]["failed"], one["before"]["rollouts"]) == (10, 10)
    assert (one["after"]["failed"], one["after"]["rollouts"]) == (0, 20)
    assert one["verdict"] == "shrank"
    (tmp_path / "iter_1" / "probe_rollouts.jsonl").write_text("".join(
        json.dumps(r) + "\n" for r in _rows("carries", "single", 3, 1)))
    diff = json.loads(write_weakness_diff(ctx, 2, sample).read_text())
    assert diff["before"] == {"source": "probe", "steps": None, "rollouts": 4}
    assert diff["after"]["steps"] == [4, 5, 6]
    one = diff["buckets"][0]
    assert (one["before"]["failed"], one["before"]["rollouts"]) == (3, 4)
    assert (one["after"]["failed"], one["after"]["rollouts"]) == (10, 30)


def test_builtin_teacher_gives_a_bucket_the_diff_shows_fixed_only_the_floor(tmp_path):
    """A constructed student fails most stories whose stock reaches 100: without a diff, the
    'large intermediate stock' bucket gets most rows. A diff showing that bucket failed 3 of 100
    train rollouts after iter_1's training marks it fixed: it gets only the allocation floor and
    the report says so. A bucket at a low rate on too few rollouts is not fixed."""
    import verifiers as vf

    from driver.analysis import weakness_diff
    from driver.teachers import Brief
    from driver.teachers.builtin import FIXED_EVIDENCE, FIXED_RATE, BuiltinTeacher, allocate
    from generators.stock_arithmetic import running

    train = list(vf.load_environment("stock_arithmetic").get_dataset())
    sample = [{"step": 30, "example_id": i, "info": r["info"],
               "reward": float((i % 20) < (3 if max(running(r["info"]["problem"])) >= 100 else 14))}
              for i, r in enumerate(train)]
    big, small = "long running totals / large intermediate stock", "carry-heavy deliveries / carry past one hundred"

    def teach(root: Path, diff: dict | None) -> dict:
        root.mkdir()
        (root / "iter_2").mkdir()
        failures, samples = root / "failures.jsonl", root / "train_sample.jsonl"
        failures.write_text("".join(json.dumps(r) + "\n" for r in sorted(sample, key=lambda r: r["reward"])[:200]))
        samples.write_text("".join(json.dumps(r) + "\n" for r in sample))
        diff_path = None
        if diff is not None:
            diff_path = root / "iter_2" / "teacher_input" / "weakness_diff.json"
            diff_path.parent.mkdir()
            diff_path.write_text(json.dumps(diff))
        b = Brief(run_dir=root, iter_dir=root / "iter_2", iteration=2,
                  hub={"env_id": "stock_arithmetic", "env_args": {}}, failures_path=failures,
                  failures_step="train_step_30", eval_accs={"iter_0": 0.2, "iter_1": 0.3},
                  train_sample_path=samples, weakness_diff_path=diff_path)
        BuiltinTeacher().teach(b)
        return json.loads((root / "iter_2" / "weakness.json").read_text())

    plain = teach(tmp_path / "no_diff", None)
    floor = min(allocate({"a": 1.0, "b": 0.0}).values())
    assert plain["allocations"][big] > 3 * floor and plain["fixed"] == {}

    weakness = teacher_files.weakness(0.2)
    by_bucket = {big: (3, 100), small: (1, FIXED_EVIDENCE // 2)}
    before = [{"info": {"domain": d["name"], "sub_domain": s["name"]}, "reward": 0.0}
              for d in weakness["domains"] for s in d["sub_domains"] for _ in range(20)]
    after = []
    for d in weakness["domains"]:
        for s in d["sub_domains"]:
            fails, n = by_bucket.get(f"{d['name']} / {s['name']}", (30, 100))
            after += _rows(d["name"], s["name"], fails, n - fails)
    diff = weakness_diff.compute(weakness, before, after, iteration=1,
                                 before={"source": "probe", "steps": None},
                                 after={"source": "last_train_steps", "steps": [5, 6]})
    assert 3 / 100 <= FIXED_RATE and 1 / (FIXED_EVIDENCE // 2) <= FIXED_RATE
    w = teach(tmp_path / "with_diff", diff)
    assert list(w["fixed"]) == [big]                     # the small-sample bucket is not fixed
    assert w["fixed"][big]["by"] == "iter_1" and w["fixed"][big]["after"]["failed"] == 3
    assert w["allocations"][big] == floor
    assert w["allocations"][small] > floor
    assert sum(w["allocations"].values()) == sum(plain["allocations"].values())
    subs = {s["name"]: s for d in w["domains"] for s in d["sub_domains"]}
    assert subs["large intermediate stock"].get("fixed") is True and "fixed" not in subs["carry past one hundred"]
    report = (tmp_path / "with_diff" / "iter_2" / "weakness_report.md").read_text()
    assert "## The last report's buckets, before and after training on them" in report
    assert f"| {big} | 20 / 20 = 1.00" in report
    assert f"**{big}: fixed**: 3 of 100 train rollouts failed after iter_1's training" in report
    assert "this report drops it: its bucket gets only the allocation floor" in report
    entry = (tmp_path / "with_diff" / "iter_2" / "scratchpad_entry.md").read_text()
    assert f"- {big}: {floor} (fixed by the last iteration: floor only)" in entry


def _agent(brief_path: Path) -> None:
    """A coding agent answering TEACHER.md with the four files a teacher writes (the
    StockArithmetic family's buckets, skeletons from the failed train rows it points to)."""
    text = brief_path.read_text()
    iter_dir = Path(re.search(r"Write these files in `([^`]+)`", text).group(1))
    failures = Path(re.search(r"lowest reward first: `([^`]+)`", text).group(1))
    # TEACHER.md: each failure has its `idx` and `step`; a row cites it as train_step_<step>_idx_<idx>
    cite = re.search(r"cites one as `skeleton:(train_step_<step>_idx_<idx>)`", text).group(1)
    n = int(re.search(r"# Teacher brief — iteration (\d+)", text).group(1))
    rows = [json.loads(x) for x in failures.open()]
    skeletons = [{"source": cite.replace("<step>", str(r["step"])).replace("<idx>", str(r["idx"])),
                   "problem": r["info"]["problem"]}
                 for r in rows if r["reward"] < 0.5 and "problem" in (r.get("info") or {})]
    prior = re.findall(r"--prior (\S+)", text)
    for name, body in teacher_files.passing(skeletons, n, "stock_arithmetic", prior=prior).items():
        (iter_dir / name).write_text(body)


@pytest.mark.extended   # a whole run: CI's extended command keeps the main suite in its budget
def test_iteration_2s_brief_holds_iteration_1s_buckets_before_and_after_and_the_report_shows_them(tmp_path, runs):
    env = driver_env(tmp_path)
    r = driver(["run", "--dataset", "stock_arithmetic", "--teacher", "agent", "--max-iters", "3",
                "--runs-dir", str(runs), *FAST], env)
    rd = run_dir_from(r.stdout)
    briefs = []
    while r.returncode == 3:
        n = json.loads((rd / "run.json").read_text())["iteration"]
        briefs.append(n)
        _agent(rd / f"iter_{n}" / "TEACHER.md")
        r = driver(["resume", str(rd)], env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert briefs == [1, 2]
    assert not (rd / "iter_1" / "teacher_input" / "weakness_diff.json").exists()
    diff = json.loads((rd / "iter_2" / "teacher_input" / "weakness_diff.json").read_text())
    w1 = json.loads((rd / "iter_1" / "weakness.json").read_text())
    assert diff["iteration"] == 1
    assert [(b["domain"], b["sub_domain"]) for b in diff["buckets"]] == \
        [(d["name"], s["name"]) for d in w1["domains"] for s in d["sub_domains"]]
    # before: the gradient probe's rollouts on iter_1's rows; after: iter_1's last train steps
    probe = [json.loads(x) for x in (rd / "iter_1" / "probe_rollouts.jsonl").read_text().splitlines()]
    assert diff["before"]["source"] == "probe" and diff["before"]["rollouts"] == len(probe)
    from driver import dialects

    classic = dialects.get("classic")   # trained steps: classic writes step s's batch at step_{s-1}
    steps = [classic.trained_step(s) for s in classic.train_steps(rd / "iter_1" / "prime_out")]
    assert diff["after"]["steps"] == steps[-10:]
    last = [x for s in diff["after"]["steps"]
            for x in classic.train_rows(rd / "iter_1" / "prime_out", classic.rows_step(s))]
    first = diff["buckets"][0]
    key = (first["domain"], first["sub_domain"])
    mine = [x for x in last if (x["info"]["domain"], x["info"]["sub_domain"]) == key]
    assert first["after"]["rollouts"] == len(mine) > 0
    assert first["after"]["failed"] == sum(x["reward"] < 0.5 for x in mine)
    assert sum(b["before"]["rollouts"] for b in diff["buckets"]) == len(probe)
    # TEACHER.md of iteration 2 shows the table and says what to do with it; iteration 1's has none
    from driver.analysis import weakness_diff

    table = weakness_diff.table_markdown(diff)
    brief2 = (rd / "iter_2" / "TEACHER.md").read_text()
    assert table in brief2 and "**keep** it" in brief2 and "**drop** it" in brief2
    assert "shrink" not in (rd / "iter_1" / "TEACHER.md").read_text()
    # the report's per-iteration notes and the scratchpad show it too
    rep = driver(["report", str(rd)], env)
    assert rep.returncode == 0, rep.stderr[-2000:]
    report = (rd / "report.md").read_text()
    assert "## Did the named weaknesses shrink? (train rollouts only)" in report and table in report
    pad = (rd / "scratchpad.md").read_text()
    assert "this iteration's buckets, train failure rate before -> after its training (iter_2's brief)" in pad
    assert weakness_diff.brief_lines(diff)[0] in pad
