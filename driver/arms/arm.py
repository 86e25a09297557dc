"""One training arm (iter_0, iter_N, run A, run B): install its env, train it, evaluate it.

Each step is re-entrant: it looks at what exists (an installed env with the right row count, a
running trainer, a complete eval file, a written eval_summary.json) and continues from there.
A finished training is never relaunched; a running one is re-attached, never launched twice.
"""
from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from driver.envs import hub as envs
from driver.analysis import evaluation
from driver import faults
from driver.reporting import progress
from driver.backends import process as training
from driver.context import Ctx
from driver.errors import DriverError
from driver.run.files import atomic_write_json, atomic_write_text, read_json
from driver.run.rundir import now
from rl_contract import composition

PROGRESS_EVERY_S = 15.0   # plain progress lines when stderr is not a terminal


@dataclass
class Arm:
    name: str                 # "iter_0", "iter_3", "run_a", "run_b"
    dir: Path
    resume_step: int | None   # iter_0's final step, or None to start from base
    package: str | None = None   # generated env package name
    dataset: Path | None = None  # rows for the generated env
    full_eval: bool = False      # a control: evaluated on the hub's whole eval split

    @property
    def out(self) -> Path:
        return self.dir / "prime_out"

    @property
    def log(self) -> Path:
        return self.dir / "train.log"

    def final_step(self, steps_per_run: int) -> int:
        return (self.resume_step or 0) + steps_per_run


def arm_knobs(ctx: Ctx, arm: Arm):
    """The run's knobs; a control evaluates on the hub's whole eval (and selection) split, as
    the procedure asks, where iterations use --eval-examples of them."""
    if not arm.full_eval:
        return ctx.knobs
    sizes = [ctx.hub["eval_size"], (ctx.hub.get("selection") or {}).get("size", 0)]
    return dataclasses.replace(ctx.knobs, eval_examples=max(ctx.knobs.eval_examples, *sizes))


def expected_eval_rows(ctx: Ctx, arm: Arm) -> int:
    """Rows of the final eval file: every eval env block the configs carry (the eval split, and
    the selection split when the hub env has one), as the dialect renders them."""
    return sum(b["num_examples"] * b.get("rollouts_per_example", b.get("group_size", 1))
               for b in ctx.dialect.eval_env_blocks(ctx.hub, arm_knobs(ctx, arm)))


# --------------------------------------------------------------------------------------------
# Environment

def install_env(ctx: Ctx, arm: Arm) -> dict:
    """Write the generated package and cleanup-then-install it; record what was installed."""
    marker = arm.dir / "env_installed.json"
    expected = training.count_lines(arm.dataset)
    sha = envs.file_sha256(arm.dataset)
    if marker.exists():
        done = read_json(marker)
        if done.get("dataset_sha256") == sha and envs.count_rows(
                ctx.backend.python, arm.package, envs.kind_of(ctx.hub)) == expected:
            return done
    pkg_dir = envs.write_package(arm.dir, arm.package, ctx.hub, arm.dataset)
    faults.point("install:package-written")
    result = envs.install_generated(ctx.backend.python, pkg_dir, expected, envs.kind_of(ctx.hub))
    result["dataset_sha256"] = sha
    atomic_write_json(marker, result)
    ctx.say(f"[{arm.name}] installed {arm.package}: {result['rows']} rows")
    return result


# --------------------------------------------------------------------------------------------
# Training

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
    missing = envs.missing_envs(ctx.backend.python, ids)
    if missing:
        raise DriverError(
            f"[{arm.name}] refusing to launch: env(s) {', '.join(missing)} not installed for "
            f"{ctx.backend.python}. Install them (`prime env install ID`, or `pip install` the "
            f"package into that interpreter), then `driver resume {ctx.rd.path}`.")
    foreign = ctx.dialect.foreign_run(arm.out, arm.resume_step)
    if foreign:
        raise DriverError(
            f"[{arm.name}] refusing to launch: {arm.out} already holds another run "
            f"({', '.join(foreign[:3])}{' …' if len(foreign) > 3 else ''}). Move it away, then "
            f"`driver resume {ctx.rd.path}`.")


def _set_aside(path: Path) -> None:
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
                _retire_failed(arm)
            if arm.resume_step is not None and not ctx.dialect.forks_checkpoints:
                prestage(ctx, arm)
            args = []
            for p in config_paths:
                args += ["@", str(p)]
            args += overrides
            preflight(ctx, arm, args)
            if ctx.backend.seed_flag:   # the run's --seed reaches the trainer's sampling too
                args += [ctx.backend.seed_flag, str(st.seed)]
            return args

        res = _launch_and_wait(ctx, arm.name, ctx.backend, prepare, arm.out, arm.log, eval_file,
                               expected, arm.resume_step or 0, final, "trainer")
        if res.outcome != "done":
            _raise_failed(ctx, arm.name, "training", res, arm.log, "retrains this arm (the failed "
                          "attempt's files are kept beside the new ones)")
        missing = [str(p.relative_to(ctx.rd.path)) for p in ctx.dialect.checkpoint_trees(arm.out, final)
                   if not p.exists()]
        if missing:
            st.trainer = None
            st.reason = f"{arm.name}: the trainer finished without its final checkpoint"
            ctx.save()
            _retire_failed(arm)
            raise DriverError(f"[{arm.name}] the trainer exited 0 but its final checkpoint is missing "
                              f"({', '.join(missing)}); every later arm resumes from it. Check the "
                              f"output disk, then `driver resume {ctx.rd.path}` retrains this arm.")
        atomic_write_json(done_marker, {"final_step": final, "eval_rows": res.eval_rows,
                                        "end_ts": now()})
        st.trainer = None
        ctx.save()
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
    return (training.exit_status(arm.dir / "final_eval.log") == 0 and
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
            _set_aside(path)
        weights = ctx.dialect.weights_dir(arm.out, final)
        if not weights.is_dir():
            raise DriverError(f"[{arm.name}] no final weights at {weights}: the arm's run must "
                              "broadcast its weights to the filesystem. Retrain it: remove "
                              f"{arm.dir / 'train_done.json'} and `driver resume {ctx.rd.path}`.")
        text = ctx.dialect.render_final_eval(ctx.hub, arm_knobs(ctx, arm), weights, out,
                                             full=True)
        ctx.dialect.check_final_eval(text)
        atomic_write_text(cfg, text)
        # the student's tokenizer rides along: a broadcast may hold weights without one
        return ["--tokenizer", ctx.state.model, "@", str(cfg), "--output-dir", str(out)]

    if ctx.backend.final_eval is None:
        raise DriverError(f"[{arm.name}] the {ctx.backend.name} backend has no command that "
                          "evaluates final weights, which this dialect needs")
    evaluator = dataclasses.replace(ctx.backend, command=ctx.backend.final_eval)
    res = _launch_and_wait(ctx, f"{arm.name} final eval", evaluator, prepare, out, log, eval_file,
                           expected, final, final, "final-weights eval")
    if res.outcome != "done":
        _raise_failed(ctx, f"{arm.name} final eval", "evaluation", res, log,
                      "evaluates the final weights again")
    ctx.state.trainer = None
    ctx.save()


def _launch_and_wait(ctx: Ctx, label: str, backend, prepare, out: Path, log: Path,
                     eval_file: Path, expected: int, start: int, final: int,
                     what: str) -> training.PollResult:
    """Launch (once, with prepare()'s arguments) or re-attach, then poll until the process ends:
    done needs exit status 0 and `expected` rows in eval_file."""
    st = ctx.state
    steps = {"start_step": start, "final_step": final}
    tp = st.trainer if (st.trainer and st.trainer.output_dir == str(out)) else None
    if tp is not None and not training.is_alive(tp):
        tp = None
    if tp is None:
        tp = training.find_orphan(out)
    if tp is None:
        if training.exit_status(log) == 0 and training.count_lines(eval_file) >= expected:
            return training.PollResult("done", 0, training.count_lines(eval_file))
        args = prepare()
        faults.point("train:before-launch")
        tp = training.launch(backend, args, out, log).model_copy(update=steps)
        st.trainer = tp
        ctx.save()
        ctx.say(f"[{label}] {what} launched (pid {tp.pid}); log: {log}")
        faults.point("train:after-launch")
    else:
        tp = tp.model_copy(update=steps)   # an orphan found by its command line has no steps
        if st.trainer != tp:
            st.trainer = tp
            ctx.save()
        ctx.say(f"[{label}] re-attached to running {what} (pid {tp.pid}); not relaunching")

    last_shown = [0.0]
    tty = sys.stderr.isatty()
    run_out = out if start < final else None    # a final eval has no train steps to show

    def tick(rows):
        faults.point("train:poll")
        t = time.monotonic()
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
    res = training.poll(tp, log, eval_file, expected, interval=ctx.poll_interval,
                        cap_s=ctx.poll_cap_s, on_tick=tick,
                        progress=lambda: len(ctx.dialect.steps(rollouts)),
                        stall_s=st.stall_timeout_s)
    if tty and not ctx.quiet:
        print(file=sys.stderr)
    if res.outcome == "stalled":
        # a hung trainer is ours to stop (it is never relaunched while alive); resume retrains
        training.stop(tp)
        res = training.PollResult("failed", None, res.eval_rows,
                                  f"{res.detail}; the {what} (pid {tp.pid}) was stopped")
    if res.outcome == "timeout":
        raise DriverError(f"[{label}] {res.detail}; the {what} (pid {tp.pid if tp else '?'}) "
                          "was left running and will not be relaunched. Check it, then "
                          f"`driver resume {ctx.rd.path}` re-attaches to it.")
    return res


def _raise_failed(ctx: Ctx, label: str, noun: str, res: training.PollResult, log: Path,
                  then: str) -> None:
    tail = training.log_tail(log)
    ctx.state.trainer = None
    ctx.state.reason = f"{label} failed: {res.detail}"
    ctx.save()
    raise DriverError(f"[{label}] {noun} failed: {res.detail}. Log tail:\n{tail}\n"
                      f"Fix the cause, then `driver resume {ctx.rd.path}` {then}.")


def _retire_failed(arm: Arm) -> None:
    for p in (arm.out, arm.log, training.rc_path(arm.log)):
        _set_aside(p)


# --------------------------------------------------------------------------------------------
# Evaluation

def evaluate(ctx: Ctx, arm: Arm, rows: int | None, extra: dict | None = None) -> dict:
    """Aggregate the final eval (numbers only) into eval_summary.json and metrics.json."""
    summary_path = arm.dir / "eval_summary.json"
    final = arm.final_step(ctx.state.steps_per_run)
    if summary_path.exists():
        summary = read_json(summary_path)
    else:
        try:
            summary = evaluation.aggregate(ctx.dialect.eval_file(arm.out, final),
                                           selection_env=ctx.dialect.selection_env,
                                           view=ctx.dialect.eval_view)
        except DriverError:
            # a missing or torn eval file cannot be repaired by reading it again: retire this
            # attempt (kept beside the next) so that resuming trains the arm afresh, or, where
            # the eval is a launch of its own, evaluates the trained weights afresh
            if ctx.dialect.separate_final_eval:
                log = arm.dir / "final_eval.log"
                for path in (ctx.dialect.final_eval_dir(arm.out, final), log, training.rc_path(log)):
                    _set_aside(path)
            else:
                (arm.dir / "train_done.json").unlink(missing_ok=True)
                _retire_failed(arm)
            raise
        summary.update(_train_reward(ctx, arm))
        summary["checkpoint"] = str(ctx.dialect.checkpoint_trees(arm.out, final)[1].relative_to(ctx.rd.path))
        summary["final_step"] = final
        summary["rows"] = rows
        summary.update(extra or {})
        faults.point("evaluate:before-summary")
        atomic_write_json(summary_path, summary)
        ctx.say(f"[{arm.name}] evaluated: " + _accuracy_line(summary))
    faults.point("evaluate:after-summary")
    return summary


def _accuracy_line(summary: dict) -> str:
    """"eval 34.5% [28.3, 41.2] (n = 200); selection 31.0% [...] (n = 200)": numbers only."""
    parts = []
    for label, s in (("eval", summary), ("selection", summary.get("selection"))):
        if s and s.get("n_eval"):
            lo, hi = evaluation.wilson_interval(round(s["eval_acc"] * s["n_eval"]), s["n_eval"])
            parts.append(f"{label} {100 * s['eval_acc']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] "
                         f"(n = {s['n_eval']})")
    return "; ".join(parts) or "no eval rows"


def _train_reward(ctx: Ctx, arm: Arm) -> dict:
    """Mean train reward per step (the trajectory), from train rollouts."""
    rdir = ctx.dialect.rollouts_dir(arm.out)
    per_step = {}
    for s in ctx.dialect.steps(rdir):
        if s <= (arm.resume_step or 0) or not ctx.dialect.train_file(arm.out, s).exists():
            continue
        rewards = [float(r.get("reward", 0.0)) for r in ctx.dialect.train_rows(arm.out, s)]
        if rewards:
            per_step[str(s)] = sum(rewards) / len(rewards)
    mean = sum(per_step.values()) / len(per_step) if per_step else None
    out = {"train_reward_mean": mean, "train_reward_by_step": per_step}
    if per_step:   # does the last step still carry gradient? (driver diagnose's numbers)
        from driver.analysis import diagnose

        last = max(map(int, per_step))
        try:
            d = diagnose.diagnose(list(ctx.dialect.train_rows(arm.out, last)))
            out["train_diagnose"] = {"step": last, **{k: d[k] for k in (
                "groups", "uniform_groups", "live_fraction_outcome", "live_fraction_reward",
                "effort_kind", "effort_correlation", "truncation_rate", "verdict", "reasons")}}
        except ValueError as e:
            out["train_diagnose"] = {"step": last, "verdict": "n/a", "reasons": [str(e)]}
    return out


def metrics_entry(summary: dict, **extra) -> dict:
    keep = ("eval_acc", "eval_reward_mean", "n_eval", "eval_lenient_acc", "train_reward_mean",
            "checkpoint", "rows", "final_step", "train_diagnose")
    entry = {k: summary.get(k) for k in keep if k in summary}
    if summary.get("selection"):
        entry["selection_acc"] = summary["selection"]["eval_acc"]
        entry["n_selection"] = summary["selection"]["n_eval"]
    entry.update(extra)
    return entry


# ---------------------------------------------------------------------------------------------
# The run's arms by name, and the best iteration (chosen here, written by finalize only)

ARMS = {"run_a": "run_a_best_from_iter0", "run_b": "run_b_combined_from_base",
        "run_c": "run_c_untargeted_from_iter0"}


def best_iteration(ctx: Ctx) -> dict | None:
    """The best evaluated iteration (>= 1) and its artifacts' paths; reads only."""
    iters = [m for m in ctx.rd.load_metrics()["iters"]
             if m.get("iter", 0) >= 1 and m.get("eval_acc") is not None]
    if not iters:
        return None
    # chosen on the selection split when the hub env has one, so that the eval split it is
    # then reported on played no part in choosing it
    best = max(iters, key=lambda m: (evaluation.selection_score(m), -m["iter"]))  # ties: the earliest
    d = ctx.iter_dir(best["iter"])
    rel = d.relative_to(ctx.rd.path)  # paths relative to the run directory: it can move
    record = {"best_iter": best["iter"], "eval_acc": best["eval_acc"],
              "chosen_on": "selection" if best.get("selection_acc") is not None else "eval",
              "selection_acc": best.get("selection_acc"),
              "dataset": str(rel / "dataset.jsonl"),
              "env_dir": str(rel / envs.package_name(ctx.state.dataset, f"iter_{best['iter']}", ctx.state.env_tag)),
              "rl_toml": str(rel / "rl.toml")}
    return record


def record_best(ctx: Ctx) -> dict | None:
    """best_iteration, written to best_iter.json (by finalize only; `report` and `status` read)."""
    record = best_iteration(ctx)
    path = ctx.rd.path / "best_iter.json"
    if record is not None and (not path.exists() or read_json(path) != record):
        atomic_write_json(path, record)
    return record
