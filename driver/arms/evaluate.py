"""Measuring an arm: its final eval file cut to numbers (eval_summary.json), its train reward
trajectory, and the metrics.json entry built from them; once measured, its eval files are sealed
(driver/arms/seal.py)."""
from __future__ import annotations

from driver import faults
from driver.analysis import evaluation
from driver.dialects.classic import DRAW_TEMPERATURE
from driver.arms.arm import Arm, draw_seeds, eval_knobs, expected_eval_rows_by_split
from driver.arms.seal import seal_arm, set_aside_sealed
from driver.arms.train import retire_failed
from driver.run.arm_files import ArmFiles
from driver.backends import process
from driver.context import Ctx
from driver.errors import DriverError
from driver.run.files import atomic_write_json, read_json


def eval_config(ctx: Ctx, arm: Arm) -> dict:
    """The eval configuration the arm was measured with, as its config rendered it: the same
    completion limit, sampling and examples for every arm (a teacher's hparams.json never
    reaches an eval), and the stochastic draws per example beside the greedy rollout."""
    knobs = eval_knobs(ctx, arm)
    cfg = {"max_completion_tokens": knobs.max_completion_tokens,
           "temperature": knobs.eval_temperature,
           "draws": knobs.eval_draws,
           "examples": {b.get("name") or "eval": b["num_examples"]
                        for b in ctx.dialect.eval_env_blocks(ctx.hub, knobs)},
           "measures": measures(ctx)}
    if knobs.eval_draws:
        cfg["draw_temperature"] = DRAW_TEMPERATURE
        cfg["draw_seeds"] = draw_seeds(ctx)
    return cfg


def measures(ctx: Ctx) -> str:
    """What an arm's final eval measures, as the trainer's source says (the summary prints it):
    classic prime-rl's in-run eval sees the policy while the last updates land; the current
    generation's `evals` loads the final broadcast alone; the embedded trainer evaluates after
    its last update, in its one process."""
    if ctx.state.backend == "local":
        return "the arm's final weights alone: the embedded trainer evaluates after its last update"
    return ctx.dialect.final_eval_measures


def evaluate(ctx: Ctx, arm: Arm, rows: int | None, extra: dict | None = None) -> dict:
    """Aggregate the final eval (numbers only) into eval_summary.json and metrics.json."""
    summary_path = arm.dir / ArmFiles.EVAL_SUMMARY
    final = arm.final_step(ctx.state.steps_per_run)
    if summary_path.exists():
        summary = read_json(summary_path)
    else:
        try:
            # the driver renders one rollout per eval example, and a selection split where
            # the hub env has one: the row contract is checked against both
            summary = evaluation.aggregate(ctx.dialect.eval_file(arm.out, final),
                                           selection_env=ctx.dialect.selection_env,
                                           view=ctx.dialect.eval_view,
                                           selection_expected=bool(ctx.hub.get("selection")),
                                           unique_ids=True, draws_envs=ctx.dialect.draws_envs)
        except DriverError:
            # a missing or torn eval file cannot be repaired by reading it again: retire this
            # attempt (kept beside the next, its eval sealed) so that resuming trains the arm
            # afresh, or, where the eval is a launch of its own, evaluates the trained weights
            # afresh
            if ctx.dialect.separate_final_eval:
                log = arm.dir / ArmFiles.FINAL_EVAL_LOG
                for path in (ctx.dialect.final_eval_dir(arm.out, final), log, process.rc_path(log)):
                    set_aside_sealed(ctx.dialect, path)
            else:
                (arm.dir / ArmFiles.TRAIN_DONE).unlink(missing_ok=True)
                retire_failed(ctx, arm)
            raise
        _count_dropped(ctx, arm, summary)
        summary.update(_train_reward(ctx, arm))
        summary["checkpoint"] = str(ctx.dialect.checkpoint_trees(arm.out, final)[1].relative_to(ctx.rd.path))
        summary["final_step"] = final
        summary["rows"] = rows
        summary["eval_config"] = eval_config(ctx, arm)
        summary.update(_billed(ctx, arm))
        summary.update(extra or {})
        faults.point("evaluate:before-summary")
        atomic_write_json(summary_path, summary)
        ctx.say(f"[{arm.name}] evaluated: " + _accuracy_line(summary))
    # measured: from here on its eval files hold numbers only (on every call, so that a driver
    # killed while sealing finishes on resume)
    seal_arm(ctx, arm)
    faults.point("evaluate:after-summary")
    return summary


def _count_dropped(ctx: Ctx, arm: Arm, summary: dict) -> None:
    """The eval rollouts prime-rl left out of the file because they raised (classic: its log
    says how many, not of which env; train.py measured the arm because they account for the
    gap exactly) are errored episodes, counted apart like any errored row: each split is given
    what the file lacks of its configured rows, up to the log's count. How many were counted is
    kept as `eval_dropped`."""
    dropped = ctx.dialect.dropped_eval_rollouts(arm.out)
    if not dropped:
        return
    want = expected_eval_rows_by_split(ctx, arm)
    left = dropped
    for split, s in (("eval", summary), ("selection", summary.get("selection"))):
        if not s:
            continue
        missing = min(left, max(0, want[split] - s["n_eval"] - s.get("n_errored", 0)))
        s["n_errored"] = s.get("n_errored", 0) + missing
        left -= missing
    if dropped - left:
        summary["eval_dropped"] = dropped - left
        ctx.say(f"[{arm.name}] {dropped - left} eval rollout(s) raised in prime-rl and are not in "
                "the eval file (its orchestrator log says so): counted as errored episodes")


def _accuracy_line(summary: dict) -> str:
    """"eval 34.5% [28.3, 41.2] (n = 200); selection 31.0% [...] (n = 200)": numbers only."""
    parts = []
    for label, s in (("eval", summary), ("selection", summary.get("selection"))):
        if s and s.get("n_eval"):
            lo, hi = evaluation.wilson_interval(round(s["eval_acc"] * s["n_eval"]), s["n_eval"])
            parts.append(f"{label} {100 * s['eval_acc']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] "
                         f"(n = {s['n_eval']})")
            d = s.get("draws") or {}
            if d.get("n"):
                parts[-1] += f", draws {100 * d['acc']:.1f}% (n = {d['n']})"
    return "; ".join(parts) or "no eval rows"


def _train_reward(ctx: Ctx, arm: Arm) -> dict:
    """Mean train reward per trainer step (the trajectory), from the launch's own train rows:
    each of its steps, keyed by the trainer step it fed (F+1 .. M), never a window the run did
    not train on; episodes that errored are counted apart, never as a reward of 0."""
    start, final = arm.resume_step or 0, arm.final_step(ctx.state.steps_per_run)
    per_step, errored, last_rows = {}, 0, None
    for s in ctx.dialect.train_steps(arm.out, start, final):
        rows = list(ctx.dialect.train_rows(arm.out, s))
        errored += sum(1 for r in rows if r.get("errored"))
        rewards = [float(r.get("reward", 0.0)) for r in rows if not r.get("errored")]
        if rewards:
            per_step[str(ctx.dialect.trained_step(s))] = sum(rewards) / len(rewards)
            last_rows = (s, [r for r in rows if not r.get("errored")])
    mean = sum(per_step.values()) / len(per_step) if per_step else None
    out = {"train_reward_mean": mean, "train_reward_by_step": per_step, "train_errored": errored}
    if last_rows:   # does the last step still carry gradient? (driver diagnose's numbers)
        from driver.analysis import diagnose

        last = ctx.dialect.trained_step(last_rows[0])
        try:
            d = diagnose.diagnose(last_rows[1])
            out["train_diagnose"] = {"step": last, **{k: d[k] for k in (
                "groups", "uniform_groups", "live_fraction_outcome", "live_fraction_reward",
                "effort_kind", "effort_correlation", "truncation_rate", "truncation_causes",
                "notes", "verdict", "reasons") if k in d}}
        except ValueError as e:
            out["train_diagnose"] = {"step": last, "verdict": "n/a", "reasons": [str(e)]}
    return out


def _billed(ctx: Ctx, arm: Arm) -> dict:
    """Where the backend bills its launches (hosted): what the arm's runs cost, failed attempts
    included, and the Hub id its generated env was published under."""
    from driver.backends import arm_cost

    out: dict = {}
    cost = arm_cost(ctx.rd.path, arm.dir.name)
    if cost is not None:
        out["cost_usd"] = cost
    marker = arm.dir / ArmFiles.ENV_INSTALLED
    hub = read_json(marker).get("hub") if marker.exists() else None
    if isinstance(hub, dict) and hub.get("ref"):
        out["env_hub_ref"] = hub["ref"]
    return out


def metrics_entry(summary: dict, **extra) -> dict:
    keep = ("eval_acc", "eval_reward_mean", "n_eval", "n_errored", "eval_lenient_acc", "train_reward_mean",
            "checkpoint", "rows", "rows_from", "final_step", "train_diagnose", "eval_config", "cost_usd",
            "env_hub_ref")
    entry = {k: summary.get(k) for k in keep if k in summary}
    if summary.get("selection"):
        entry["selection_acc"] = summary["selection"]["eval_acc"]
        entry["n_selection"] = summary["selection"]["n_eval"]
        if (summary["selection"].get("draws") or {}).get("n"):
            entry["selection_draws_acc"] = summary["selection"]["draws"]["acc"]
    if (summary.get("draws") or {}).get("n"):
        entry["draws_acc"], entry["n_draws"] = summary["draws"]["acc"], summary["draws"]["n"]
    entry.update(extra)
    return entry
