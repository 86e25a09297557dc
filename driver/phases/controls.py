"""Phase 4: the control arms (driver.arms.table.CONTROLS), after the loop, inside the run's budget
(the loop's gate kept their measured time, and cost, in reserve).

Each control trains on rows its table entry names (the best dataset replayed, or rows drawn
without targeting), from iter_0's checkpoint or from the base model, and is evaluated on the
examples every iteration is evaluated on. A control that fails is recorded in run.json's phase4_errors and the run
goes on; so is a control that --max-cost does not let start (recorded as skipped, never
submitted).
"""
from __future__ import annotations

from pathlib import Path

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
from driver.run.files import atomic_write_json, atomic_write_text, read_json


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
        made = arm.dir / ROWS_MADE
        if not arm.dataset.exists():   # written last by every row source: present means complete
            atomic_write_text(made, spec.rows(ctx, best, arm.dataset))
            ctx.say(f"[{spec.name}] {made.read_text()}")
        if spec.compare_with_best and not (arm.dir / ArmFiles.GATE_REPORT).exists():
            held_to_gate(ctx, spec.name, arm.dir, best)
        install_env(ctx, arm)
        cfg = write_config(ctx, arm, spec.purpose, arm.dir / ArmFiles.CONFIG,
                           with_hub_rows=spec.with_hub_rows)
        train(ctx, arm, config_files(ctx, cfg), ["--output-dir", str(arm.out)])
        own = process.count_lines(arm.dataset)
        # one row count per arm, the same in metrics.json and the table: a control that trains
        # on the hub's train rows beside its own (run B) counts both, and says which are which
        hub_rows = int(ctx.hub.get("train_size") or 0) if spec.with_hub_rows else 0
        extra = {"rows_from": {"hub_train": hub_rows, "dataset": own}} if hub_rows else None
        summary = evaluate(ctx, arm, rows=own + hub_rows, extra=extra)
    except StillRunning:
        raise   # the next control never starts beside a launch that may still run
    except (ControlSkipped, CostCapReached) as e:
        _record_skip(ctx, spec.name, e.reason)
        return
    except (DriverError, RuntimeError, ValueError) as e:
        _record_failure(ctx, spec.name, str(e).splitlines()[0])
        return
    gate = arm.dir / ArmFiles.GATE_REPORT
    ctx.rd.upsert_metric("controls", "run", metrics_entry(
        summary, run=spec.name, best_iter=best["best_iter"],
        rows_made=made.read_text() if made.exists() else None,
        gate_differs=read_json(gate)["differs"] if gate.exists() else None))
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


# how a control's rows were made (its row source's own sentence), kept for the summary
ROWS_MADE = "rows_made.txt"
# the gate's lines that do not concern aim: a control's untargeted rows are held to these as
# the teacher's are (the wording rules among them); the others (domains, buckets, features,
# difficulty, skeletons) describe what a dataset aims at, which untargeted rows by design do not
UNAIMED_LINES = ("well_formed", "count", "duplicates", "clones", "prior_clones", "accurate",
                 "decontam")


def held_to_gate(ctx: Ctx, name: str, arm_dir: Path, best: dict) -> list[str]:
    """Hold a control's rows to the teacher's gate on the lines that do not concern aim
    (UNAIMED_LINES), against the iterations' datasets as prior rows: the lines the teacher's
    rows passed and these do not are every way, besides aim, that the control's rows differ
    from the best iteration's. Recorded in its gate_report.json (`differs`) for the summary;
    a control is never refused for them (it answers whether aim mattered, as made)."""
    from driver.envs import describe
    from driver.gates import accuracy, decontam, rules
    from driver.gates.dataset import check
    from driver.gates.weakness import load as load_weakness

    dataset = arm_dir / ArmFiles.DATASET
    best_dir = ctx.rd.path / Path(best["dataset"]).parent
    weakness = best_dir / ArmFiles.WEAKNESS
    prior = [ctx.iter_dir(k) / ArmFiles.DATASET for k in range(1, ctx.state.iteration + 1)
             if (ctx.iter_dir(k) / ArmFiles.DATASET_RECORD).exists()]
    try:
        scored = accuracy.score_hub_rows(ctx.trainer.python, ctx.hub, dataset)
    except RuntimeError as e:
        scored = None
        ctx.say(f"[{name}] its rows could not be scored by the hub rubric ({e}): the gate's "
                "accuracy line is recorded as failed")
    report = check(dataset, load_weakness(weakness) if weakness.exists() else {}, prior,
                   decontam.cached_fingerprints(ctx.rd.path, ctx.trainer.python, ctx.hub), scored,
                   multi_turn=describe.multi_turn(ctx.hub))
    names = {rules.LINE[k].name for k in UNAIMED_LINES}
    lines = [ln for ln in report.to_json()["lines"] if ln["name"] in names]
    differs = [f"{ln['name']}: {_short(ln['detail'])}" if ln.get("detail") else ln["name"]
               for ln in lines if not ln["ok"]]
    atomic_write_json(arm_dir / ArmFiles.GATE_REPORT, {"lines": lines, "differs": differs,
                                                       "held_to": list(UNAIMED_LINES)})
    ctx.say(f"[{name}] held to the teacher's gate (lines not about aim): "
            + ("passes every one" if not differs else "differs on " + "; ".join(differs)))
    return differs


def _short(detail: str, limit: int = 160) -> str:
    return detail if len(detail) <= limit else detail[:limit - 3].rstrip() + "..."
