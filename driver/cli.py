"""`driver`: the command line. Thin: parse flags, then hand over to the phase machine.

Heavy modules are imported only after the flags are parsed, so `driver --help` is instant.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time

from driver import teachers
from driver.gates import rules
from driver.run.defaults import BACKEND_DEFAULTS, BACKENDS, MIN_PROMPTS_PER_STEP, RUN_DEFAULTS

EXIT_CODES = """exit codes:
  0  finished (or, for read commands, success)
  1  failure: the run stopped cleanly and can be resumed once the cause is fixed
  2  usage or bad input: nothing was started or changed
  3  waiting for the teacher: read iter_N/TEACHER.md, write the files, then `driver resume`"""

DIAGNOSE_THRESHOLDS = """verdict: FAIL when any of
  group sizes differ                       (GRPO compares a rollout with its own group)
  live fraction on pass/fail < 0.25        (a group with one outcome has zero advantage)
  effort correlation < -0.2                (effort buys risk: the cheapest policy wins)
  truncation rate > 0.2                    (completions cut off by the token limit)
A rollout passes when reward >= 0.5 (--success-threshold). The raw-reward live fraction counts
groups whose rewards differ by more than 1e-6; with a shaped reward it can be high while the
pass/fail one is low: all-fail groups that only look live."""

def choose_backend(a) -> tuple[str, str | None]:
    """(backend, why the embedded default was chosen) when --backend is not given: prime-rl
    whenever a checkout is named (--prime-rl-dir, PRIME_RL_DIR) or DRIVER_RL_COMMAND stands in
    for it, else the embedded trainer. Naming a checkout is a choice the driver never
    overrides; a missing GPU is then prime-rl's to report."""
    import os

    from driver.backends import RL_COMMAND_VAR

    if os.environ.get(RL_COMMAND_VAR) or a.prime_rl_dir or os.environ.get("PRIME_RL_DIR"):
        return "prime_rl", None
    return "local", "no prime-rl checkout is set"


def _defaults_help(key: str) -> str:
    """A backend-dependent default as the help text shows it (from the run model)."""
    def show(v):
        return _duration(v) if key == "budget_seconds" else v
    return ", ".join(f"{b}: {show(d[key])}" for b, d in BACKEND_DEFAULTS.items())


def _default(field: str):
    """A flag's default as the help text shows it: the run model's own, never a copy."""
    v = RUN_DEFAULTS[field]
    return _duration(v) if field == "stall_timeout_s" else v


def _duration(seconds: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size:g}{unit}"
    return f"{seconds:g}s"


# flags whose name is not the run model's field name with dashes
FIELD_FLAGS = {"budget_seconds": "--budget", "stall_timeout_s": "--stall-timeout"}
_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([hms]?)\s*$")
_UNITS = {"h": 3600, "m": 60, "s": 1, "": 1}


def parse_budget(text: str) -> float:
    m = _BUDGET.match(str(text))
    if not m:
        raise argparse.ArgumentTypeError(f"budget {text!r}: use Nh, Nm or Ns (e.g. 10h, 30m)")
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    if seconds <= 0:
        raise argparse.ArgumentTypeError("budget must be positive")
    return seconds


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} must be at least 1")
    return v


def json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"difficulty\": \"hard\"}'")
    return value


def plain_name(text: str) -> str:
    """Model names and hub ids: printable, one line. They are TOML-encoded, never pasted."""
    if not text or any(ord(c) < 32 or ord(c) == 127 for c in text) or len(text) > 300:
        raise argparse.ArgumentTypeError(
            f"{text!r}: must be one printable line (no newlines or control characters)")
    return text


def _teacher_flags(p, default: str | None) -> None:
    """--teacher and its --llm-* settings, for `run` and for `resume` (which may switch)."""
    p.add_argument("--teacher", default=default, choices=list(teachers.NAMES),
                   help="who writes weakness reports and generators: builtin (no LLM; needs a "
                        "family generator for the env), agent (stops with exit 3 and a "
                        "TEACHER.md brief for a coding agent), llm (an API; see --llm-*) "
                        + ("(default: %(default)s)" if default else
                           "(default: the run's own; the new teacher takes over from the next "
                           "brief it has to write)"))
    p.add_argument("--llm-api", default="openai", choices=["openai", "anthropic"],
                   help="LLM teacher protocol: an OpenAI-compatible /chat/completions endpoint or "
                        "Anthropic's /v1/messages (default: %(default)s)")
    p.add_argument("--llm-base-url", help="LLM teacher endpoint (default: https://api.openai.com/v1 "
                                          "or https://api.anthropic.com)")
    p.add_argument("--llm-model", type=plain_name, help="LLM teacher model name (required with --teacher llm)")
    p.add_argument("--llm-key-env", help="environment variable holding the API key; the key is "
                                         "never written to disk (default: OPENAI_API_KEY or ANTHROPIC_API_KEY)")
    p.add_argument("--llm-max-tokens", default=16000, type=positive_int,
                   help="reply token limit per call (default: %(default)s)")
    p.add_argument("--llm-price-in", type=float, help="USD per million input tokens, for cost in metrics.json")
    p.add_argument("--llm-price-out", type=float, help="USD per million output tokens")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="driver", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Teacher/student self-improvement loop for RL post-training "
                    "(prime-rl + verifiers).", epilog=EXIT_CODES)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("run", help="start a new run", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Create a run directory and drive every phase: introspect, "
                                   "iter_0 baseline, the teacher/student loop, controls, finalize.")
    r.add_argument("--dataset", default="stock_arithmetic", type=plain_name,
                   help="hub env name (a verifiers environment id) (default: %(default)s)")
    r.add_argument("--model", type=plain_name,
                   help="student model, used verbatim in [model] name (default by backend: "
                        f"{_defaults_help('model')})")
    r.add_argument("--budget", type=parse_budget,
                   help="wall-clock cap for the iteration loop: Nh, Nm or Ns; controls run after "
                        f"it on their own time (default by backend: {_defaults_help('budget_seconds')})")
    r.add_argument("--hub-id", type=plain_name, help="Prime hub slug (default: primeintellect/<dataset>)")
    r.add_argument("--max-iters", type=positive_int,
                   help=f"total iterations including iter_0 (default: {_default('max_iters')})")
    r.add_argument("--batch-size", type=positive_int,
                   help="TOTAL rollouts per step, not unique prompts: a multiple of "
                        "--rollouts-per-example giving at least "
                        f"{MIN_PROMPTS_PER_STEP} prompts (default by backend: "
                        f"{_defaults_help('batch_size')})")
    r.add_argument("--rollouts-per-example", type=positive_int,
                   help=f"group size (default by backend: {_defaults_help('rollouts_per_example')})")
    r.add_argument("--steps-per-run", type=positive_int,
                   help="new training steps per arm; max_steps is absolute (default by backend: "
                        f"{_defaults_help('steps_per_run')})")
    r.add_argument("--max-completion-tokens", type=positive_int,
                   help="train and eval completion limit, set explicitly in both (default by "
                        f"backend: {_defaults_help('max_completion_tokens')})")
    r.add_argument("--temperature", type=float,
                   help="train rollout sampling temperature in (0, 2], rendered into every arm's "
                        "[orchestrator.train.sampling] and used by the probe (default by backend: "
                        f"{_defaults_help('temperature')})")
    r.add_argument("--lr", type=float,
                   help="learning rate of every arm in (0, 1), rendered as [trainer.optim] lr (default by "
                        f"backend: {_defaults_help('lr')}; None leaves the trainer's own default)")
    r.add_argument("--difficulty-filter", action="store_true", default=None,
                   help="online difficulty filtering in every arm the driver renders: a group whose "
                        "rollouts all score the same (mean reward 0 or 1) carries no GRPO signal, so "
                        "it leaves the batch and the step is refilled with other prompts. Classic "
                        "prime-rl: [orchestrator.buffer] online_difficulty_filtering = true; current "
                        "prime-rl filters zero-advantage groups by default (filter_zero_advantages). "
                        "A canonical --base-config keeps its own setting for iter_0 (default: off)")
    r.add_argument("--eval-examples", type=positive_int,
                   help=f"hub eval examples per evaluation (default: {_default('eval_examples')})")
    r.add_argument("--init-from", help="a prior run directory to reuse as iter_0 (skips training it)")
    r.add_argument("--backend", choices=list(BACKENDS),
                   help="trainer: prime_rl (uv run rl in a prime-rl checkout) or local "
                        "(the embedded trainer: CPU, or one GPU when present; needs the "
                        "[embedded] extra) (default: prime_rl when a checkout is set with "
                        "--prime-rl-dir or PRIME_RL_DIR, else local)")
    r.add_argument("--prime-rl-dir", help="prime-rl checkout (or set PRIME_RL_DIR)")
    r.add_argument("--base-config", help="canonical iter_0 rl.toml (default: the prime-rl checkout's "
                                         "configs/<env>/rl.toml when there is one, else rendered "
                                         "from templates)")
    r.add_argument("--env-args", type=json_object, default={},
                   help="JSON object of load_environment arguments for the hub env; every hub "
                        "env block (iter_0's train env, every eval, run B's real data) gets them "
                        "(default: {})")
    _teacher_flags(r, default=RUN_DEFAULTS["teacher"])
    r.add_argument("--teacher-retries", type=positive_int,
                   help="gate failures before an iteration is skipped (default: "
                        f"{_default('teacher_retries')})")
    r.add_argument("--stall-timeout", type=parse_budget,
                   help="a trainer that writes no new train step or eval row for this long is "
                        "stopped and the arm marked failed; `driver resume` retrains it. Allow "
                        f"for model loading and the final eval (default: {_default('stall_timeout_s')})")
    r.add_argument("--probe-prompts", type=int,
                   help="pre-training gradient probe: the anchor student samples a group on this "
                        f"many generated rows; 0 turns it off (default: {_default('probe_prompts')})")
    r.add_argument("--probe-min-live", type=float,
                   help="a dataset whose probe has fewer live groups (outcome varies) than this "
                        f"fraction goes back to the teacher, in [0, 1] (default: {_default('probe_min_live')})")
    r.add_argument("--runs-dir", default="runs", help="where run directories go (default: %(default)s)")
    r.add_argument("--seed", type=int, help=f"seed for every random choice (default: {_default('seed')})")

    s = sub.add_parser("resume", help="continue a run directory where it stopped", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("run_dir")
    _teacher_flags(s, default=None)

    st = sub.add_parser("status", help="where a run is: phase, iteration, budget, accuracies",
                        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    st.add_argument("run_dir")
    st.add_argument("--json", action="store_true", help="machine-readable output")

    cw = sub.add_parser(
        "compact-warning", help="record in run.json that a context compaction lost something",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="For a coding agent acting as teacher: when compacting its context failed "
                    "or dropped something it needed, it records one line here (stamped with the "
                    "time and iteration) so the report and `driver status` show it. Run it while "
                    "no driver is running on RUN_DIR (between `driver run`/`resume` calls).")
    cw.add_argument("run_dir")
    cw.add_argument("message", help="what was lost or could not be compacted")
    cw.add_argument("--json", action="store_true")

    i = sub.add_parser("introspect", help="describe a hub env's stack (writes nothing)",
                       epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("env")
    i.add_argument("--python", help="interpreter that loads the env (default: this one)")
    i.add_argument("--env-args", type=json_object, default={},
                   help="JSON object of load_environment arguments (default: {})")
    i.add_argument("--json", action="store_true", help="print hub_env.json's content")

    v = sub.add_parser("validate", help="run the dataset gate; exit 0 only if every line is True",
                       epilog="row schema (one JSON object per line):\n" + rules.schema_markdown()
                       + "\n\ngate lines (each must be True):\n" + rules.lines_markdown()
                       + "\n\n" + EXIT_CODES,
                       description="Every line of the gate, True or False; a False line names "
                                   "the field it read, every failing bucket and up to five row "
                                   "line numbers. Inside a run directory (or with --env) the "
                                   "hub env's rubric scores each row's info.reasoning and the "
                                   "eval split's fingerprints are compared.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("dataset")
    v.add_argument("--weakness", required=True, help="the iteration's weakness.json")
    v.add_argument("--prior", action="append", default=[], help="a prior iteration's dataset (repeatable)")
    v.add_argument("--env", help="hub env id whose rubric scores each row's reasoning and whose "
                                 "eval split the rows are blindly decontaminated against (default: "
                                 "the run directory's hub env when DATASET is inside one)")
    v.add_argument("--json", action="store_true")

    rp = sub.add_parser("report", help="write report.md and PNG plots for a run directory",
                        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="report.md (the summary table with intervals and paired tests, "
                                    "per-population lifts, per-iteration notes), eval_accuracy.png "
                                    "and train_reward.png, from numeric records only.")
    rp.add_argument("run_dir")
    rp.add_argument("--json", action="store_true", help="print the paths written as JSON")

    dg = sub.add_parser(
        "diagnose", help="does a graded rollout file carry GRPO gradient? (PASS/FAIL)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Group rows by example_id and report: group uniformity (the group-size "
                    "histogram), the live fraction (groups whose outcome varies; on pass/fail and "
                    "on the raw reward), the effort correlation (Pearson of reward with tool calls, "
                    "else with completion length), mean reward and truncation rate.",
        epilog=DIAGNOSE_THRESHOLDS + "\n\n" + EXIT_CODES)
    dg.add_argument("rollouts", help="a JSONL file of graded rollouts (classic prime-rl rows)")
    dg.add_argument("--success-threshold", type=float, default=None,
                    help="reward at or above which a rollout passes (default: 0.5)")
    dg.add_argument("--json", action="store_true")

    ex = sub.add_parser(
        "export-prompts", help="rollouts -> a verifiers dataset of prompts (one phrasing per situation)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXIT_CODES,
        description="Write prompts in the shape verifiers reads (prompt or question, optional "
                    "answer, info with the ground truth). The other rollouts of a prompt collapse "
                    "into it; a situation (info.situation_id or info.situation) keeps one "
                    "phrasing; rows whose prompt is the spec's own situation text (seed probes) "
                    "are dropped.")
    ex.add_argument("rollouts")
    ex.add_argument("-o", "--output", required=True, help="output JSONL")
    ex.add_argument("--keep-seeds", action="store_true", help="keep seed probes")
    ex.add_argument("--keep-phrasings", action="store_true", help="keep every phrasing of a situation")
    ex.add_argument("--spec", help="spec JSON whose `situations` are the seed texts "
                                   "(default: spec.json beside ROLLOUTS, when there is one)")
    ex.add_argument("--json", action="store_true")

    sk = sub.add_parser("skill", help="the agent skill (SKILL.md)", epilog=EXIT_CODES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sk_sub = sk.add_subparsers(dest="skill_command", required=True, metavar="ACTION")
    si = sk_sub.add_parser("install", help="copy SKILL.md where a coding agent looks for skills",
                           epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    si.add_argument("--dir", default=".claude/skills/synthetic-self-improve-rl",
                    help="destination directory (default: %(default)s, under the current directory)")
    si.add_argument("--force", action="store_true",
                    help="replace a different SKILL.md already there (the old one is kept as SKILL.md.bak)")
    si.add_argument("--json", action="store_true")
    return p


# --------------------------------------------------------------------------------------------

def cmd_run(a) -> int:
    import hashlib
    from pathlib import Path

    from driver import loop
    from driver.backends import resolve
    from driver.context import Ctx
    from pydantic import ValidationError

    from driver.run.model import RunState, validation_message
    from driver.run.rundir import RunDir, RunLock

    why_local = None
    if a.backend is None:
        a.backend, why_local = choose_backend(a)
    if a.init_from:
        from driver import dialects
        from driver.phases.setup import init_from_problems

        if not Path(a.init_from).is_dir():
            raise _usage(f"--init-from {a.init_from} is not a directory")
        _, missing = init_from_problems(dialects.get("classic"), Path(a.init_from))
        if missing:   # before anything is created: iter_0 would be reused without these
            raise _usage(f"--init-from {a.init_from} is missing: " + ", ".join(missing[:6])
                         + (f" (and {len(missing) - 6} more)" if len(missing) > 6 else ""))
    try:   # the run model fills the backend's defaults and checks every knob, once
        state = RunState.create(
            a.backend, dataset=a.dataset, hub_id=a.hub_id or f"primeintellect/{a.dataset}",
            model=a.model, start_ts=time.time(), budget_seconds=a.budget, max_iters=a.max_iters,
            batch_size=a.batch_size, rollouts_per_example=a.rollouts_per_example,
            steps_per_run=a.steps_per_run, eval_examples=a.eval_examples,
            max_completion_tokens=a.max_completion_tokens, temperature=a.temperature, lr=a.lr,
            difficulty_filter=a.difficulty_filter,
            init_from=str(Path(a.init_from).resolve()) if a.init_from else None,
            teacher=a.teacher, seed=a.seed, prime_rl_dir=a.prime_rl_dir, env_args=a.env_args,
            teacher_retries=a.teacher_retries, llm=_llm_config(a),
            probe_prompts=a.probe_prompts, probe_min_live=a.probe_min_live,
            stall_timeout_s=a.stall_timeout)
    except ValidationError as e:
        raise _usage(validation_message(e, FIELD_FLAGS)) from None
    backend = resolve(a.backend, a.prime_rl_dir)  # refuse before creating anything
    if a.init_from and backend.dialect != "classic":
        raise _usage(f"--init-from reads a classic run's layout (weights/, run_default/); prime-rl "
                     f"{backend.prime_rl_version} writes the {backend.dialect} layout, so a prior "
                     "run cannot be reused there yet. Start without --init-from.")
    if not a.base_config:
        a.base_config = canonical_config(a.prime_rl_dir, a.dataset)
        if a.base_config:
            print(f"canonical config: {a.base_config} (iter_0 trains on it; run B copies its "
                  "train env; pass --base-config to choose another)", flush=True)
    if a.base_config:
        _check_base_config(Path(a.base_config))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    root = Path(a.runs_dir)
    path = root / f"{a.dataset.replace('/', '_')}-{stamp}"
    k = 2
    while path.exists():
        path = root / f"{a.dataset.replace('/', '_')}-{stamp}-{k}"
        k += 1
    path.mkdir(parents=True)
    rd = RunDir(path)
    state.env_tag = hashlib.sha256(str(rd.path).encode()).hexdigest()[:6]
    state.base_config = str(Path(a.base_config).resolve()) if a.base_config else None
    state.trainer_stand_in = backend.stand_in
    state.dialect = backend.dialect
    state.prime_rl_version, state.prime_rl_version_source = backend.prime_rl_version, backend.version_source
    with RunLock(rd.path):
        if why_local:
            print(f"using the embedded default ({why_local}): the {a.dataset} env, the embedded "
                  f"trainer, the {state.model} student, the {state.teacher} teacher, a "
                  f"{state.budget_seconds / 60:g}-minute "
                  "loop budget. Pass --backend prime_rl --prime-rl-dir DIR for the real trainer.",
                  flush=True)
        print(f"run directory: {rd.path}", flush=True)
        rd.save(state)
        version = (f", prime-rl {backend.prime_rl_version} from {backend.version_source}"
                   if backend.prime_rl_version else "")
        print(f"backend: {backend.name} ({' '.join(backend.command)}); dialect: {backend.dialect}"
              f"{version}; teacher: {a.teacher}", file=sys.stderr, flush=True)
        if backend.stand_in:
            print(f"trainer: a stand-in ({backend.stand_in}, from DRIVER_RL_COMMAND), not prime-rl; "
                  f"the {state.model} name is only passed to it", file=sys.stderr, flush=True)
        return loop.run(Ctx.open(rd, state))


def cmd_resume(a) -> int:
    from driver import loop
    from driver.context import Ctx
    from driver.run.rundir import RunDir, RunLock

    rd = RunDir(a.run_dir)
    rd.load()  # a bad run.json or metrics.json is reported before anything else happens
    rd.load_metrics()
    with RunLock(rd.path):
        state = rd.load()  # re-read under the lock
        if a.teacher and (a.teacher != state.teacher or a.teacher == "llm"):
            llm = _llm_config(a)
            if rd.hub_env_json.exists():   # refuse a teacher that cannot teach here, first
                from driver.run.files import read_json

                teachers.preflight(state.model_copy(update={"teacher": a.teacher, "llm": llm}),
                                       read_json(rd.hub_env_json))
            print(f"teacher: {state.teacher} -> {a.teacher}", file=sys.stderr, flush=True)
            state.teacher, state.llm = a.teacher, llm
            rd.save(state)
        print(f"resuming {rd.path} at phase {state.phase} (iteration {state.iteration})",
              file=sys.stderr, flush=True)
        return loop.run(Ctx.open(rd, state))


def status_payload(run_dir: str) -> dict:
    from driver.run.rundir import RunDir

    rd = RunDir(run_dir)
    st = rd.load()
    m = rd.load_metrics()
    elapsed = (st.end_ts or time.time()) - st.start_ts
    train = None
    tp = st.trainer
    if tp is not None and tp.final_step is not None:   # the arm being trained: steps on disk
        from pathlib import Path

        from driver import dialects
        from driver.reporting import progress

        out = Path(tp.output_dir)
        train = {"arm": out.parent.name, **progress.training(
            dialects.get(st.dialect), out, tp.start_step, tp.final_step, tp.launched_ts)}
    latest = next((i for i in sorted(m["iters"], key=lambda r: -r["iter"])
                   if i.get("eval_acc") is not None), None)
    return {
        "run_dir": str(rd.path), "status": st.status, "phase": st.phase, "iteration": st.iteration,
        "training": train,
        "latest_eval": None if latest is None else {"arm": f"iter_{latest['iter']}",
                                                     "eval_acc": latest["eval_acc"]},
        "elapsed_s": round(elapsed, 1), "budget_s": st.budget_seconds,
        "max_iters": st.max_iters, "reason": st.reason,
        "trainer_pid": st.trainer.pid if st.trainer else None,
        "eval_acc": {f"iter_{i['iter']}": i.get("eval_acc") for i in m["iters"]},
        "controls": {c["run"]: c.get("eval_acc") for c in m["controls"]},
        "phase4_errors": st.phase4_errors,
        "compact_warnings": st.compact_warnings,
        "trainer_stand_in": st.trainer_stand_in,
    }


def cmd_status(a) -> int:
    p = status_payload(a.run_dir)
    if a.json:
        print(json.dumps(p, indent=2))
        return 0
    from driver.reporting import progress

    print(f"{p['run_dir']}\n  status {p['status']} · phase {p['phase']} · iteration {p['iteration']}"
          f"\n  elapsed {progress.duration(p['elapsed_s'])} of {progress.duration(p['budget_s'])} "
          f"budget {progress.bar(min(1.0, p['elapsed_s'] / p['budget_s']), 10)}")
    if p["trainer_stand_in"]:
        print(f"  trainer: stand-in {p['trainer_stand_in']} (not prime-rl)")
    if p["training"]:
        print("  training " + progress.line(p["training"]["arm"], p["training"]))
    if p["latest_eval"]:
        print(f"  latest eval: {p['latest_eval']['arm']} {p['latest_eval']['eval_acc']:.4f}")
    if p["reason"]:
        print(f"  reason: {p['reason']}")
    for k, v in list(p["eval_acc"].items()) + list(p["controls"].items()):
        print(f"  {k:<8} eval_acc {'skipped' if v is None else f'{v:.4f}'}")
    return 0


def cmd_introspect(a) -> int:
    from driver.envs import hub as envs

    info = envs.introspect(a.python or sys.executable, a.env, a.env_args)
    if a.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"{a.env}: {info['env_class']} · parser {info['parser_class']} · rubric "
              f"{info['rubric_class']}\n  rewards: " +
              ", ".join(f"{f['name']}×{f['weight']}" for f in info["rubric_funcs"]) +
              f"\n  train {info['train_size']} rows · eval {info['eval_size']} rows\n"
              f"  answer format: {info['answer_format_instruction']}\n"
              f"  info keys the rubric reads: {', '.join(info.get('info_keys_read') or []) or 'none found'}")
    return 0


def cmd_validate(a) -> int:
    from pathlib import Path

    from driver.gates import accuracy, decontam
    from driver.gates import dataset as gate
    from driver.gates import weakness as weakness_gate
    from driver.run.files import read_json

    for f in [a.dataset, a.weakness, *a.prior]:
        if not Path(f).exists():
            raise _usage(f"{f} does not exist")
    fingerprints = scored = None
    run_dir = Path(a.dataset).resolve().parent.parent
    try:
        if a.env:
            fingerprints = decontam.eval_fingerprints(sys.executable, a.env)
            scored = accuracy.score_rows(sys.executable, a.env, None, Path(a.dataset))
        elif (run_dir / "hub_env.json").exists():
            hub = read_json(run_dir / "hub_env.json")
            python = _run_python(run_dir)
            fingerprints = decontam.cached_fingerprints(run_dir, python, hub)
            scored = accuracy.score_hub_rows(python, hub, Path(a.dataset))   # classic or taskset
    except RuntimeError as e:
        raise _usage(str(e)) from None
    report = gate.check(Path(a.dataset), weakness_gate.load(a.weakness), [Path(p) for p in a.prior],
                        fingerprints, scored)
    print(json.dumps(report.to_json(), indent=2) if a.json else report.render())
    return 0 if report.passed else 1


def cmd_skill(a) -> int:
    import shutil
    from pathlib import Path

    from driver import resources

    src = resources.skill_md()
    dest = Path(a.dir) / "SKILL.md"
    text = src.read_text(encoding="utf-8")
    if dest.exists() and dest.read_text(encoding="utf-8") != text:
        if not a.force:
            raise _usage(f"{dest} exists and differs from this driver's SKILL.md; pass --force "
                         "to replace it (the old file is kept as SKILL.md.bak)")
        shutil.copyfile(dest, dest.with_name("SKILL.md.bak"))
        action = "replaced"
    else:
        action = "unchanged" if dest.exists() else "installed"
    dest.parent.mkdir(parents=True, exist_ok=True)
    if action != "unchanged":
        tmp = dest.with_name("SKILL.md.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(dest)
    if a.json:
        print(json.dumps({"path": str(dest.resolve()), "action": action}))
    else:
        print(f"{action}: {dest.resolve()}")
    return 0


def cmd_report(a) -> int:
    from driver import dialects
    from driver.reporting import report
    from driver.context import Ctx
    from driver.run.rundir import RunDir

    rd = RunDir(a.run_dir)
    state = rd.load()
    rd.load_metrics()
    # a report reads records only: no backend (prime-rl checkout, torch) is needed
    path = report.write(Ctx(rd=rd, state=state, backend=None, dialect=dialects.get(state.dialect),
                            quiet=True))
    files = [str(path), str(rd.path / "eval_accuracy.png"), str(rd.path / "train_reward.png")]
    print(json.dumps({"written": files}) if a.json else "wrote " + "\n      ".join(files))
    return 0


def cmd_diagnose(a) -> int:
    from pathlib import Path

    from driver.analysis import diagnose

    if not Path(a.rollouts).is_file():
        raise _usage(f"{a.rollouts} is not a file")
    try:
        rows = diagnose.read_rows(Path(a.rollouts))
        kw = {} if a.success_threshold is None else {"success_threshold": a.success_threshold}
        d = diagnose.diagnose(rows, **kw)
    except ValueError as e:
        raise _usage(str(e)) from None
    print(json.dumps(d, indent=2) if a.json else diagnose.render(d))
    return 0 if d["verdict"] == "PASS" else 1


def cmd_export_prompts(a) -> int:
    from pathlib import Path

    from driver.analysis import diagnose
    from driver.analysis import export_prompts
    from driver.run.files import atomic_write_text

    src = Path(a.rollouts)
    if not src.is_file():
        raise _usage(f"{a.rollouts} is not a file")
    spec = Path(a.spec) if a.spec else src.parent / "spec.json"
    if a.spec and not spec.is_file():
        raise _usage(f"--spec {a.spec} is not a file")
    try:
        seeds = export_prompts.spec_situations(spec) if spec.is_file() else set()
        rows = diagnose.read_rows(src)
    except ValueError as e:
        raise _usage(str(e)) from None
    kept, counts = export_prompts.export(rows, seeds, a.keep_seeds, a.keep_phrasings)
    atomic_write_text(Path(a.output), "".join(json.dumps(r) + "\n" for r in kept))
    counts["output"] = str(Path(a.output).resolve())
    counts["spec"] = str(spec) if spec.is_file() else None
    if a.json:
        print(json.dumps(counts))
    else:
        print(f"{counts['prompts']} prompts -> {counts['kept']} kept; dropped "
              f"{counts['dropped_seed']} as seed probes, {counts['dropped_duplicate_phrasing']} as "
              f"duplicate phrasings\nwrote {counts['output']}")
    return 0


def canonical_config(prime_rl_dir: str | None, dataset: str) -> str | None:
    """The prime-rl checkout's configs/<env>/rl.toml (the procedure's iter_0 config), if any."""
    import os
    from pathlib import Path

    root = prime_rl_dir or os.environ.get("PRIME_RL_DIR")
    if not root:
        return None
    name = dataset.split("/")[-1]
    for d in dict.fromkeys([name, name.replace("-", "_"), name.replace("_", "-")]):
        p = Path(root).expanduser() / "configs" / d / "rl.toml"
        if p.is_file():
            return str(p.resolve())
    return None


def _check_base_config(path) -> None:
    """Refuse, before anything is created, a base config prime-rl would reject on its own:
    unreadable TOML, unknown keys, bad batch arithmetic, no train env. The launch checks the
    full composition (with the eval overlay and flags) again before iter_0 trains."""
    from driver import dialects
    from rl_contract import composition
    from driver.errors import DriverError

    try:
        dialects.get("classic").check_effective(composition.compose(["@", str(path)]))
    except (composition.CompositionError, DriverError) as e:
        raise _usage(f"base config {path} does not compose: {e}") from None


def _llm_config(a):
    """The LLM teacher's settings from --llm-* (None unless --teacher llm)."""
    if a.teacher != "llm":
        return None
    from driver.run.model import LLMConfig
    from driver.teachers.llm import DEFAULT_BASE_URL, DEFAULT_KEY_ENV

    if not a.llm_model:
        raise _usage("--teacher llm needs --llm-model (and --llm-base-url for a non-default endpoint)")
    return LLMConfig(api=a.llm_api, base_url=a.llm_base_url or DEFAULT_BASE_URL[a.llm_api],
                     model=a.llm_model, key_env=a.llm_key_env or DEFAULT_KEY_ENV[a.llm_api],
                     max_tokens=a.llm_max_tokens, price_in=a.llm_price_in, price_out=a.llm_price_out)


def _run_python(run_dir) -> str:
    """The interpreter that loads the run's environments (its backend's), for `validate` inside
    a run directory; this one where the backend cannot be resolved here."""
    from driver.backends import resolve
    from driver.errors import DriverError
    from driver.run.rundir import RunDir

    try:
        st = RunDir(run_dir).load()
        return resolve(st.backend, st.prime_rl_dir).python
    except (DriverError, OSError, ValueError):
        return sys.executable


def _usage(msg: str):
    from driver.errors import UsageError

    return UsageError(msg)


def cmd_compact_warning(a) -> int:
    from datetime import datetime, timezone

    from driver.run.rundir import RunDir, RunLock

    rd = RunDir(a.run_dir)
    rd.load()
    with RunLock(rd.path):   # a driver running on this directory refuses it (exit 2)
        state = rd.load()
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        state.compact_warnings.append(f"{stamp} iteration {state.iteration}: {a.message}")
        rd.save(state)
    n = len(state.compact_warnings)
    print(json.dumps({"compact_warnings": n}) if a.json else f"recorded ({n} in run.json)")
    return 0


COMMANDS = {"run": cmd_run, "resume": cmd_resume, "status": cmd_status,
            "compact-warning": cmd_compact_warning,
            "introspect": cmd_introspect, "validate": cmd_validate, "skill": cmd_skill,
            "diagnose": cmd_diagnose, "report": cmd_report, "export-prompts": cmd_export_prompts}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from driver.errors import DriverError

    try:
        return COMMANDS[args.command](args)
    except DriverError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        # outside the phase loop (which records these itself): e.g. a full disk at creation
        from driver.errors import os_error_advice

        print(f"error: {e}. {os_error_advice(e)} `driver resume` the run directory printed "
              "above.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: the run directory is consistent; `driver resume` continues it",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
