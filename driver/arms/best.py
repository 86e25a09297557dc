"""The best iteration: chosen here (reads only), written to best_iter.json by finalize alone."""
from __future__ import annotations

from driver.analysis import evaluation
from driver.context import Ctx
from driver.envs.packages import package_name
from driver.run.files import atomic_write_json, read_json
from driver.run.arm_files import ArmFiles


def best_iteration(ctx: Ctx) -> dict | None:
    """The best evaluated iteration (>= 1) and its artifacts' paths; reads only."""
    iters = [m for m in ctx.rd.load_metrics()["iters"]
             if m.get("iter", 0) >= 1 and m.get("eval_acc") is not None]
    if not iters:
        return None
    # chosen on the selection split when the hub env has one, so that the eval split it is
    # then reported on played no part in choosing it; on the draws where every arm has them
    measure = evaluation.deciding_measure(iters)
    best = max(iters, key=lambda m: (evaluation.selection_score(m, measure), -m["iter"]))  # ties: the earliest
    d = ctx.iter_dir(best["iter"])
    rel = d.relative_to(ctx.rd.path)  # paths relative to the run directory: it can move
    record = {"best_iter": best["iter"], "eval_acc": best["eval_acc"],
              "chosen_on": "selection" if best.get("selection_acc") is not None else "eval",
              "selection_acc": best.get("selection_acc"), "measure": measure,
              "dataset": str(rel / ArmFiles.DATASET),
              "env_dir": str(rel / package_name(ctx.state.dataset, f"iter_{best['iter']}", ctx.state.env_tag)),
              "rl_toml": str(rel / ArmFiles.CONFIG)}
    return record


def record_best(ctx: Ctx) -> dict | None:
    """best_iteration, written to best_iter.json (by finalize only; `report` and `status` read)."""
    record = best_iteration(ctx)
    path = ctx.rd.path / "best_iter.json"
    if record is not None and (not path.exists() or read_json(path) != record):
        atomic_write_json(path, record)
    return record
