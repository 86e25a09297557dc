"""The run's budget against what the run has measured: driver.run.reserve's arithmetic on this
run's phase history (run.json) and cost ledger. The loop's gate asks for the reserve of one more
iteration and the controls; every launch, and every control before it starts, is checked against
--max-cost here (CostCapReached)."""
from __future__ import annotations

from driver.arms import table
from driver.arms.arm import Arm, expected_eval_rows
from driver.arms.progress import duration
from driver.backends import billed_launches, spent_usd
from driver.context import Ctx
from driver.errors import CostCapReached
from driver.run import reserve

# how a message names a launch of each kind (the ledger's kinds)
LAUNCH_WORDS = {"train": "training run", "eval": "final-weights eval", "probe": "gradient probe"}


def _eval_rows(ctx: Ctx, control: bool) -> int:
    """The eval rows an arm samples: --eval-examples of each split, greedy and drawn, the same
    for an iteration and a control."""
    return expected_eval_rows(ctx, Arm("control" if control else "iteration", ctx.rd.path,
                                       resume_step=None))


def _train_rollouts(ctx: Ctx) -> int:
    return ctx.state.steps_per_run * ctx.state.batch_size


def time_reserve(ctx: Ctx) -> reserve.Reserve | None:
    """One more iteration and every control, at the times the phase history measured."""
    st = ctx.state
    arms = reserve.measured(st.history, iter_0_trained=st.iter_0_source == "trained")
    scale = reserve.control_scale(_train_rollouts(ctx), _eval_rows(ctx, False), _eval_rows(ctx, True))
    controls = reserve.control_seconds(st.history, (c.name for c in table.CONTROLS))
    return reserve.time_reserve(arms, len(table.CONTROLS), scale, controls)


def _billed(ctx: Ctx) -> list[reserve.Billed]:
    # the ledger names each launch's arm by its directory: iter_N, or a control's
    return [reserve.Billed(str(e.get("kind")), float(e.get("cost_usd") or 0.0),
                           control=not str(e.get("arm", "")).startswith("iter_"))
            for e in billed_launches(ctx.rd.path)]


def _cost_scales(ctx: Ctx) -> dict[str, float]:
    """A control's launch over an iteration's, kind by kind: its training run samples the same
    train rollouts and eval rows (where the dialect evaluates inside it), its final-weights
    eval the same rows: 1 today, kept as a ratio so that an arm of another shape is priced."""
    it, ctl = _eval_rows(ctx, False), _eval_rows(ctx, True)
    inside = 0 if ctx.dialect.separate_final_eval else 1
    return {"train": reserve.control_scale(_train_rollouts(ctx), inside * it, inside * ctl),
            "eval": reserve.control_scale(0, it, ctl)}


def cost_reserve(ctx: Ctx) -> reserve.Reserve | None:
    """One more iteration and every control, at what the run's launches were billed."""
    return reserve.cost_reserve(_billed(ctx), len(table.CONTROLS), _cost_scales(ctx))


def check_launch(ctx: Ctx, arm: str, kind: str) -> None:
    """Just before a launch of `kind` (train, eval, probe) for `arm` is submitted: under
    --max-cost, refuse it where the run has spent the cap, or where what it has spent plus the
    launch's estimate (the costliest billed launch of its kind) would pass it."""
    cap = ctx.state.max_cost_usd
    if cap is None:
        return
    control = table.is_control(arm)
    estimate = reserve.launch_cost(_billed(ctx), kind, control=control,
                                   scale=_cost_scales(ctx).get(kind, 1.0) if control else 1.0)
    what = LAUNCH_WORDS[kind]
    why = reserve.launch_refusal(spent_usd(ctx.rd.path), cap, estimate, f"its {what}")
    if why:
        raise CostCapReached(arm, what, why)


def check_control(ctx: Ctx, name: str) -> None:
    """Before a control submits its first launch: under --max-cost, refuse it where its training
    and eval together are estimated to take the run past the cap, so that no control is trained
    and then left unevaluated by the cap."""
    cap = ctx.state.max_cost_usd
    if cap is None:
        return
    estimate = reserve.arm_cost(_billed(ctx), reserve.CONTROL_KINDS, control=True,
                                scales=_cost_scales(ctx))
    why = reserve.launch_refusal(spent_usd(ctx.rd.path), cap, estimate, "its training and eval")
    if why:
        raise CostCapReached(name, "its training run", why)


def time_account(r: reserve.Reserve, left_s: float, budget_s: float) -> str:
    """The gate's time reserve, in words."""
    verb = "covers" if r.covered_by(left_s) else "would not cover"
    return (f"{duration(left_s)} left of the {duration(budget_s)} budget {verb} one more iteration "
            f"(about {duration(r.iteration)}: {r.basis}) and the {r.controls} controls (about "
            f"{duration(r.control)} each)")


def cost_account(r: reserve.Reserve, left_usd: float, cap: float) -> str:
    """The gate's money reserve, in words."""
    verb = "covers" if r.covered_by(left_usd) else "would not cover"
    return (f"${left_usd:.2f} left of --max-cost ${cap:.2f} {verb} one more iteration (about "
            f"${r.iteration:.2f}) and the {r.controls} controls (about ${r.control:.2f} each), "
            f"at {r.basis}")
