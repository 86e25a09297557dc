"""The phase state machine: the only place that decides what happens next.

    introspect -> baseline -> gate -> [weakness -> dataset -> environment -> probe -> train
    -> evaluate -> gate]* -> <each control arm, in driver.arms.table.CONTROLS's order>
    -> finalize -> done

Phases do work and report; they never choose their successor. The gate before each iteration is
the loop's exit: the budget is spent, or what is left of it would not cover one more iteration
and the controls (the budget is the whole run's), or iteration index >= max_iters. The one other
is a launch that --max-cost refuses (CostCapReached), which ends the loop where it stands. run.json
is saved after every transition, so a driver killed anywhere resumes at the phase it was in, and
every phase is re-entrant.
"""
from __future__ import annotations

from driver import faults
from driver.envs import worker
from driver.context import Ctx
from driver.errors import (ArmAborted, CostCapReached, DriverError, UsageError, WaitingForTeacher,
                           os_error_advice)
from driver.arms import budget, table
from driver.phases import controls, finalize, iteration, setup
from driver.run.model import PhaseRecord
from driver.run.rundir import now

LOOP = ("weakness", "dataset", "environment", "probe", "train", "evaluate")


def phases() -> tuple[str, ...]:
    """Every phase `step` routes between, in order."""
    return ("introspect", "baseline", "gate", *LOOP, *(c.name for c in table.CONTROLS),
            "finalize", "done")


def gate(ctx: Ctx) -> str:
    """The pre-iteration gate. Teacher opinion never ends the loop. The budget, and --max-cost,
    are the whole run's, the controls included: another iteration starts only while what is left
    covers it and the controls still to run, at what the run has measured so far
    (driver/arms/budget.py)."""
    st = ctx.state
    nxt = st.iteration + 1
    ends, account = _loop_end(ctx, nxt)
    if not ends:
        st.iteration = nxt
        if account:
            ctx.say(f"[gate] iteration {nxt}: {account}")
        return "weakness"
    st.loop_end, st.loop_limits = ends[0], ends
    ctx.say(f"[gate] loop ends: {' and '.join(ends)} (after iteration {st.iteration})"
            + (f": {account}" if account else ""))
    return after_controls_from(0)


def _loop_end(ctx: Ctx, nxt: int) -> tuple[list[str], str]:
    """Every limit that ends the loop at this gate ([]: iteration `nxt` starts), the one it is
    recorded under first (a spent budget before a spent --max-cost before the iteration cap, as
    ever), and the reserve's account in words. The reserve is asked only where another iteration
    could start."""
    from driver.backends import spent_usd

    st = ctx.state
    left_s = st.budget_seconds - (now() - st.start_ts)
    cap = st.max_cost_usd
    spent = spent_usd(ctx.rd.path) if cap is not None else 0.0
    ends = ((["budget_exhausted"] if left_s <= 0 else [])
            + (["cost_exhausted"] if cap is not None and spent >= cap else [])
            + (["max_iters_reached"] if nxt >= st.max_iters else []))
    if ends:
        return ends, ""
    accounts, short = [], []
    need_time = budget.time_reserve(ctx)
    if need_time is not None:
        accounts.append(budget.time_account(need_time, left_s, st.budget_seconds))
        if not need_time.covered_by(left_s):
            ends.append("budget_exhausted")
            short.append(accounts[-1])
    need_money = budget.cost_reserve(ctx) if cap is not None else None
    if need_money is not None:
        accounts.append(budget.cost_account(need_money, cap - spent, cap))
        if not need_money.covered_by(cap - spent):
            ends.append("cost_exhausted")
            short.append(accounts[-1])
    return ends, "; ".join(short if ends else accounts)


def _launch_refused(ctx: Ctx, phase: str, e: CostCapReached) -> str:
    """--max-cost refused a launch of the loop's: the loop ends where it stands (cost_exhausted)
    and the controls follow, each checked in turn. An iteration left untrained or unevaluated is
    recorded as skipped with the reason."""
    st = ctx.state
    n = st.iteration if phase in LOOP else 0   # else the baseline: iter_0
    if n >= 1:
        iteration.record_not_launched(ctx, n, str(e))
    st.loop_end, st.loop_limits = "cost_exhausted", ["cost_exhausted"]
    ctx.say(f"{e}; the loop ends: cost_exhausted")
    return after_controls_from(0)


def after_controls_from(k: int) -> str:
    """The phase that runs the k-th control arm, or finalize after the last."""
    return table.CONTROLS[k].name if k < len(table.CONTROLS) else "finalize"


def _checked(ctx: Ctx, n: int, outcome: str, on_ok: str) -> str:
    """After a check of the teacher's data (the gate, the probe): "ok" goes on, "retry" goes
    back to the teacher, "skip" records the iteration as skipped and returns to the gate."""
    if outcome == "retry":
        return "weakness"
    if outcome == "skip":
        iteration.record_skip(ctx, n)
        return "gate"
    return on_ok


def step(ctx: Ctx, phase: str) -> str:
    """Run one phase and return the next one."""
    try:
        return _step(ctx, phase)
    except CostCapReached as e:
        if phase != "baseline" and phase not in LOOP:
            raise   # a control records its own (driver/phases/controls.py)
        return _launch_refused(ctx, phase, e)


def _step(ctx: Ctx, phase: str) -> str:
    n = ctx.state.iteration
    if phase == "introspect":
        setup.introspect(ctx)
        return "baseline"
    if phase == "baseline":
        setup.baseline(ctx)
        return "gate"
    if phase == "gate":
        return gate(ctx)
    if phase == "weakness":
        iteration.weakness(ctx, n)
        return "dataset"
    if phase == "dataset":
        return _checked(ctx, n, iteration.dataset(ctx, n), "environment")
    if phase == "environment":
        iteration.environment(ctx, n)
        return "probe"
    if phase == "probe":
        return _checked(ctx, n, iteration.probe(ctx, n), "train")
    if phase == "train":
        try:
            iteration.train_iteration(ctx, n)
        except ArmAborted as e:   # prime-rl's own rule ended it: recorded, never retrained
            iteration.record_abort(ctx, n, e)
            return "gate"
        return "evaluate"
    if phase == "evaluate":
        if not iteration.trained(ctx, n):   # its attempt was retired (a torn eval): train again
            return "train"
        iteration.evaluate_iteration(ctx, n)
        return "gate"
    for k, spec in enumerate(table.CONTROLS):
        if phase == spec.name:
            controls.run_control(ctx, spec)
            return after_controls_from(k + 1)
    if phase == "finalize":
        print(finalize.finalize(ctx), flush=True)
        return "done"
    raise DriverError(f"run.json names an unknown phase {phase!r}")


def _enter(ctx: Ctx, phase: str) -> None:
    h = ctx.state.history
    it = ctx.state.iteration if phase in LOOP else None
    if h and h[-1].phase == phase and h[-1].iteration == it and h[-1].end_ts is None:
        return  # resuming the phase that was interrupted
    h.append(PhaseRecord(phase=phase, iteration=it, start_ts=now()))


def run(ctx: Ctx) -> int:
    """Drive the run to its end. Returns the exit code (0 finished, 3 waiting for the teacher)."""
    st = ctx.state
    if st.phase not in phases():   # before anything is written: run.json stays as it was
        raise UsageError(f"run.json names phase {st.phase!r}, not one of this driver's "
                         f"({', '.join(phases())}). Restore run.json from a backup or start a new run.")
    if st.phase == "done":
        print(finalize.summary_text(ctx), flush=True)
        return 0
    st.status = "running"
    st.reason = None
    ctx.save()
    probe = ctx.trainer.probe()
    if st.probe_prompts and probe is not None and probe.kind == "worker":
        # the probe's warm interpreter imports torch while iter_0 trains, not when it is needed
        worker.get(ctx.trainer.python, torch=True)
    if ctx.dialect.env_kind == "taskset":
        # the taskset scripts' warm interpreter imports verifiers v1 (seconds) in the background
        worker.get(ctx.trainer.python, v1=True)
    while st.phase != "done":
        phase = st.phase
        _enter(ctx, phase)
        ctx.save()
        faults.point(f"phase:{phase}:start")
        try:
            nxt = step(ctx, phase)
        except WaitingForTeacher as w:
            st.status = "waiting_teacher"
            st.reason = f"waiting for the teacher: read {w.brief_path}"
            ctx.save()
            ctx.say(f"[teacher] brief written: {w.brief_path}\n"
                    f"Write the files it asks for, then: driver resume {ctx.rd.path}")
            return 3
        except DriverError as e:
            if st.status != "aborted":
                st.status = "failed"
            st.reason = st.reason or str(e).splitlines()[0]
            ctx.save()
            raise
        except OSError as e:
            # a full disk, a vanished mount: every file is written atomically, so what was
            # written before is intact and the phase can simply run again
            st.status, st.reason = "failed", f"{phase}: {e}"
            try:
                ctx.save()
            except OSError:
                pass   # the disk is still full; run.json keeps its previous, valid version
            raise DriverError(f"[{phase}] {e}. {os_error_advice(e)} "
                              f"`driver resume {ctx.rd.path}`.") from None
        except Exception as e:
            # anything else (a library's RuntimeError, a subprocess timeout, a bug) is recorded
            # too, with its traceback beside run.json, so the run never stays "running"
            import traceback

            first = (str(e).splitlines() or [""])[0]
            st.status, st.reason = "failed", f"{phase}: {type(e).__name__}: {first}"
            log = ctx.rd.path / "driver_error.log"
            try:
                ctx.save()
                log.write_text(traceback.format_exc())
            except OSError:
                pass
            raise DriverError(f"[{phase}] unexpected {type(e).__name__}: {first}. The traceback is in "
                              f"{log}; fix the cause, then `driver resume {ctx.rd.path}`.") from None
        faults.point(f"phase:{phase}:end")
        st.history[-1].end_ts = now()
        st.history[-1].outcome = nxt
        st.phase = nxt
        ctx.save()
    return 0
