"""Phase 4: the control arms (driver.arms.table.CONTROLS), after the loop, inside the run's budget
(the loop's gate kept their measured time, and cost, in reserve).

Each control trains on rows its table entry names (the best dataset replayed, or rows drawn
without targeting), from iter_0's checkpoint or from the base model, and is evaluated on the
hub's whole eval split. A control that fails is recorded in run.json's phase4_errors and the run
goes on; so is a control that --max-cost does not let start (recorded as skipped, never
submitted).
"""
from __future__ import annotations

from driver.arms import budget, table
from driver.arms.arm import config_files
from driver.arms.best import best_iteration
from driver.arms.evaluate import evaluate, metrics_entry
from driver.arms.install import install_env
from driver.arms.render import write_config
from driver.arms.train import train
from driver.backends import process
from driver.context import Ctx
from driver.errors import ControlSkipped, CostCapReached, DriverError, StillRunning
from driver.reporting import scratchpad
from driver.run.arm_files import ArmFiles


def run_control(ctx: Ctx, spec: table.ControlArm) -> None:
    best = best_iteration(ctx)
    if best is None:
        _record_skip(ctx, spec.name, "no iteration produced an evaluated model")
        return
    arm = table.control_arm(ctx, spec)
    arm.dir.mkdir(parents=True, exist_ok=True)
    try:
        if ctx.state.trainer is None and not (arm.dir / ArmFiles.TRAIN_DONE).exists():
            # nothing of it in flight or trained yet: its launches, together, must fit the cap
            budget.check_control(ctx, spec.name)
        if not arm.dataset.exists():   # written last by every row source: present means complete
            ctx.say(f"[{spec.name}] {spec.rows(ctx, best, arm.dataset)}")
        install_env(ctx, arm)
        cfg = write_config(ctx, arm, spec.purpose, arm.dir / ArmFiles.CONFIG,
                           with_hub_rows=spec.with_hub_rows)
        train(ctx, arm, config_files(ctx, cfg), ["--output-dir", str(arm.out)])
        summary = evaluate(ctx, arm, rows=process.count_lines(arm.dataset))
    except StillRunning:
        raise   # the next control never starts beside a launch that may still run
    except (ControlSkipped, CostCapReached) as e:
        _record_skip(ctx, spec.name, e.reason)
        return
    except (DriverError, RuntimeError, ValueError) as e:
        _record_failure(ctx, spec.name, str(e).splitlines()[0])
        return
    ctx.rd.upsert_metric("controls", "run", metrics_entry(summary, run=spec.name,
                                                           best_iter=best["best_iter"]))
    scratchpad.render(ctx)


def _record_failure(ctx: Ctx, which: str, what: str) -> None:
    msg = f"{which}: {what}"
    ctx.control_failed(msg)
    ctx.say(f"[{which}] failed, recorded in run.json phase4_errors: {msg}")


def _record_skip(ctx: Ctx, which: str, why: str) -> None:
    """A control not run, and why: recorded beside the failures (`<name>: skipped, <why>`), said
    as a skip, and named in the summary."""
    msg = f"{which}: {table.SKIPPED}{why}"
    ctx.control_failed(msg)
    ctx.say(f"[{which}] skipped: {why}")

