"""Training an arm: launch once, re-attach to a live trainer, poll on file and process signals,
and (where the dialect's run never measures its final weights) the final-weights eval.

Each step is re-entrant: a finished training is never relaunched; a running one is re-attached,
never launched twice.
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from driver import faults
from driver.arms.arm import Arm, config_files, eval_knobs, expected_eval_rows
from driver.backends import process as training
from driver.backends.base import Command
from driver.context import Ctx
from driver.envs import hub as envs
from driver.errors import DriverError
from driver.arms import progress
from driver.run.files import atomic_write_json, atomic_write_text
from driver.run.model import Knobs
from driver.run.rundir import now
from rl_contract import composition

PROGRESS_EVERY_S = 15.0   # plain progress lines when stderr is not a terminal


def prestage(ctx: Ctx, arm: Arm) -> None:
    """Copy iter_0's four checkpoint trees for step F into this arm's output dir."""
    f = arm.resume_step
    src = ctx.iter_dir(0) / "prime_out"
    trees = ctx.dialect.checkpoint_trees(src, f)
    missing = [str(t) for t in trees if not t.exists()]
    if missing:
        raise DriverError(f"cannot resume {arm.name} from iter_0 step {f}: missing checkpoint "
                          f"tree(s) {', '.join(missing)}. iter_0 must save a checkpoint at its "
                          "final step; rerun iter_0 (delete iter_0/ and resume).")
    for s, d in zip(trees, ctx.dialect.checkpoint_trees(arm.out, f)):
        if d.exists():
            continue
        d.parent.mkdir(parents=True, exist_ok=True)
        tmp = d.with_name(d.name + ".staging")
        if tmp.exists():
            shutil.rmtree(tmp)
        shutil.copytree(s.resolve(), tmp, symlinks=False)
        tmp.rename(d)  # a tree is either fully staged or absent


def preflight(ctx: Ctx, arm: Arm, args: list[str]) -> None:
    """Refuse a launch that would fail or mislead, before it costs GPU time: the launch's
    effective config (files + flags, composed as prime-rl composes them) must pass the
    dialect's checks, its envs must be installed, and its output dir must hold nothing but
    the pre-staged resume step."""
    try:
        cfg = composition.compose(args)
    except composition.CompositionError as e:
        raise DriverError(f"[{arm.name}] {e}") from None
    try:
        ctx.dialect.check_effective(cfg, expect_resume=arm.resume_step)
    except DriverError as e:
        raise DriverError(f"[{arm.name}] refusing to launch: {e}") from None
    ids = ctx.dialect.env_ids(cfg)
    if not ids:
        raise DriverError(f"[{arm.name}] refusing to launch: no train or eval env in the config")
    missing = envs.missing_envs(ctx.trainer.python, ids)
    if missing:
        raise DriverError(
            f"[{arm.name}] refusing to launch: env(s) {', '.join(missing)} not installed for "
            f"{ctx.trainer.python}. Install them (`prime env install ID`, or `pip install` the "
            f"package into that interpreter), then `driver resume {ctx.rd.path}`.")
    foreign = ctx.dialect.foreign_run(arm.out, arm.resume_step)
    if foreign:
        raise DriverError(
            f"[{arm.name}] refusing to launch: {arm.out} already holds another run "
            f"({', '.join(foreign[:3])}{' …' if len(foreign) > 3 else ''}). Move it away, then "
            f"`driver resume {ctx.rd.path}`.")


def set_aside(path: Path) -> None:
    """Keep a failed attempt's files next to the new ones instead of deleting them."""
    if path.exists():
        k = 1
        while path.with_name(f"{path.name}.failed-{k}").exists():
            k += 1
        path.rename(path.with_name(f"{path.name}.failed-{k}"))


def train(ctx: Ctx, arm: Arm, config_paths: list[Path], overrides: list[str]) -> None:
    """Launch (once) and poll until the trainer ends. Re-attaches to a live trainer. Where the
    trainer never evaluates its final weights (the current generation), the final-weights eval
    is a second launch (final_eval) and the arm is trained when both have finished."""
    st = ctx.state
    final = arm.final_step(st.steps_per_run)
    done_marker = arm.dir / "train_done.json"
    separate_eval = ctx.dialect.separate_final_eval
    if not done_marker.exists():
        eval_file = ctx.dialect.eval_file(arm.out, final)
        expected = 0 if separate_eval else expected_eval_rows(ctx, arm)

        def prepare() -> list[str]:
            if arm.log.exists():  # an earlier attempt ended badly: keep it aside, start clean
                retire_failed(arm)
            if arm.resume_step is not None and not ctx.dialect.forks_checkpoints:
                prestage(ctx, arm)
            args = []
            for p in config_paths:
                args += ["@", str(p)]
            args += overrides
            preflight(ctx, arm, args)
            # the run's --seed reaches the trainer's sampling too (a flag after the checks)
            return args + ctx.trainer.seed_args(st.seed)

        res = _launch_and_wait(ctx, arm.name, ctx.trainer.trainer(), prepare, arm.out, arm.log, eval_file,
                               expected, arm.resume_step or 0, final, "trainer")
        if res.outcome != "done":
            _raise_failed(ctx, arm.name, "training", res, arm.log, "retrains this arm (the failed "
                          "attempt's files are kept beside the new ones)")
        missing = [str(p.relative_to(ctx.rd.path)) for p in ctx.dialect.checkpoint_trees(arm.out, final)
                   if not p.exists()]
        if missing:
            ctx.trainer_done(f"{arm.name}: the trainer finished without its final checkpoint")
            retire_failed(arm)
            raise DriverError(f"[{arm.name}] the trainer exited 0 but its final checkpoint is missing "
                              f"({', '.join(missing)}); every later arm resumes from it. Check the "
                              f"output disk, then `driver resume {ctx.rd.path}` retrains this arm.")
        atomic_write_json(done_marker, {"final_step": final, "eval_rows": res.eval_rows,
                                        "end_ts": now()})
        ctx.trainer_done()
    if separate_eval:
        final_eval(ctx, arm, final)


def trained(ctx: Ctx, arm: Arm) -> bool:
    """The arm finished training, and where the final-weights eval is a launch of its own, that
    launch finished with a complete eval file (a torn one is set aside by evaluate)."""
    if not (arm.dir / "train_done.json").exists():
        return False
    if not ctx.dialect.separate_final_eval:
        return True
    final = arm.final_step(ctx.state.steps_per_run)
    return (ctx.trainer.runner().exit_status(arm.dir / "final_eval.log") == 0 and
            training.count_lines(ctx.dialect.eval_file(arm.out, final)) >= expected_eval_rows(ctx, arm))


def final_eval(ctx: Ctx, arm: Arm, final: int) -> None:
    """Evaluate the arm's final weights (the current generation's run never does) with the
    backend's final_eval command on a rendered `evals` config; re-entrant like train."""
    out = ctx.dialect.final_eval_dir(arm.out, final)
    eval_file = ctx.dialect.eval_file(arm.out, final)
    expected = expected_eval_rows(ctx, arm)
    log = arm.dir / "final_eval.log"
    cfg = arm.dir / "evals.toml"

    def prepare() -> list[str]:
        for path in (out, log, training.rc_path(log)):
            set_aside(path)
        weights = ctx.dialect.weights_dir(arm.out, final)
        if not weights.is_dir():
            raise DriverError(f"[{arm.name}] no final weights at {weights}: the arm's run must "
                              "broadcast its weights to the filesystem. Retrain it: remove "
                              f"{arm.dir / 'train_done.json'} and `driver resume {ctx.rd.path}`.")
        text = ctx.dialect.render_final_eval(ctx.hub, eval_knobs(ctx, arm), weights, out)
        ctx.dialect.check_final_eval(text)
        atomic_write_text(cfg, text)
        # the student's tokenizer rides along: a broadcast may hold weights without one
        return ["--tokenizer", ctx.state.model, "@", str(cfg), "--output-dir", str(out)]

    evaluator = ctx.trainer.final_evaluator()
    if evaluator is None:
        raise DriverError(f"[{arm.name}] the {ctx.trainer.name} backend has no command that "
                          "evaluates final weights, which this dialect needs")
    res = _launch_and_wait(ctx, f"{arm.name} final eval", evaluator, prepare, out, log, eval_file,
                           expected, final, final, "final-weights eval")
    if res.outcome != "done":
        _raise_failed(ctx, f"{arm.name} final eval", "evaluation", res, log,
                      "evaluates the final weights again")
    ctx.trainer_done()


def _launch_and_wait(ctx: Ctx, label: str, command: Command, prepare, out: Path, log: Path,
                     eval_file: Path, expected: int, start: int, final: int,
                     what: str, point: str = "train") -> training.PollResult:
    """Launch (once, with prepare()'s arguments) or re-attach, then poll until the process ends:
    done needs exit status 0 and `expected` rows in eval_file."""
    st = ctx.state
    runner = ctx.trainer.runner()
    steps = {"start_step": start, "final_step": final}
    tp = runner.find(st.trainer, out)
    if tp is None:
        if runner.exit_status(log) == 0 and training.count_lines(eval_file) >= expected:
            return training.PollResult("done", 0, training.count_lines(eval_file))
        args = prepare()
        faults.point(f"{point}:before-launch")
        tp = runner.launch(command, args, out, log).model_copy(update=steps)
        ctx.trainer_running(tp)
        ctx.say(f"[{label}] {what} launched ({tp.handle}); log: {log}")
        faults.point(f"{point}:after-launch")
    else:
        tp = tp.model_copy(update=steps)   # an orphan found by its command line has no steps
        ctx.trainer_running(tp)
        ctx.say(f"[{label}] re-attached to running {what} ({tp.handle}); not relaunching")

    last_shown = [0.0]
    tty = sys.stderr.isatty()
    run_out = out if start < final else None    # a final eval has no train steps to show

    # before the first train step: the built-in student's build, each new line of it
    build_shown: list[str | None] = [None]
    building = [run_out is not None]

    def tick(rows):
        faults.point("train:poll")
        t = time.monotonic()
        if building[0] and not ctx.quiet:
            if progress.training(ctx.dialect, out, tp.start_step, final, None)["step"] > tp.start_step:
                building[0] = False
            else:
                build = progress.student_build(out)
                if build and build != build_shown[0]:
                    build_shown[0], last_shown[0] = build, t
                    text = f"[{label}] {build}"
                    print(("\r" + text + "   ") if tty else text, end="" if tty else "\n",
                          file=sys.stderr, flush=True)
                    return
        if t - last_shown[0] >= (1.0 if tty else PROGRESS_EVERY_S) and not ctx.quiet:
            last_shown[0] = t
            if run_out is None and not rows:
                return   # a final eval shows only its rows
            text = (progress.line(label, progress.training(ctx.dialect, run_out, tp.start_step, final,
                                                           tp.launched_ts))
                    if run_out is not None else f"[{label}]")
            text += f" · eval rows {rows}/{expected}" if rows else ""
            # a terminal gets one line updated in place; a pipe or file gets plain lines
            print(("\r" + text + "   ") if tty else text, end="" if tty else "\n",
                  file=sys.stderr, flush=True)

    rollouts = ctx.dialect.rollouts_dir(out)
    limits = training.Limits(st.startup_timeout_s, st.stall_timeout_s, st.eval_timeout_s)
    res = runner.poll(tp, log, eval_file, expected, limits=limits, steps=final - start,
                      progress=lambda: sum(1 for s in ctx.dialect.steps(rollouts) if s > start),
                      interval=ctx.poll_interval, on_tick=tick)
    if tty and not ctx.quiet:
        print(file=sys.stderr)
    if res.outcome in ("stalled", "timeout"):
        # a silent or overlong trainer is ours to stop, and is gone before anything else is
        # launched (it is never relaunched while alive, nor left running); resume retrains
        runner.stop(tp)
        res = training.PollResult("failed", None, res.eval_rows,
                                  f"{res.detail}; the {what} ({tp.handle}) was stopped")
    return res


def _raise_failed(ctx: Ctx, label: str, noun: str, res: training.PollResult, log: Path,
                  then: str) -> None:
    tail = training.log_tail(log)
    ctx.trainer_done(f"{label} failed: {res.detail}")
    raise DriverError(f"[{label}] {noun} failed: {res.detail}. Log tail:\n{tail}\n"
                      f"Fix the cause, then `driver resume {ctx.rd.path}` {then}.")


def retire_failed(arm: Arm) -> None:
    for p in (arm.out, arm.log, training.rc_path(arm.log)):
        set_aside(p)


def probe_launch(ctx: Ctx, arm: Arm, knobs: Knobs, prompts: int) -> list[dict]:
    """The gradient probe as one step of the backend's own trainer: from the arm's start
    (iter_0's checkpoint), on the arm's generated env, `prompts` x group-size rollouts, no eval.
    That step's train rollouts were sampled by the anchor student: they are the probe's. Its
    weight update is thrown away with its output (only the rows are kept), so it costs a
    trainer start-up and one step (about 5% of a 100-step arm on a GPU node)."""
    d = arm.dir / "probe"
    probe = Arm(f"{arm.name} probe", d, resume_step=arm.resume_step, package=arm.package,
                dataset=arm.dataset)
    start = arm.resume_step or 0
    rows_path = d / "train_rollouts.jsonl"
    if not rows_path.exists():
        one_step = knobs.model_copy(update={"batch_size": prompts * knobs.rollouts_per_example,
                                            "steps_per_run": 1})
        cfg = d / "rl.toml"
        text = ctx.dialect.render_run(
            arm=probe.name, purpose="gradient probe: one step from iter_0 on the generated env",
            hub=ctx.hub, knobs=one_step, eval_knobs=None,
            train_envs=ctx.dialect.train_sources(probe.package or "", None, arm.source_name),
            resume_step=probe.resume_step, resume_from=ctx.iter_dir(0) / "prime_out")
        ctx.dialect.check_rendered(text, expect_resume=probe.resume_step)
        if not cfg.exists() or cfg.read_text() != text:
            atomic_write_text(cfg, text)

        def prepare() -> list[str]:
            if probe.log.exists():
                retire_failed(probe)
            if probe.resume_step is not None and not ctx.dialect.forks_checkpoints:
                prestage(ctx, probe)
            args = [x for p in config_files(ctx, cfg) for x in ("@", str(p))]
            args += ["--output-dir", str(probe.out)]
            preflight(ctx, probe, args)
            return args + ctx.trainer.seed_args(ctx.state.seed)

        res = _launch_and_wait(ctx, probe.name, ctx.trainer.trainer(), prepare, probe.out, probe.log,
                               probe.out / "no-eval", 0, start, start + 1, "probe", point="probe")
        if res.outcome != "done" or not ctx.dialect.train_file(probe.out, start + 1).exists():
            _raise_failed(ctx, probe.name, "gradient probe", res, probe.log,
                          "runs the probe again")
        rows = list(ctx.dialect.train_rows(probe.out, start + 1))
        atomic_write_text(rows_path, "".join(json.dumps(r) + "\n" for r in rows))
        ctx.trainer_done()
        shutil.rmtree(probe.out)   # a throwaway update: checkpoints of a step nobody trains on
    return [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()]
