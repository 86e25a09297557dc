"""Phase 3, one iteration: weakness -> dataset -> environment -> train -> evaluate.

Every iteration resumes from iter_0's checkpoint (the anchor), never from base or iter_N-1.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from driver.analysis import evaluation
from driver import faults
from driver.teachers import generator_run
from driver.reporting import scratchpad
from driver import teachers
from driver.context import Ctx
from driver.errors import DriverError
from driver.gates import accuracy
from driver.gates import aux_rewards
from driver.gates.dataset import check as check_dataset
from driver.gates import decontam
from driver.envs import describe
from driver.envside.rows import tool_exchanges
from driver.gates import hparams
from driver.gates.weakness import load as load_weakness
from driver.arms import table
from driver.arms.arm import config_files, train_knobs
from driver.arms.evaluate import evaluate as eval_arm
from driver.arms.evaluate import metrics_entry
from driver.arms.render import ITERATION_PURPOSE, write_config
from driver.arms.install import install_env
from driver.arms.probe import run_probe
from driver.arms.train import train
from driver.arms.train import trained as arm_trained
from driver.run.files import (atomic_write_json, atomic_write_text, file_sha256, iter_jsonl,
                              read_json)
from driver.run.arm_files import ArmFiles, rejected, set_aside_attempt

MAX_FAILURE_ROWS = 200
SAMPLE_STEPS = 10   # train steps whose rollouts (id, info, reward) give the teacher pass rates


# --------------------------------------------------------------------------------------------
# weakness: brief the teacher

def train_window(ctx: Ctx, k: int) -> tuple[int, int]:
    """(start, final) of iteration k's training launch: iter_0 from the base model to its
    final step, every later iteration from iter_0's. Its train rows are those of this window
    only (rl_contract: the layout says which rollouts dirs a window writes)."""
    if k == 0:
        return 0, ctx.state.iter_0_step or ctx.state.steps_per_run
    arm = table.iteration(ctx, k)
    return arm.resume_step or 0, arm.final_step(ctx.state.steps_per_run)


def _source_iteration(ctx: Ctx, n: int) -> int:
    """The latest iteration before n that has train rollouts (a skipped one has none)."""
    for k in range(n - 1, -1, -1):
        out = ctx.iter_dir(k) / ArmFiles.OUT
        if ctx.dialect.latest_train_step(out, *train_window(ctx, k)) is not None:
            return k
    raise DriverError("no train rollouts found in any earlier iteration")


FAILURE_KEYS = ("example_id", "prompt", "completion", "answer", "info", "reward", "metrics",
                "is_truncated", "stop_condition")
SAMPLE_KEYS = ("example_id", "info", "reward", "metrics", "is_truncated")


def lowest_across_steps(by_step: dict[int, list[dict]], n: int) -> list[dict]:
    """The `n` lowest-reward rollouts of several steps, each tagged with its `step`: ties (a
    student that fails many rows fails them at 0) are shared out step by step, so the rows come
    from across the steps read, not from the last one only."""
    ranked = []
    for s, rows in by_step.items():
        ordered = sorted(rows, key=lambda r: float(r.get("reward") or 0.0))
        ranked += [(float(r.get("reward") or 0.0), rank, s, r) for rank, r in enumerate(ordered)]
    ranked.sort(key=lambda x: (x[0], x[1], x[2]))
    return [{"step": s, **r} for _, _, s, r in ranked[:n]]


def write_failures(ctx: Ctx, n: int) -> tuple[Path, Path, str]:
    """The teacher's evidence, from the latest train rollouts, each step's file read once:
    every rollout of the last SAMPLE_STEPS steps cut to its step, id, info and reward
    (train_sample.jsonl, for pass rates per structure), and the up to 200 lowest-reward rows of
    those steps in full (failures.jsonl): each with its `idx` (its line in the file, 0 first) and
    its `step`, its whole completion (a multi-turn episode's every reply and env message, in
    order) and what stopped it. Reads the steps through the dialect's layout."""
    k = _source_iteration(ctx, n)
    out = ctx.iter_dir(k) / ArmFiles.OUT
    steps = ctx.dialect.train_steps(out, *train_window(ctx, k))[-SAMPLE_STEPS:]
    sample, by_step = [], {}
    for s in steps:
        # an errored episode is the infrastructure's failure, not the student's; a step is
        # named as it was trained (classic writes step s's batch under step_{s-1})
        t = ctx.dialect.trained_step(s)
        by_step[t] = [r for r in ctx.dialect.train_rows(out, s) if not r.get("errored")]
        sample += [{"step": t, **{key: r.get(key) for key in SAMPLE_KEYS}} for r in by_step[t]]
    rows = lowest_across_steps(by_step, MAX_FAILURE_ROWS)
    folder = ctx.iter_dir(n) / ArmFiles.TEACHER_INPUT
    sample_path, failures_path = folder / ArmFiles.TRAIN_SAMPLE, folder / ArmFiles.FAILURES
    atomic_write_text(sample_path, "".join(json.dumps(r) + "\n" for r in sample))
    atomic_write_text(failures_path, "".join(
        json.dumps({"idx": i, "step": r["step"], **{key: r.get(key) for key in FAILURE_KEYS},
                    **_episode_fields(r)}) + "\n" for i, r in enumerate(rows)))
    first, last = ctx.dialect.trained_step(steps[0]), ctx.dialect.trained_step(steps[-1])
    span = f"train_step_{last}" if first == last else f"train_step_{first}..train_step_{last}"
    return failures_path, sample_path, f"{span} of iter_{k}"


def _episode_fields(row: dict) -> dict:
    """A rollout's turns: how many replies the student gave (several in a multi-turn episode);
    in a tool env's episode, each tool call with its arguments and the result the env gave it
    (`tool_calls`: envside/rows.py tool_exchanges)."""
    completion = row.get("completion")
    if not isinstance(completion, list):
        return {}
    out: dict = {"turns": sum(1 for m in completion if isinstance(m, dict) and m.get("role") == "assistant")}
    calls = tool_exchanges(completion)
    if calls:
        out["tool_calls"] = calls
    return out


def write_weakness_diff(ctx: Ctx, n: int, sample_path: Path) -> Path | None:
    """iter_n/teacher_input/weakness_diff.json: for each bucket of the weakness report of the
    iteration the teacher's sample comes from (k >= 1, the last that trained), its train failure
    rate before iter_k trained on those rows (the probe's rollouts: the anchor; else iter_k's first
    train step) against after (the last SAMPLE_STEPS steps, as in train_sample.jsonl, less the
    first step). Train rollouts only. None in iteration 1 (iter_0 trained on the hub's rows)."""
    from driver.analysis import weakness_diff

    k = _source_iteration(ctx, n)
    weakness_path = ctx.iter_dir(k) / ArmFiles.WEAKNESS
    if k < 1 or not weakness_path.exists():
        return None
    out = ctx.iter_dir(k) / ArmFiles.OUT
    probe_rows = ctx.iter_dir(k) / ArmFiles.PROBE_ROLLOUTS
    if probe_rows.exists():
        before_rows = [r for _, r in iter_jsonl(probe_rows) if isinstance(r, dict)]
        before, first = {"source": "probe", "steps": None}, []
    else:   # the first step's rollouts were sampled by the anchor, before any update
        first_dirs = ctx.dialect.train_steps(out, *train_window(ctx, k))[:1]
        before_rows = [r for s in first_dirs for r in ctx.dialect.train_rows(out, s)
                       if not r.get("errored")]
        first = [ctx.dialect.trained_step(s) for s in first_dirs]
        before = {"source": "first_train_step", "steps": first}
    after_rows = [r for _, r in iter_jsonl(sample_path)
                  if isinstance(r, dict) and r.get("step") not in first]
    after_steps = sorted({r["step"] for r in after_rows})
    diff = weakness_diff.compute(read_json(weakness_path), before_rows, after_rows, iteration=k,
                                 before=before, after={"source": "last_train_steps",
                                                       "steps": after_steps})
    path = ctx.iter_dir(n) / ArmFiles.TEACHER_INPUT / weakness_diff.FILE
    atomic_write_json(path, diff)
    return path


def eval_accs(ctx: Ctx) -> dict:
    # the teacher calibrates on the selection split where there is one, never on the split the
    # lifts are reported on
    return {f"iter_{m['iter']}": evaluation.selection_score(m) for m in ctx.rd.load_metrics()["iters"]
            if m.get("eval_acc") is not None}


def weakness(ctx: Ctx, n: int) -> None:
    d = ctx.iter_dir(n)
    d.mkdir(parents=True, exist_ok=True)
    if teachers.outputs_present(d):
        return
    failures, sample, step = write_failures(ctx, n)
    diff = write_weakness_diff(ctx, n, sample)
    # the last rejection: its reasons (the gate's lines or the probe's verdict) and, when the
    # probe rejected it, the probe's numbers (its record is set aside with the attempt)
    attempts = read_json(d / ArmFiles.ATTEMPTS) if (d / ArmFiles.ATTEMPTS).exists() else {}
    probe_path = rejected(d, ArmFiles.PROBE_RECORD, attempts.get("attempts", 0))
    source = _source_iteration(ctx, n)
    brief = teachers.Brief(
        run_dir=ctx.rd.path, iter_dir=d, iteration=n, hub=ctx.hub, failures_path=failures,
        failures_step=step, eval_accs=eval_accs(ctx),
        accs_split="selection" if ctx.hub.get("selection") else "eval",
        train_sample_path=sample,
        prior_reports=[ctx.iter_dir(k) / ArmFiles.WEAKNESS_REPORT for k in range(1, n)
                       if (ctx.iter_dir(k) / ArmFiles.WEAKNESS_REPORT).exists()],
        last_gate=attempts.get("last_failures", []),
        last_probe=read_json(probe_path) if probe_path.exists() else None, seed=ctx.state.seed,
        attempt=attempts.get("attempts", 0), weakness_diff_path=diff,
        retries=ctx.state.teacher_retries, attempt_history=attempts.get("history", []),
        skipped=[skipped_record(ctx, m) for m in range(source + 1, n)
                 if (ctx.iter_dir(m) / ArmFiles.SKIPPED).exists()])
    faults.point("weakness:before-teacher")
    teachers.get(ctx.state).teach(brief)
    scratchpad.render(ctx)


# --------------------------------------------------------------------------------------------
# dataset: run the generator, gate its rows

def dataset(ctx: Ctx, n: int) -> str:
    """Returns "ok", "retry" (back to the teacher with the gate's lines) or "skip"."""
    d = ctx.iter_dir(n)
    record = d / ArmFiles.DATASET_RECORD
    if record.exists() and (d / ArmFiles.DATASET).exists() and \
            read_json(record).get("dataset_sha256") == file_sha256(d / ArmFiles.DATASET):
        return "ok"
    faults.point("dataset:before-generator")
    # where the phase's time goes (bench/driver_overhead.py prints it): the generator's run,
    # the hub rubric scoring every row, and the gate's own lines
    seconds, t0 = {}, time.monotonic()
    run = generator_run.run(d)
    seconds["generator"] = time.monotonic() - t0
    faults.point("dataset:after-generator")
    failures: list[str]
    if run["ok"]:
        weakness_json = load_weakness(d / ArmFiles.WEAKNESS)
        prior = [ctx.iter_dir(k) / ArmFiles.DATASET for k in range(1, n)
                 if (ctx.iter_dir(k) / ArmFiles.DATASET_RECORD).exists()]
        t0 = time.monotonic()
        try:   # the ACCURATE pillar: the hub rubric scores every row's reasoning
            scored = accuracy.score_hub_rows(ctx.trainer.python, ctx.hub, d / ArmFiles.DATASET)
        except RuntimeError as e:
            raise DriverError(f"[iter_{n}] {e}\nThe hub env loaded at introspection; check "
                              f"{ctx.trainer.python} still has it, then `driver resume`.") from None
        seconds["hub_rubric"], t0 = time.monotonic() - t0, time.monotonic()
        report = check_dataset(d / ArmFiles.DATASET, weakness_json, prior,
                               decontam.cached_fingerprints(ctx.rd.path, ctx.trainer.python, ctx.hub),
                               scored, multi_turn=describe.multi_turn(ctx.hub))
        if (d / ArmFiles.AUX_REWARDS).exists():
            report.lines += aux_rewards.check_with_rows(ctx.trainer.python, d / ArmFiles.AUX_REWARDS,
                                                        weakness_json, d / ArmFiles.DATASET).lines
        report.lines += hparams.check(d).lines
        seconds["gate"] = time.monotonic() - t0
        failures = report.failures()
        atomic_write_json(d / ArmFiles.GATE_REPORT, {**report.to_json(), "failures": failures,
                                                   "seconds": rounded(seconds)})
        if report.passed:
            atomic_write_json(record, {**run, "rows": report.rows})
            ctx.say(f"[iter_{n}] dataset: {report.rows} rows, gate passed")
            return "ok"
    else:
        failures = [f"generator: {run['reason']}"]
        atomic_write_json(d / ArmFiles.GATE_REPORT, {"passed": False, "failures": failures,
                                                   "seconds": rounded(seconds)})
    return reject(ctx, n, failures)


def rounded(seconds: dict) -> dict:
    return {k: round(v, 3) for k, v in seconds.items()}


def tried(iter_dir: Path) -> str:
    """What an attempt aimed at, in one line: its weakness.json's buckets and rows."""
    path = iter_dir / ArmFiles.WEAKNESS
    try:
        alloc = read_json(path).get("allocations") or {}
    except (OSError, ValueError, AttributeError):
        return "weakness.json unreadable"
    return "; ".join(f"{k}: {v} rows" for k, v in list(alloc.items())[:8]) or "no allocations"


def reject(ctx: Ctx, n: int, failures: list[str]) -> str:
    """Hand the iteration back to the teacher with the reasons ("retry"), or record it as
    skipped once the teacher is out of attempts ("skip"). attempts.json keeps every attempt's
    reasons and what it tried, for the next brief (this iteration's, or the next iteration's
    when this one is skipped)."""
    d = ctx.iter_dir(n)
    attempts_path = d / ArmFiles.ATTEMPTS
    before = read_json(attempts_path) if attempts_path.exists() else {}
    attempts = before.get("attempts", 0) + 1
    history = before.get("history", []) + [{"attempt": attempts, "failures": failures, "tried": tried(d)}]
    atomic_write_json(attempts_path, {"attempts": attempts, "last_failures": failures, "history": history})
    ctx.say(f"[iter_{n}] dataset rejected (attempt {attempts}/{ctx.state.teacher_retries}): "
            + "; ".join(failures[:4]))
    # set the teacher's outputs and their products aside, so all are written again
    # (the probe's rollouts too: the built-in teacher reads every attempt's, see surface_reach)
    set_aside_attempt(d, attempts)
    if attempts >= ctx.state.teacher_retries:
        atomic_write_json(d / ArmFiles.SKIPPED, {"reason": "no dataset passed the gate and the probe",
                                               "failures": failures, "attempts": attempts,
                                               "history": history})
        return "skip"
    return "retry"


# --------------------------------------------------------------------------------------------
# probe: does the dataset carry gradient for the anchor student?

def probe(ctx: Ctx, n: int) -> str:
    """Returns "ok", "retry" or "skip", like `dataset`. The anchor (iter_0's checkpoint) samples
    a group on a sample of the generated rows; without live groups there is nothing to learn."""
    from driver.analysis import diagnose

    d = ctx.iter_dir(n)
    record_path = d / ArmFiles.PROBE_RECORD
    sha = file_sha256(d / ArmFiles.DATASET)
    rec = read_json(record_path) if record_path.exists() else {}
    if rec.get("dataset_sha256") != sha:
        st = ctx.state
        arm = table.iteration(ctx, n)
        # the student samples as this iteration will train
        got = run_probe(ctx, n, arm, train_knobs(ctx, arm), d / ArmFiles.PROBE_ROLLOUTS)
        if got.skipped is not None:
            rec = {"dataset_sha256": sha, "skipped": got.skipped}
        elif got.aborted is not None:
            rec = {"dataset_sha256": sha, "prompts": got.prompts, "k": st.rollouts_per_example,
                   "live_fraction": 0.0, "aborted": got.aborted, "min_live": st.probe_min_live,
                   "passed": False}
        else:
            assert got.rollouts is not None
            diag = diagnose.diagnose(diagnose.read_rows(got.rollouts))
            rec = {"dataset_sha256": sha, "prompts": diag["groups"], "k": st.rollouts_per_example,
                   "live_fraction": diag["live_fraction_outcome"],
                   "live_fraction_reward": diag["live_fraction_reward"],
                   "all_solved": diag["groups_all_pass"], "none_solved": diag["groups_none_pass"],
                   "mean_reward": diag["mean_reward"], "truncation_rate": diag["truncation_rate"],
                   "min_live": st.probe_min_live,
                   "passed": diag["live_fraction_outcome"] >= st.probe_min_live}
        atomic_write_json(record_path, rec)
    if rec.get("aborted"):   # prime-rl found no group to train on: a verdict on the dataset too
        return reject(ctx, n, [f"probe: the dataset carries no gradient for the student: prime-rl's "
                               f"zero-advantage filter aborted its one step ({rec['aborted']}). "
                               "Aim the rows at what the student sometimes solves."])
    if rec.get("skipped") or rec["passed"]:
        if not rec.get("skipped"):
            ctx.say(f"[iter_{n}] probe: live fraction {rec['live_fraction']:.2f} on "
                    f"{rec['prompts']} prompts x {rec['k']}")
        return "ok"
    return reject(ctx, n, [
        f"probe: the dataset carries no gradient for the student: live fraction "
        f"{rec['live_fraction']:.3f} < {rec['min_live']} on {rec['prompts']} prompts x {rec['k']} "
        f"(all solved: {rec['all_solved']}, none solved: {rec['none_solved']}, mean reward "
        f"{rec['mean_reward']:.3f}). Aim the rows at what the student sometimes solves."])


# --------------------------------------------------------------------------------------------
# environment, train, evaluate

def environment(ctx: Ctx, n: int) -> None:
    install_env(ctx, table.iteration(ctx, n))


def train_iteration(ctx: Ctx, n: int) -> None:
    arm = table.iteration(ctx, n)
    cfg = write_config(ctx, arm, ITERATION_PURPOSE, arm.dir / ArmFiles.CONFIG)
    train(ctx, arm, config_files(ctx, cfg), ["--output-dir", str(arm.out)])


def trained(ctx: Ctx, n: int) -> bool:
    """The iteration's arm finished training (a torn or missing eval retires the attempt, or
    its final-weights eval, so the loop sends it back to `train`)."""
    return arm_trained(ctx, table.iteration(ctx, n))


def evaluate_iteration(ctx: Ctx, n: int) -> None:
    arm = table.iteration(ctx, n)
    rows = read_json(arm.dir / ArmFiles.DATASET_RECORD)["rows"]
    summary = eval_arm(ctx, arm, rows=rows)
    metrics = {m["iter"]: m for m in ctx.rd.load_metrics()["iters"]}
    iter0 = metrics.get(0, {}).get("eval_acc")
    prev = next((metrics[k]["eval_acc"] for k in range(n - 1, -1, -1)
                 if k in metrics and metrics[k].get("eval_acc") is not None), None)
    ctx.rd.upsert_metric("iters", "iter", metrics_entry(
        summary, iter=n, delta_vs_prev=None if prev is None else summary["eval_acc"] - prev,
        verdict=evaluation.verdict(summary["eval_acc"], prev, iter0, summary.get("n_eval")), **teacher_usage(ctx, n),
        **probe_figures(ctx, n), **hparams_record(ctx, n)))
    faults.point("evaluate:after-metrics")
    scratchpad.render(ctx)


def hparams_record(ctx: Ctx, n: int) -> dict:
    """{"hparams": {...}} when the teacher set this iteration's hyperparameters."""
    h = hparams.load(ctx.iter_dir(n))
    return {"hparams": h.model_dump(exclude_none=True)} if h is not None else {}


def teacher_usage(ctx: Ctx, n: int) -> dict:
    """{"teacher_usage": {...}} when the teacher spent tokens on this iteration (LLM teacher)."""
    p = ctx.iter_dir(n) / ArmFiles.TEACHER_USAGE
    if not p.exists():
        return {}
    u = read_json(p)
    return {"teacher_usage": {k: u.get(k) for k in ("model", "calls", "input_tokens",
                                                    "output_tokens", "cost_usd")}}


def probe_figures(ctx: Ctx, n: int) -> dict:
    p = ctx.iter_dir(n) / ArmFiles.PROBE_RECORD
    if not p.exists():
        return {}
    return {"probe": {k: v for k, v in read_json(p).items() if k != "dataset_sha256"}}


def skipped_record(ctx: Ctx, m: int) -> dict:
    """A skipped iteration, for the next brief: its attempts, each one's reasons (the gate's
    lines or the probe's verdict) and what it tried, and where its files were set aside."""
    rec = read_json(ctx.iter_dir(m) / ArmFiles.SKIPPED)
    return {"iteration": m, "reason": rec["reason"], "dir": str(ctx.iter_dir(m)),
            "attempts": rec.get("history") or [{"attempt": rec.get("attempts"), "failures": rec["failures"],
                                                "tried": "not recorded"}]}


def record_abort(ctx: Ctx, n: int, e) -> None:
    """prime-rl aborted the iteration's arm on its own rule (its zero-advantage filter found
    no group to train on, mid-arm: the student saturated the rows): the iteration is recorded
    as skipped with prime-rl's reason, and the loop goes on; the attempt is kept aside."""
    d = ctx.iter_dir(n)
    if not (d / ArmFiles.SKIPPED).exists():
        atomic_write_json(d / ArmFiles.SKIPPED, {
            "reason": "prime-rl aborted the arm: its zero-advantage filter left nothing to train on",
            "failures": [f"prime-rl: {e.reason}"], "attempts": 0})
    ctx.say(f"[iter_{n}] {e}; the iteration is recorded as skipped, the attempt kept aside")
    record_skip(ctx, n)


def record_not_launched(ctx: Ctx, n: int, refusal: str) -> None:
    """--max-cost refused a launch of the iteration's (its training, its eval, its probe): the
    iteration is recorded as skipped with the refusal, and the loop ends."""
    d = ctx.iter_dir(n)
    if not (d / ArmFiles.SKIPPED).exists():
        atomic_write_json(d / ArmFiles.SKIPPED, {
            "reason": "not trained or not evaluated: --max-cost refused its launch",
            "failures": [refusal], "attempts": 0})
    record_skip(ctx, n)


def record_skip(ctx: Ctx, n: int) -> None:
    reason = read_json(ctx.iter_dir(n) / ArmFiles.SKIPPED)
    ctx.rd.upsert_metric("iters", "iter", {"iter": n, "skipped": True,
                                           "reason": reason["reason"],
                                           "failures": reason["failures"][:10],
                                           **teacher_usage(ctx, n)})
    scratchpad.render(ctx)
