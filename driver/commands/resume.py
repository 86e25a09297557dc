"""`driver resume RUN_DIR`: continue a run where it stopped (optionally with another teacher, a
larger budget or a higher iteration cap).

--budget and --max-iters change the loop's limits. The budget is wall-clock time since the run
started (the teacher's time and any time the run was stopped included), and it is the whole run's,
the controls included: a new budget must be more than the time already gone, and re-opening an
ended loop must leave one more iteration and the controls at the times the run measured; a new
--max-iters must be more than the iterations done (iter_0 included). A run whose loop ended on a limit the new values lift is re-opened: nothing is
discarded; the run goes back to the gate, the control directories (measured against the old best
iteration) are renamed `<dir>.before-K` and their metrics.json entries dropped (each directory
keeps its eval_summary.json), their recorded failures move into run.json's limit_changes record,
and the controls and finalize run again at the loop's new end.
"""
from __future__ import annotations

import argparse
import math
import sys

from driver.commands.flags import EXIT_CODES, add_model_flags, duration, given_values
from driver.run.model import RunConfig

NAME = "resume"
_FLAGS: dict[str, str] = {}
LIMITS = ("budget_seconds", "max_iters")
# how long an arm may be silent: a resume may lengthen (or shorten) them for the arms to come
TIMEOUTS = ("startup_timeout_s", "stall_timeout_s", "eval_timeout_s", "queue_timeout_s")
# flags a user may reach for that no resume can honour: each is refused, naming what works
REFUSED = ("--model",)


def add(sub) -> None:
    s = sub.add_parser(NAME, help="continue a run directory where it stopped", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Continue a run at the phase it stopped in. The flags below "
                                   "change the run's settings from here on (the new teacher "
                                   "takes over from the next brief it has to write). --budget "
                                   "counts from the run's start, the teacher's time and any time "
                                   "away included, and is the whole run's, the controls "
                                   "included; a larger --budget or --max-iters re-opens a "
                                   "loop that ended on it (the controls then run again at the "
                                   "new end, the old ones kept as <dir>.before-K).")
    s.add_argument("run_dir")
    _FLAGS.update(add_model_flags(s, RunConfig, resumable_only=True))
    _FLAGS["llm"] = "--llm-model"
    s.add_argument("--model", dest="refused_model", metavar="MODEL",
                   help="refused: a run's student is fixed (every arm starts from iter_0's "
                        "checkpoint of it); start a new run with `driver run --model MODEL`")


def main(a) -> int:
    from pydantic import ValidationError

    from driver import loop, teachers
    from driver.context import Ctx
    from driver.errors import UsageError
    from driver.run.files import read_json
    from driver.run.model import RunState, validation_message
    from driver.run.rundir import RunDir, RunLock, now

    rd = RunDir(a.run_dir)
    rd.load()  # a bad run.json or metrics.json is reported before anything else happens
    if getattr(a, "refused_model", None) is not None:
        raise UsageError(model_refusal(rd, rd.load(), a.refused_model))
    rd.load_metrics()
    changes = given_values(a, RunConfig)
    limits = {k: changes.pop(k) for k in LIMITS if k in changes}
    timeouts = {k: changes.pop(k) for k in TIMEOUTS if k in changes}
    with RunLock(rd.path):
        state = rd.load()  # re-read under the lock
        if timeouts:
            try:
                new_state = RunState.model_validate({**state.model_dump(), **timeouts})
            except ValidationError as e:
                raise UsageError(validation_message(e, _FLAGS)) from None
            for k, v in timeouts.items():
                print(f"{_FLAGS.get(k, k)}: {getattr(state, k) / 60:g} min -> {v / 60:g} min",
                      file=sys.stderr, flush=True)
            state = new_state
            rd.save(state)
        reopen = False
        if limits:   # refused before anything changes
            try:
                RunState.model_validate({**state.model_dump(), **limits})
            except ValidationError as e:
                raise UsageError(validation_message(e, _FLAGS)) from None
            reopen = reopens(rd, state, limits, now())
        teacher = changes.get("teacher", state.teacher)
        if changes and (teacher != state.teacher or teacher == "llm"):
            update = {"teacher": teacher}
            if teacher == "llm":
                update["llm"] = changes.get("llm") or (state.llm.model_dump() if state.llm else None)
            try:
                new = RunState.model_validate({**state.model_dump(), **update,
                                               **({} if teacher == "llm" else {"llm": None})})
            except ValidationError as e:
                raise UsageError(validation_message(e, _FLAGS)) from None
            if rd.hub_env_json.exists():   # refuse a teacher that cannot teach here, first
                teachers.preflight(new, read_json(rd.hub_env_json))
            print(f"teacher: {state.teacher} -> {new.teacher}", file=sys.stderr, flush=True)
            state = new
            rd.save(state)
        ctx = Ctx.open(rd, state)
        if limits:
            extend(ctx, limits, reopen)
        print(f"resuming {rd.path} at phase {state.phase} (iteration {state.iteration})",
              file=sys.stderr, flush=True)
        return loop.run(ctx)


def model_refusal(rd, state, model: str) -> str:
    """Why `driver resume RUN --model MODEL` is refused, and the commands that work."""
    if model == state.model:
        return (f"{rd.path}'s student already is {model}; `driver resume {rd.path}` (without "
                "--model) continues the run.")
    backend = f" --backend {state.backend}" if state.backend else ""
    return (f"`driver resume` cannot change the student: a run's student is fixed ({rd.path} "
            f"trains {state.model}; iter_0 is trained from it, and every iteration and control "
            f"starts from iter_0's checkpoint), and --model is the one setting a resume cannot "
            f"honour. Start a new run with the student you want: `driver run --dataset "
            f"{state.dataset}{backend} --model {model}` (add your other flags). `--init-from "
            f"{rd.path}` reuses this run's iter_0 only for a run of the same model "
            f"({state.model}), so it does not apply to {model}.")


def _span(seconds: float) -> str:
    s = int(seconds)
    return (f"{s // 3600}h {s % 3600 // 60:02d}m" if s >= 3600
            else f"{s // 60}m {s % 60:02d}s" if s >= 60 else f"{s}s")


def _round_up(seconds: float) -> float:
    """Whole minutes under an hour, whole hours from there: a budget a person would type."""
    unit = 3600 if seconds >= 3600 else 60
    return math.ceil(seconds / unit) * unit


def iterations_done(state) -> int:
    """Iterations finished, iter_0 included: at the gate, and once the loop has ended, the
    current one is finished too."""
    return state.iteration + (1 if state.loop_end is not None or state.phase == "gate" else 0)


def reopens(rd, state, limits: dict, now: float) -> bool:
    """Whether the new limits re-open a loop that ended on one (True), or change an open loop's
    (False). Refuses (UsageError, naming the command that works) a budget not larger than the
    time gone, a max_iters not larger than the iterations done, and a re-opening that another
    limit would close again at once."""
    from driver.errors import UsageError

    elapsed = now - state.start_ts
    budget = limits.get("budget_seconds", state.budget_seconds)
    max_iters = limits.get("max_iters", state.max_iters)
    done = iterations_done(state)
    enough_budget = _round_up(elapsed + state.budget_seconds)
    counts = ("the budget counts wall-clock time from the run's start, the teacher's time and "
              "any time the run was stopped included")
    if "budget_seconds" in limits and budget <= elapsed:
        raise UsageError(
            f"--budget {duration(budget)} is not more than the {_span(elapsed)} this run has "
            f"been going ({counts}), so the loop would end at its next gate. For about another "
            f"{duration(state.budget_seconds)} of loop: `driver resume {rd.path} --budget "
            f"{duration(enough_budget)}`.")
    if "max_iters" in limits and max_iters <= done:
        raise UsageError(
            f"--max-iters {max_iters} is not more than the {done} iteration(s) this run has done "
            f"(iter_0 included). For one more: `driver resume {rd.path} --max-iters {done + 1}`.")
    if state.loop_end is None:
        return False     # the loop is open: its gate reads the new limits
    ended = " and ".join(state.limits_reached())
    if "cost_exhausted" in state.limits_reached():
        raise UsageError(
            f"the loop ended on {ended} (--max-cost), which --budget and --max-iters do "
            f"not lift. Start a new run on this run's iter_0: `driver run --init-from {rd.path} "
            "--max-cost …`.")
    if state.trainer is not None:
        raise UsageError(
            f"a control's trainer ({state.trainer.handle}) is recorded as running in phase "
            f"{state.phase}; the loop is re-opened only between arms. `driver resume {rd.path}` "
            "to let it finish (or stop it), then extend.")
    works = (f"`driver resume {rd.path} --budget "
             f"{duration(budget if budget > elapsed else enough_budget)} --max-iters "
             f"{max_iters if max_iters > done else done + 1}`")
    if budget <= elapsed:
        raise UsageError(
            f"the loop ended on {ended}, and its budget of {duration(budget)} is spent "
            f"too ({_span(elapsed)} since the start; {counts}): raise both. {works}.")
    if max_iters <= done:
        raise UsageError(
            f"the loop ended on {ended}, and --max-iters {max_iters} admits no iteration "
            f"after the {done} done (iter_0 included): raise both. {works}.")
    need = _reserve(rd, state, "time")
    if need is not None and not need.covered_by(budget - elapsed):
        again = f"`driver resume {rd.path} --budget {duration(_round_up(elapsed + need.needed))}" + \
            (f" --max-iters {max_iters}`" if "max_iters" in limits else "`")
        raise UsageError(
            f"the loop ended on {ended}, and the {_span(budget - elapsed)} a budget of "
            f"{duration(budget)} leaves would not cover one more iteration and the {need.controls} "
            f"controls (about {_span(need.needed)} at the times this run measured; the budget is the "
            f"whole run's), so the loop would end again at once and its controls run again. {again}.")
    if state.max_cost_usd is not None:
        from driver.backends import spent_usd

        spent, cap = spent_usd(rd.path), state.max_cost_usd
        need = _reserve(rd, state, "cost")
        if spent >= cap or (need is not None and not need.covered_by(cap - spent)):
            estimate = "" if spent >= cap or need is None else (
                f", and one more iteration and the {need.controls} controls are estimated at "
                f"${need.needed:.2f}")
            raise UsageError(
                f"the run has spent ${spent:.2f} of its --max-cost ${cap:.2f}{estimate}, so the loop "
                f"would end again at once. Start a new run on this run's iter_0: `driver run "
                f"--init-from {rd.path}`.")
    return True


def _reserve(rd, state, kind: str):
    """What one more iteration and the controls need (driver/arms/budget.py), in time or cost,
    from the run's records; None where nothing is measured (or no hub_env.json to size them)."""
    from driver.arms import budget
    from driver.context import Ctx

    if not rd.hub_env_json.exists():
        return None
    ctx = Ctx.records(rd, state)
    return budget.time_reserve(ctx) if kind == "time" else budget.cost_reserve(ctx)


def extend(ctx, limits: dict, reopen: bool) -> None:
    """Apply new limits. Re-opening sets the controls aside first (renamed `<dir>.before-K`,
    their metrics.json entries dropped), then saves run.json: a driver killed in between leaves
    the run as it was, and the same command finishes the job."""
    from driver.arms import table
    from driver.run.arm_files import aside
    from driver.run.arm_files import set_aside as put_aside
    from driver.run.files import atomic_write_json

    set_aside: list[str] = []
    if reopen:
        dirs = [ctx.rd.path / c.directory for c in table.CONTROLS]
        k = 1   # one number for all of them: the controls of one reopening stay together
        while any(aside(d, "before", k).exists() for d in dirs):
            k += 1
        for d in dirs:
            moved = put_aside(d, "before", k)
            if moved is not None:
                set_aside.append(moved.name)
        m = ctx.rd.load_metrics()
        if m["controls"] or "replay_noise" in m:   # each set-aside directory keeps its eval_summary.json
            m["controls"] = []
            m.pop("replay_noise", None)   # run A's figure: finalize writes it again at the new end
            atomic_write_json(ctx.rd.metrics_json, m)
    old = {k: getattr(ctx.state, k) for k in limits}
    ctx.limits_changed(limits, reopen, set_aside)
    for k, v in limits.items():
        shown = [duration(x) if k == "budget_seconds" else str(x) for x in (old[k], v)]
        ctx.say(f"[resume] {_FLAGS.get(k, k)}: {shown[0]} -> {shown[1]}")
    if reopen:
        ctx.say("[resume] the loop is open again at the gate"
                + (f"; the old controls were set aside: {', '.join(set_aside)}" if set_aside else "")
                + "; the controls and finalize run again at the loop's new end")
