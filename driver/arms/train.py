"""Training an arm: launch once, re-attach to a live trainer, poll on file and process signals,
and (where the dialect's run never measures its final weights) the final-weights eval.

Each step is re-entrant: a finished training is never relaunched; a running one is re-attached,
never launched twice.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from driver import faults
from driver.arms.arm import (Arm, config_files, eval_knobs, eval_rows_complete, expected_eval_rows,
                             train_knobs)
from driver.arms.render import PROBE_PURPOSE, write_config
from driver.backends import process
from driver.backends.base import Command
from driver.context import Ctx
from driver.envs.install import missing_envs
from driver.errors import ArmAborted, DriverError
from driver.arms import budget, progress
from driver.arms.seal import set_aside_sealed
from driver.run.files import atomic_write_json, atomic_write_text
from driver.run.model import Knobs
from driver.run.rundir import now
from driver.run.arm_files import ArmFiles
from rl_contract import composition



def _link_or_copy(src: str, dst: str) -> None:
    """A hard link where the filesystem allows one (a checkpoint's files are written once and
    never changed in place: a resumed run writes new step dirs, and a cleanup unlinks only its
    own name), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def prestage(ctx: Ctx, arm: Arm) -> None:
    """Stage the trees a run resuming at iter_0's step F reads in this arm's output dir
    (rl_contract: the trainer's and orchestrator's checkpoints and the step's broadcast; the
    HF weights are never read on resume, so they are not staged). Files are hard-linked, not
    copied: a classic DCP checkpoint with its optimizer state is several times the model's
    size, and every arm and probe stages one."""
    f = arm.resume_step
    src = ctx.iter_dir(0) / ArmFiles.OUT
    trees = ctx.dialect.resume_trees(src, f)
    missing = [str(t) for t in trees if not t.exists()]
    if missing:
        raise DriverError(f"cannot resume {arm.name} from iter_0 step {f}: missing checkpoint "
                          f"tree(s) {', '.join(missing)}. iter_0 must save a checkpoint at its "
                          "final step; rerun iter_0 (delete iter_0/ and resume).")
    for s, d in zip(trees, ctx.dialect.resume_trees(arm.out, f)):
        if d.exists():
            continue
        d.parent.mkdir(parents=True, exist_ok=True)
        tmp = d.with_name(d.name + ".staging")
        if tmp.exists():
            shutil.rmtree(tmp)
        shutil.copytree(s.resolve(), tmp, symlinks=False, copy_function=_link_or_copy)
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
        ctx.dialect.check_effective(cfg, expect_resume=arm.resume_step,
                                    fork_name=ctx.state.iter_0_train_source)
    except DriverError as e:
        raise DriverError(f"[{arm.name}] refusing to launch: {e}") from None
    ids = ctx.dialect.env_ids(cfg)
    if not ids:
        raise DriverError(f"[{arm.name}] refusing to launch: no train or eval env in the config")
    missing = missing_envs(ctx.trainer.python, ids)
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


def train(ctx: Ctx, arm: Arm, config_paths: list[Path], overrides: list[str]) -> None:
    """Launch (once) and poll until the trainer ends. Re-attaches to a live trainer. Where the
    trainer never evaluates its final weights (the current generation), the final-weights eval
    is a second launch (final_eval) and the arm is trained when both have finished."""
    st = ctx.state
    final = arm.final_step(st.steps_per_run)
    done_marker = arm.dir / ArmFiles.TRAIN_DONE
    separate_eval = ctx.dialect.separate_final_eval
    if not done_marker.exists():
        _raise_if_aborted(ctx, arm, final)
        eval_file = ctx.dialect.eval_file(arm.out, final)
        expected = 0 if separate_eval else expected_eval_rows(ctx, arm)

        def prepare() -> list[str]:
            if arm.log.exists():  # an earlier attempt ended badly: keep it aside, start clean
                retire_failed(ctx, arm)
            if arm.resume_step is not None and not ctx.dialect.forks_checkpoints:
                prestage(ctx, arm)
            args = []
            for p in config_paths:
                args += ["@", str(p)]
            args += overrides
            preflight(ctx, arm, args)
            # the run's --seed reaches the trainer's sampling too (a flag after the checks)
            return args + ctx.trainer.seed_args(st.seed)

        # an eval rollout that raised is left out of the file where prime-rl's log says so
        # (classic): the arm is measured without it, not retrained
        res = _launch_and_wait(ctx, arm.name, ctx.trainer.trainer(), prepare, arm.out, arm.log, eval_file,
                               expected, arm.resume_step or 0, final, "trainer", billed=(arm.name, "train"),
                               dropped=lambda: ctx.dialect.dropped_eval_rollouts(arm.out))
        if res.outcome == "failed":
            _raise_if_aborted(ctx, arm, final)
        if res.outcome != "done":
            _raise_failed(ctx, arm.name, "training", res, arm.log, "retrains this arm (the failed "
                          "attempt's files are kept beside the new ones)")
        missing = [str(p.relative_to(ctx.rd.path)) for p in ctx.dialect.checkpoint_trees(arm.out, final)
                   if not p.exists()]
        if missing:
            ctx.trainer_done(f"{arm.name}: the trainer finished without its final checkpoint")
            retire_failed(ctx, arm)
            raise DriverError(f"[{arm.name}] the trainer exited 0 but its final checkpoint is missing "
                              f"({', '.join(missing)}); every later arm resumes from it. Check the "
                              f"output disk, then `driver resume {ctx.rd.path}` retrains this arm.")
        atomic_write_json(done_marker, {"final_step": final, "eval_rows": res.eval_rows,
                                        "eval_dropped": max(0, expected - res.eval_rows),
                                        "end_ts": now()})
        ctx.trainer_done()
    if separate_eval:
        final_eval(ctx, arm, final)


ABORTED = ArmFiles.ABORTED


def _raise_if_aborted(ctx: Ctx, arm: Arm, final: int) -> None:
    """An arm prime-rl aborted on its own rule (rl_contract: the zero-advantage filter left
    nothing to train on, as its files say) is recorded, its attempt set aside (a launch into an
    output dir holding classic's control/evicted.txt aborts at once), and never retrained as it
    was: ArmAborted, every time it is asked for, until its phase records it."""
    from driver.run.files import read_json

    record = arm.dir / ABORTED
    if not record.exists():
        if ctx.runner().exit_status(arm.log) in (None, 0):
            return
        knobs = train_knobs(ctx, arm)
        reason = ctx.dialect.abort_reason(arm.out, arm.resume_step or 0, final,
                                          knobs.batch_size // knobs.rollouts_per_example)
        if reason is None:
            return
        atomic_write_json(record, {"reason": reason, "ts": now()})
        retire_failed(ctx, arm)
        ctx.trainer_done(f"{arm.name}: prime-rl aborted it: {reason}")
    raise ArmAborted(arm.name, read_json(record)["reason"])


def trained(ctx: Ctx, arm: Arm) -> bool:
    """The arm finished training, and where the final-weights eval is a launch of its own, that
    launch finished with a complete eval file (a torn one is set aside by evaluate)."""
    if not (arm.dir / ArmFiles.TRAIN_DONE).exists():
        return False
    if not ctx.dialect.separate_final_eval:
        return True
    final = arm.final_step(ctx.state.steps_per_run)
    return (ctx.runner().exit_status(arm.dir / ArmFiles.FINAL_EVAL_LOG) == 0 and
            process.count_lines(ctx.dialect.eval_file(arm.out, final)) >= expected_eval_rows(ctx, arm))


def final_eval(ctx: Ctx, arm: Arm, final: int) -> None:
    """Evaluate the arm's final weights (the current generation's run never does) with the
    backend's final_eval command on a rendered `evals` config; re-entrant like train."""
    out = ctx.dialect.final_eval_dir(arm.out, final)
    eval_file = ctx.dialect.eval_file(arm.out, final)
    expected = expected_eval_rows(ctx, arm)
    log = arm.dir / ArmFiles.FINAL_EVAL_LOG
    cfg = arm.dir / ArmFiles.FINAL_EVAL_CONFIG

    def prepare() -> list[str]:
        for path in (out, log, process.rc_path(log)):   # an earlier attempt's, kept aside
            set_aside_sealed(ctx.dialect, path)
        weights = ctx.dialect.weights_dir(arm.out, final)
        if not weights.is_dir():   # (its STABLE marker the eval launch checks where it runs)
            raise DriverError(f"[{arm.name}] no final weights at {weights}: the arm's run must "
                              "broadcast its weights to the filesystem. Retrain it: remove "
                              f"{arm.dir / ArmFiles.TRAIN_DONE} and `driver resume {ctx.rd.path}`.")
        # the eval server is started on the inference config the arm's own launch resolved
        # (its [inference] table, ports and LoRA settings), as rl started training's
        served = ctx.dialect.served_config(arm.out)
        text = ctx.dialect.render_final_eval(ctx.hub, eval_knobs(ctx, arm), weights.parent, final, out,
                                             served=json.loads(served.read_text()) if served else None)
        ctx.dialect.check_final_eval(text)
        atomic_write_text(cfg, text)
        return ([] if served is None else ["--inference-config", str(served)]) + \
            ["@", str(cfg), "--output-dir", str(out)]

    evaluator = ctx.trainer.final_evaluator()
    if evaluator is None:
        raise DriverError(f"[{arm.name}] the {ctx.trainer.name} backend has no command that "
                          "evaluates final weights, which this dialect needs")
    res = _launch_and_wait(ctx, f"{arm.name} final eval", evaluator, prepare, out, log, eval_file,
                           expected, final, final, "final-weights eval", billed=(arm.name, "eval"))
    if res.outcome != "done":
        _raise_failed(ctx, f"{arm.name} final eval", "evaluation", res, log,
                      "evaluates the final weights again")
    ctx.trainer_done()


def _launch_and_wait(ctx: Ctx, label: str, command: Command, prepare, out: Path, log: Path,
                     eval_file: Path, expected: int, start: int, final: int,
                     what: str, point: str = "train", *, billed: tuple[str, str],
                     dropped: Callable[[], int] | None = None) -> process.PollResult:
    """Launch (once, with prepare()'s arguments) or re-attach, then poll until the process ends:
    done needs exit status 0 and `expected` rows in eval_file, or as many less as `dropped()`
    (read once the launch has ended: the eval rollouts its log says raised and were left out)
    accounts for exactly. `billed`: the arm and the kind of launch (train, eval, probe) it is
    billed as, checked against --max-cost before it is submitted (a re-attach submits nothing)."""
    st = ctx.state
    runner = ctx.runner()
    steps = {"start_step": start, "final_step": final}

    def complete(rows: int) -> bool:
        return eval_rows_complete(rows, expected, dropped() if dropped and rows < expected else 0)

    tp = runner.find(st.trainer, out)
    if tp is None:
        if runner.exit_status(log) == 0 and complete(process.count_lines(eval_file)):
            return process.PollResult("done", 0, process.count_lines(eval_file))
        budget.check_launch(ctx, *billed)   # before prepare() sets an earlier attempt aside
        args = prepare()
        _ports_free(ctx, label, args)
        faults.point(f"{point}:before-launch")
        tp = runner.launch(command, args, out, log).model_copy(update=steps)
        ctx.trainer_running(tp)
        ctx.say(f"[{label}] {what} launched ({tp.handle}); log: {log}")
        faults.point(f"{point}:after-launch")
    else:
        tp = tp.model_copy(update=steps)   # an orphan found by its command line has no steps
        ctx.trainer_running(tp)
        ctx.say(f"[{label}] re-attached to running {what} ({tp.handle}); not relaunching")

    printer = progress.Printer(label, ctx.dialect, out, tp.start_step, final, tp.launched_ts,
                               expected, quiet=ctx.quiet)

    def tick(rows):
        faults.point("train:poll")
        printer.show(rows)

    limits = process.Limits(st.startup_timeout_s, st.stall_timeout_s, st.eval_timeout_s, st.queue_timeout_s)
    res = runner.poll(tp, log, eval_file, expected, limits=limits, steps=final - start,
                      progress=lambda: len(ctx.dialect.train_steps(out, start, final)),
                      growing=lambda: ctx.dialect.progress_files(out, start, final),
                      interval=ctx.poll_interval, on_tick=tick)
    printer.close()
    if res.outcome == "failed" and res.returncode == 0 and dropped is not None:
        # exited 0 short of `expected` rows: rows its log says prime-rl dropped are no gap
        n = dropped()
        if eval_rows_complete(res.eval_rows, expected, n):   # evaluate counts them as errored
            res = process.PollResult("done", 0, res.eval_rows)
        elif n:
            res = process.PollResult("failed", 0, res.eval_rows, f"{res.detail}; prime-rl's log "
                                     f"accounts for {n} of the {expected - res.eval_rows} missing "
                                     "(eval rollouts that raised)")
    if res.outcome in ("stalled", "timeout"):
        # a silent or overlong trainer is ours to stop, and is gone before anything else is
        # launched (it is never relaunched while alive, nor left running); resume retrains
        runner.stop(tp)
        res = process.PollResult("failed", None, res.eval_rows,
                                 f"{res.detail}; the {what} ({tp.handle}) was stopped")
    return res


def _ports_free(ctx: Ctx, label: str, args: list[str]) -> None:
    """A launch that starts a server here waits for its ports: a server of the previous launch
    may still be shutting down (given PORT_RELEASE_S), anyone else's holds it (refused)."""
    from driver.backends import LocalServers

    if not isinstance(ctx.trainer, LocalServers):
        return
    try:
        ports = ctx.trainer.ports(composition.compose(args))
        process.wait_ports_free(ports, process.PORT_RELEASE_S)
    except composition.CompositionError:
        return   # preflight has refused it already, where it could not compose
    except OSError as e:
        raise DriverError(f"[{label}] not launched: {e}. Stop that process, then `driver resume "
                          f"{ctx.rd.path}`.") from None


def _raise_failed(ctx: Ctx, label: str, noun: str, res: process.PollResult, log: Path,
                  then: str) -> None:
    tail = process.log_tail(log)
    ctx.trainer_done(f"{label} failed: {res.detail}")
    raise DriverError(f"[{label}] {noun} failed: {res.detail}. Log tail:\n{tail}\n"
                      f"Fix the cause, then `driver resume {ctx.rd.path}` {then}.")


def retire_failed(ctx: Ctx, arm: Arm) -> None:
    """Set a failed attempt's output dir, log and exit status aside, kept beside the next
    attempt; its eval files are sealed as they go (no attempt set aside is ever measured)."""
    for p in (arm.out, arm.log, process.rc_path(arm.log)):
        set_aside_sealed(ctx.dialect, p)


def probe_launch(ctx: Ctx, arm: Arm, knobs: Knobs, prompts: int) -> tuple[list[dict], str | None]:
    """The gradient probe as one step of the backend's own trainer: from the arm's start
    (iter_0's checkpoint), on the arm's generated env, `prompts` x group-size rollouts, no eval.
    That step's train rollouts were sampled by the anchor student: they are the probe's. Its
    weight update is thrown away with its output (only the rows are kept), so it costs a
    trainer start-up and one step (about 5% of a 100-step arm on a GPU node).

    prime-rl's zero-advantage filter would turn a dataset with no live group (what the probe is
    for) into an aborted launch: the probe turns it off (the dialect's probe_overlay) and
    measures the rows itself. Returns (rows, None), or ([], prime-rl's reason) when the launch
    was aborted on that rule all the same (a canonical config's own filter, say): either way a
    verdict on the dataset, never a halt."""
    import tomli_w

    d = arm.dir / ArmFiles.PROBE_LAUNCH
    probe = Arm(f"{arm.name} probe", d, resume_step=arm.resume_step, package=arm.package,
                dataset=arm.dataset, source_name=arm.source_name)
    start = arm.resume_step or 0
    rows_path = d / "train_rollouts.jsonl"
    aborted_path = d / ABORTED
    if not rows_path.exists() and not aborted_path.exists():
        one_step = knobs.model_copy(update={"batch_size": prompts * knobs.rollouts_per_example,
                                            "steps_per_run": 1})
        cfg = write_config(ctx, probe, PROBE_PURPOSE, d / ArmFiles.CONFIG, knobs=one_step,
                           evaluate=False, keep=False)
        overlay = d / "probe_overlay.toml"
        overlay_text = ("# the gradient probe measures live groups itself: prime-rl's "
                        "zero-advantage filter off\n" + tomli_w.dumps(ctx.dialect.probe_overlay))
        if not overlay.exists() or overlay.read_text() != overlay_text:
            atomic_write_text(overlay, overlay_text)

        def prepare() -> list[str]:
            if probe.log.exists():
                retire_failed(ctx, probe)
            if probe.resume_step is not None and not ctx.dialect.forks_checkpoints:
                prestage(ctx, probe)
            args = [x for p in [*config_files(ctx, cfg), overlay] for x in ("@", str(p))]
            args += ["--output-dir", str(probe.out)]
            preflight(ctx, probe, args)
            return args + ctx.trainer.seed_args(ctx.state.seed)

        res = _launch_and_wait(ctx, probe.name, ctx.trainer.trainer(), prepare, probe.out, probe.log,
                               probe.out / "no-eval", 0, start, start + 1, "probe", point="probe",
                               billed=(arm.name, "probe"))
        # the one step's batch, where the layout files it (rl_contract: classic one below)
        rows_step = ctx.dialect.rows_step(start + 1)
        if res.outcome != "done":
            reason = ctx.dialect.abort_reason(probe.out, start, start + 1, prompts)
            if reason is None:
                _raise_failed(ctx, probe.name, "gradient probe", res, probe.log, "runs the probe again")
            atomic_write_json(aborted_path, {"reason": reason, "ts": now()})
            ctx.trainer_done()
            retire_failed(ctx, probe)
        elif not ctx.dialect.train_file(probe.out, rows_step).exists():
            _raise_failed(ctx, probe.name, "gradient probe", res, probe.log, "runs the probe again")
        else:
            rows = list(ctx.dialect.train_rows(probe.out, rows_step))
            atomic_write_text(rows_path, "".join(json.dumps(r) + "\n" for r in rows))
            ctx.trainer_done()
            shutil.rmtree(probe.out)   # a throwaway update: checkpoints of a step nobody trains on
    if aborted_path.exists():
        from driver.run.files import read_json

        return [], str(read_json(aborted_path)["reason"])
    return [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()], None
