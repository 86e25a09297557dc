"""Eval aggregation: the only code that opens eval rollout files.

It keeps numeric fields only (`reward`, `metrics.*`, `example_id`); prompt, completion, info and
answer of an eval row are dropped the moment a line is parsed and are never returned, printed or
written anywhere.
"""
from __future__ import annotations

import math
from pathlib import Path

from driver.errors import DriverError
from driver.run.files import iter_jsonl
from rl_contract import rows
from rl_contract.classic import SUCCESS_THRESHOLD   # a rollout passes at a reward >= this

IMPROVED, FLAT, REGRESSED, COLLAPSED = "improved", "flat", "regressed", "collapsed"
# The naming rule for populations: an env labels each eval row's population with zero-weight
# metrics named `population_<NAME>`, 1 for the row's own population and 0 for the others
# (StockArithmetic: population_ID50, population_OOD100). Accuracy is split by population only
# when every row names exactly one; the driver knows no population by name.
POPULATION_PREFIX = "population_"


def population_of(metrics: dict) -> str | None:
    """The one population a row's metrics name, or None when they name none or several."""
    named = [k[len(POPULATION_PREFIX):] for k, v in metrics.items()
             if k.startswith(POPULATION_PREFIX) and len(k) > len(POPULATION_PREFIX)
             and v >= 0.5]
    return named[0] if len(named) == 1 else None


def _numeric_view(row: dict) -> dict:
    metrics = row.get("metrics") or {}
    return {   # numbers and labels only: a prompt, completion, answer or info never leaves here
        "example_id": row.get("example_id"),
        "env_name": row.get("env_name"),   # the config's own label for the eval env
        # verifiers' `error`: the rollout failed (a model or env-server error), not the student
        "errored": row.get("error") is not None,
        "reward": float(row.get("reward", 0.0) or 0.0),
        "metrics": {k: float(v) for k, v in metrics.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)},
    }


def aggregate(eval_file: Path, selection_env: str | None = None, view=None, *,
              selection_expected: bool = False, unique_ids: bool = False,
              draws_envs: dict[str, str] | None = None) -> dict:
    """The eval split's numbers; rows of the hub's selection split (labelled by the env name
    `selection_env` or by the selection metric, rl_contract.rows) are summarized apart under
    "selection", and each split's stochastic draws (rows of the env named for it in
    `draws_envs`, several per example) under its "draws" (draws_summary). `view` cuts one parsed line to its numbers (the dialect's, for rows that are
    not classic rollout rows). Rows that break the row contract (no example id, a selection
    split the configs asked for but no row labelled as its, ids repeating within a split of one
    rollout per example) stop here rather than mix splits or pair the wrong examples."""
    view = view or _numeric_view
    drawn = {name: split for split, name in (draws_envs or {}).items()}
    path = Path(eval_file)
    if not path.exists():
        raise DriverError(f"eval file missing: {path}. The trainer did not write its final eval; "
                          "check its log, then `driver resume` retrains this arm.")
    views = []
    for n, row in iter_jsonl(path):   # each row is cut to its numbers the moment it is parsed
        if not isinstance(row, dict):
            raise DriverError(f"eval file {path} line {n} is not JSON (partial write?). "
                              "`driver resume` retrains this arm.")
        v = view(row)
        chosen = (selection_env is not None and v.get("env_name") == selection_env) or \
            v["metrics"].get(rows.SELECTION_METRIC, 0.0) >= 0.5
        v["split"] = "selection" if chosen else "eval"
        if v.get("env_name") in drawn:   # a draw (its env labels it as its split's too)
            v["split"] = drawn[v["env_name"]] + "_draws"
        views.append(v)
    broken = rows.problems(views, selection_expected=selection_expected,
                           unique_ids=unique_ids)
    if broken:
        raise DriverError(f"eval file {path} breaks the row contract (rl_contract/rows.py): "
                          + "; ".join(broken) + ". The trainer wrote rows the driver cannot "
                          "measure safely; check the eval configs (iter_0's eval_overlay.toml or "
                          "the arm's rl.toml) and the trainer's version, then `driver resume` "
                          "re-evaluates this arm.")
    # an errored episode (an infrastructure error: no answer was scored) is counted apart,
    # never as a wrong answer: accuracy and the paired tests are over the scored examples
    report = [v for v in views if v["split"] == "eval" and not v.get("errored")]
    errored = sum(1 for v in views if v["split"] == "eval" and v.get("errored"))
    if not report:
        raise DriverError(f"eval file {path} has no scored row ({errored} errored). `driver "
                          "resume` retrains this arm.")
    summary = {**_summarize(report), "n_errored": errored}
    chosen = [v for v in views if v["split"] == "selection" and not v.get("errored")]
    if chosen:
        sel = _summarize(chosen)
        summary["selection"] = {k: sel[k] for k in ("eval_acc", "n_eval", "correct_by_example")}
        summary["selection"]["n_errored"] = sum(1 for v in views if v["split"] == "selection"
                                                and v.get("errored"))
    for split, into in (("eval", summary), ("selection", summary.get("selection"))):
        drawn_rows = [v for v in views if v["split"] == f"{split}_draws"]
        if drawn_rows and into is not None:
            into["draws"] = draws_summary(drawn_rows)
    return summary


def draws_summary(views: list[dict]) -> dict:
    """A split's stochastic draws (seed 003's second measurement): the per-draw success rate
    over every scored draw (not the success of the best of an example's draws), and each
    example's mean over its own draws, which the paired test compares (stats.paired_means).
    Errored draws are counted apart, as errored greedy rollouts are."""
    scored = [v for v in views if not v.get("errored")]
    by_example: dict[str, list[int]] = {}
    pops: dict[str, list[int]] = {}
    for v in scored:
        ok = _passed(v)
        by_example.setdefault(str(v["example_id"]), []).append(ok)
        pop = population_of(v["metrics"])
        if pop is not None:
            pops.setdefault(pop, []).append(ok)
    n = sum(len(x) for x in by_example.values())
    out = {"acc": sum(sum(x) for x in by_example.values()) / n if n else None, "n": n,
           "n_examples": len(by_example), "n_errored": len(views) - len(scored),
           "per_example": max((len(x) for x in by_example.values()), default=0),
           "mean_by_example": {k: sum(x) / len(x) for k, x in sorted(by_example.items())}}
    if pops and sum(len(x) for x in pops.values()) == n:
        out["acc_by_population"] = {k: sum(x) / len(x) for k, x in sorted(pops.items())}
    return out


def _passed(v: dict) -> int:
    ok = v["metrics"].get("is_correct")
    return int(ok >= SUCCESS_THRESHOLD) if ok is not None else int(v["reward"] >= SUCCESS_THRESHOLD)


def _summarize(views: list[dict]) -> dict:
    oks = []
    by_example: dict[str, list[int]] = {}
    lenient: list[float] = []
    for v in views:
        ok = _passed(v)
        oks.append(ok)
        by_example.setdefault(str(v["example_id"]), []).append(ok)
        if "lenient_correct" in v["metrics"]:
            lenient.append(v["metrics"]["lenient_correct"])
    n = len(views)
    summary = {
        "eval_acc": sum(oks) / n,
        "eval_reward_mean": sum(v["reward"] for v in views) / n,
        "n_eval": n,
        # several rollouts of one example: it counts as correct when most of them are
        "correct_by_example": {k: int(2 * sum(c) > len(c)) for k, c in sorted(by_example.items())},
    }
    if lenient:
        summary["eval_lenient_acc"] = sum(lenient) / len(lenient)
    pop_of = [population_of(v["metrics"]) for v in views]
    if all(pop is not None for pop in pop_of):
        pops: dict[str, list[int]] = {}
        for pop, ok in zip(pop_of, oks):
            pops.setdefault(pop, []).append(ok)
        summary["acc_by_population"] = {k: sum(x) / len(x) for k, x in sorted(pops.items())}
        summary["n_by_population"] = {k: len(x) for k, x in sorted(pops.items())}
        summary["population_by_example"] = {
            str(v["example_id"]): pop for v, pop in zip(views, pop_of)}
    return summary


GREEDY, DRAWS = "greedy", "draws"   # the two measurements of an arm (seed 003)


def deciding_measure(entries: list[dict]) -> str:
    """The measurement choices are made on: the per-draw success rate over the stochastic draws
    (the less noisy of seed 003's two: k responses per example where greedy has one) when every
    evaluated arm has it, on each split it is chosen on; else greedy pass@1."""
    measured = [e for e in entries if e.get("eval_acc") is not None]
    if measured and all(e.get("draws_acc") is not None and (
            e.get("selection_acc") is None or e.get("selection_draws_acc") is not None)
            for e in measured):
        return DRAWS
    return GREEDY


def selection_score(entry: dict, measure: str = GREEDY) -> float:
    """What arms are compared on when choosing (the best iteration, the recommended checkpoint,
    the accuracy a teacher calibrates on): the selection split's accuracy when the hub env has
    one, else the eval split's (and the summary then says so), on `measure`."""
    if measure == DRAWS:
        sel = entry.get("selection_draws_acc")
        return sel if sel is not None else entry["draws_acc"]
    sel = entry.get("selection_acc")
    return sel if sel is not None else entry["eval_acc"]


def verdict(acc: float, prev_acc: float | None, iter0_acc: float | None,
            n: int | None = None) -> str | None:
    """The seed's verdict: improved (Δ >= +0.01), flat, regressed (Δ <= -0.01), collapsed (a
    drop of more than half of iter_0's accuracy). With the examples behind both accuracies (n),
    "collapsed" also needs the drop to be resolved: the two accuracies' Wilson 95% intervals
    apart. 1 -> 0 of 100 is a regression the test cannot tell from noise, not a collapse."""
    if prev_acc is None:
        return None
    if iter0_acc is not None and iter0_acc > 0 and acc < iter0_acc * 0.5 and (
            n is None or wilson_interval(round(acc * n), n)[1]
            < wilson_interval(round(iter0_acc * n), n)[0]):
        return COLLAPSED
    delta = acc - prev_acc
    if delta >= 0.01 - 1e-12:
        return IMPROVED
    if delta <= -0.01 + 1e-12:
        return REGRESSED
    return FLAT


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))
