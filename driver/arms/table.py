"""The run's arms in one table: every iteration is `iter_N`; every control is one CONTROLS entry.

A control answers one question about the best iteration (the loop runs them in this order after
its last iteration, inside the run's budget, which the loop's gate kept in reserve for them): the
loop's phases, both dialects' configs, the controls phase and the summary all read this table, so
a new control is one entry plus, where its rows come from somewhere new, one row source.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from driver.arms.arm import Arm
from driver.backends import process
from driver.context import Ctx
from driver.envs.introspect import UnscorableRows, sample_train_rows
from driver.envs.packages import package_name
from driver.errors import ControlSkipped
from driver.run.files import atomic_write_text, read_json
from driver.run.arm_files import ArmFiles

# writes a control's training rows to `dest` (its dataset.jsonl; files that ride with the rows,
# such as aux_rewards.py, beside it) given the best iteration's record; returns what they are
RowSource = Callable[[Ctx, dict, Path], str]
REPLAYED = (ArmFiles.AUX_REWARDS, ArmFiles.HPARAMS)   # ride with a replayed dataset
SKIPPED = "skipped, "   # how a skipped control's record in run.json's phase4_errors begins


def carry_best_settings(ctx: Ctx, best: dict, dest: Path) -> list[str]:
    """The best iteration's auxiliary rewards and hparams.json, copied beside a control's rows:
    every control trains with the best iteration's steps and hyperparameters."""
    src = (ctx.rd.path / best["dataset"]).parent
    carried = [name for name in REPLAYED if (src / name).exists()]
    for name in carried:
        atomic_write_text(dest.parent / name, (src / name).read_text(encoding="utf-8"))
    return carried


def replay_best(ctx: Ctx, best: dict, dest: Path) -> str:
    """The best iteration's rows exactly as it trained on them: its dataset, its auxiliary
    rewards and its hparams.json."""
    carried = carry_best_settings(ctx, best, dest)
    atomic_write_text(dest, (ctx.rd.path / best["dataset"]).read_text(encoding="utf-8"))
    return f"iter_{best['best_iter']}'s dataset replayed" + (f" with its {', '.join(carried)}" if carried else "")


def untargeted(ctx: Ctx, best: dict, dest: Path) -> str:
    """As many rows as the best iteration's, with nothing aimed at a weakness, trained with the
    best iteration's auxiliary rewards and hparams.json: the family generator's untargeted
    distribution (in the best iteration's surface style and shares, so wording is not what
    differs) where the env has one, else a seeded resample of the hub's train rows (where the
    hub's reward scores against the env's own state, each carrying its ground truth as the
    iteration's rows did). Rows the hub rubric could not score are no control: ControlSkipped."""
    from generators import family_for

    count = process.count_lines(ctx.rd.path / best["dataset"])
    fam = family_for(ctx.hub)
    carried = carry_best_settings(ctx, best, dest)
    with_settings = f", with iter_{best['best_iter']}'s {', '.join(carried)}" if carried else ""
    if fam is not None and fam.untargeted is not None:
        weakness = ctx.rd.path / Path(best["dataset"]).parent / ArmFiles.WEAKNESS
        spec = read_json(weakness) if weakness.exists() else {}
        kept = {k: spec[k] for k in ("style", "surface") if spec.get(k)}
        # both writers write beside `dest` and rename into place
        fam.untargeted(count, out=str(dest), seed=ctx.state.seed, **kept)
        return f"{count} untargeted rows from {fam.module}.untargeted" + "".join(
            f" ({k} {v})" for k, v in kept.items()) + with_settings
    try:
        sample_train_rows(ctx.trainer.python, ctx.hub, count, f"run_c|{ctx.state.seed}", dest)
    except UnscorableRows as e:
        raise ControlSkipped(f"no untargeted rows the hub rubric can score: {e}") from None
    return f"{count} untargeted rows from a resample of the hub env's train rows" + with_settings


@dataclass(frozen=True)
class ControlArm:
    name: str             # its phase in run.json and its `run` in metrics.json
    directory: str        # under the run directory
    label: str            # its row in the summary table
    purpose: str          # the question it answers, in a sentence's words
    start: Literal["anchor", "base"]   # iter_0's final checkpoint, or the base model
    rows: RowSource
    with_hub_rows: bool = False        # trains on the hub's own train rows beside its own
    compare_with_best: bool = False    # the summary pairs the best iteration against it


CONTROLS: tuple[ControlArm, ...] = (
    ControlArm("run_a", "run_a_best_from_iter0", "run_a (best @iter0)",
               "best dataset replayed from iter_0", "anchor", replay_best),
    ControlArm("run_b", "run_b_combined_from_base", "run_b (real+best @base)",
               "hub train data + best dataset, from the base model", "base", replay_best,
               with_hub_rows=True),
    ControlArm("run_c", "run_c_untargeted_from_iter0", "run_c (untargeted @iter0)",
               "untargeted rows (as many as the best dataset) from iter_0", "anchor", untargeted,
               compare_with_best=True),
)


def control(name: str) -> ControlArm:
    for c in CONTROLS:
        if c.name == name:
            return c
    raise KeyError(f"no control arm {name!r}; the table has {', '.join(c.name for c in CONTROLS)}")


def is_control(name: str) -> bool:
    return any(c.name == name for c in CONTROLS)


def arm_dir(ctx: Ctx, name: str) -> Path:
    """Where an arm lives: iter_N, or its control's directory."""
    return ctx.iter_dir(int(name.split("_")[1])) if name.startswith("iter_") \
        else ctx.rd.path / control(name).directory


def iteration(ctx: Ctx, n: int) -> Arm:
    """Iteration n >= 1: the teacher's rows, from iter_0's checkpoint (the anchor)."""
    d = ctx.iter_dir(n)
    return Arm(f"iter_{n}", d, resume_step=ctx.state.iter_0_step,
               package=package_name(ctx.state.dataset, f"iter_{n}", ctx.state.env_tag),
               dataset=d / ArmFiles.DATASET,
               source_name=package_name(ctx.state.dataset, f"iter_{n}"))


def control_arm(ctx: Ctx, spec: ControlArm) -> Arm:
    d = ctx.rd.path / spec.directory
    return Arm(spec.name, d, resume_step=ctx.state.iter_0_step if spec.start == "anchor" else None,
               package=package_name(ctx.state.dataset, spec.name, ctx.state.env_tag),
               dataset=d / ArmFiles.DATASET,
               source_name=package_name(ctx.state.dataset, spec.name))
