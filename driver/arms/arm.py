"""One training arm (iter_0, iter_N, a control): where it lives, what it starts from, what it
trains and evaluates with. The jobs on an arm are apart: install.py (its env), train.py (launch,
re-attach, poll, the final-weights eval), evaluate.py (numbers from its eval file)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from driver.context import Ctx
from driver.gates import hparams
from driver.run.model import Knobs
from driver.run.arm_files import ArmFiles


@dataclass
class Arm:
    name: str                 # "iter_0", "iter_3", "run_a", "run_b"
    dir: Path
    resume_step: int | None   # iter_0's final step, or None to start from base
    package: str | None = None   # generated env package name
    dataset: Path | None = None  # rows for the generated env
    # the generated env's name in configs: its package name without the run's tag, so a seed
    # gives the same draws in every run directory
    source_name: str | None = None

    @property
    def out(self) -> Path:
        return self.dir / ArmFiles.OUT

    @property
    def log(self) -> Path:
        return self.dir / ArmFiles.LOG

    def final_step(self, steps_per_run: int) -> int:
        return (self.resume_step or 0) + steps_per_run


def train_knobs(ctx: Ctx, arm: Arm) -> Knobs:
    """The knobs an arm trains with: the run's, with the teacher's hparams.json beside its rows
    (gated with the dataset; a control replaying the best iteration carries it) applied;
    iter_0's, at --iter0-lr where it is set."""
    if arm.name == "iter_0":
        return ctx.knobs.for_iter0()
    return ctx.knobs.model_copy(update=hparams.knob_overrides(hparams.load(arm.dir)))


# What an arm's own config sets, so a canonical config's value for it never applies to an arm:
# its length and checkpoints, its train and eval data, its run and output names, its model.
ARM_OWNED = ("max_steps", "output_dir", "ckpt", "resume", "run", "wandb", "monitors",
             "orchestrator.train.env", "orchestrator.train.source", "orchestrator.eval",
             "model.name")


def shared_settings(canonical: dict) -> dict:
    """A canonical config's settings that every arm trains with (the optimizer and the rest of
    [trainer], [inference], the orchestrator's sampling, buffer, batch, ...): all of it but
    what an arm sets itself (ARM_OWNED)."""
    import copy

    shared = copy.deepcopy(canonical)
    for dotted in ARM_OWNED:
        *head, last = dotted.split(".")
        node = shared
        for k in head:
            node = node.get(k) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    return shared


def config_files(ctx: Ctx, own: Path) -> list[Path]:
    """An arm's launch files: the canonical config's shared settings first (when the run has a
    canonical config; composed by prime-rl's own rules, the arm's file winning where it sets a
    key), then the arm's own config. Without one, every arm is rendered from the same knobs."""
    shared = ctx.rd.path / "canonical_shared.toml"
    return [shared, own] if shared.exists() else [own]


def draw_seeds(ctx: Ctx) -> str | None:
    """How this run's stochastic eval draws are seeded, or None where its evals cannot sample
    them beside the greedy rollout: the embedded trainer samples an eval env of several rollouts
    per example at its draw temperature; current prime-rl takes a sampling override per eval
    source; classic prime-rl has one [orchestrator.eval.sampling] for every eval env, and a
    hosted run's per-env eval sampling is not verified (Backend.eval_draw_seeds)."""
    if ctx.backend is None:   # records only: the draws the run recorded
        return "as recorded" if ctx.state.eval_draws else None
    return ctx.backend.eval_draw_seeds(ctx.dialect.per_source_eval_sampling)


def eval_knobs(ctx: Ctx, arm: Arm | None = None) -> Knobs:
    """The one eval configuration every arm is measured with, controls included, so that each
    arm's n is the n of its lift: the run's knobs (a teacher's hparams.json changes its
    iteration's training only), with no draws where the backend cannot sample them."""
    if ctx.knobs.eval_draws and draw_seeds(ctx) is None:
        return ctx.knobs.model_copy(update={"eval_draws": 0})
    return ctx.knobs


def expected_eval_rows_by_split(ctx: Ctx, arm: Arm) -> dict[str, int]:
    """Rows of the final eval file per split ("eval", "selection", and each one's draws,
    "eval_draws", "selection_draws"): every eval env block the configs carry (the eval split,
    the selection split when the hub env has one, and their draws under --eval-draws), as the
    dialect renders them."""
    rows = {"eval": 0, "selection": 0, "eval_draws": 0, "selection_draws": 0}
    draws = {name: f"{split}_draws" for split, name in ctx.dialect.draws_envs.items()}
    for b in ctx.dialect.eval_env_blocks(ctx.hub, eval_knobs(ctx, arm)):
        split = draws.get(b.get("name")) or (
            "selection" if b.get("name") == ctx.dialect.selection_env else "eval")
        rows[split] += b["num_examples"] * b.get("rollouts_per_example", b.get("group_size", 1))
    return rows


def expected_eval_rows(ctx: Ctx, arm: Arm) -> int:
    """Rows of the final eval file: every split's (expected_eval_rows_by_split)."""
    return sum(expected_eval_rows_by_split(ctx, arm).values())


def eval_rows_complete(rows: int, expected: int, dropped: int) -> bool:
    """An eval file of `rows` rows measures its arm: it holds all `expected`, or (classic
    prime-rl leaves out an eval rollout that raised, an env-server timeout, and its log says
    how many: the dialect's dropped_eval_rollouts) it is short by exactly the `dropped` the log
    accounts for, and holds some row. Those are errored episodes of the arm (evaluate counts
    them), never a reason to retrain it; a file short by anything else is incomplete."""
    return rows >= expected or (rows > 0 and dropped > 0 and rows + dropped == expected)
