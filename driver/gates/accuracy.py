"""The ACCURATE pillar, checked by the driver: the hub env's own rubric scores every row's
`info.reasoning` as the completion, against the row's answer and info, and must give its full
reward (the sum of the rubric's positive weights).

The rubric is loaded in the trainer's interpreter (the one that runs the hub env), as
introspection loads it, never in the generator's guarded process: the env-side job `score_rows`
(driver/envside/classic.py, or taskset.py for a v1 taskset) scores. A reward function that raises
is caught by the rubric and scores 0; the exception's text, which the rubric only logs, is
captured per row so the gate can say, e.g., that the rows lack an `info` key the rubric reads.
Only generated rows are scored; the eval split is never touched. Where a hub reward reads the
env's own state rather than the row (driver/envside/row_truth.py), the rows are scored by the
rubric the generated env gets: that reward is the env's scorer on the row's info.entry.
"""
from __future__ import annotations

import collections
from pathlib import Path

from driver.envs import envside, tasksets


def score_hub_rows(python: str, hub: dict, dataset: Path) -> dict:
    """score_rows against the run's hub env, classic or taskset (hub_env.json's `kind`)."""
    if hub.get("kind") == tasksets.KIND:
        return _score(python, envside.JOBS[tasksets.KIND].score_rows, envside.ScoreRequest(
            env_id=hub["env_id"], env_args=tasksets.train_fields(hub), dataset=str(dataset),
            system_prompt=hub.get("system_prompt") or ""))
    return score_rows(python, hub["env_id"], hub.get("env_args"), dataset, hub.get("reward_reads_env_state"))


def score_rows(python: str, env_id: str, env_args: dict | None, dataset: Path,
               reward_reads_env_state: dict | None = None) -> dict:
    """{"ceiling": full reward, "rows": [{"line", "template", "reward", "errors"}]}. Where a hub
    reward reads the env's own state (hub_env.json's reward_reads_env_state; looked up by the
    job when None), the rows are scored by the generated env's rubric: that reward is the env's
    scorer on the row's info.entry (driver/envside/row_truth.py)."""
    return _score(python, envside.JOBS[envside.CLASSIC].score_rows,
                  envside.ScoreRequest(env_id=env_id, env_args=env_args or {}, dataset=str(dataset),
                                       reward_reads_env_state=reward_reads_env_state))


def _score(python: str, action: envside.Action[envside.ScoreRequest, envside.Scored],
           request: envside.ScoreRequest) -> dict:
    try:
        return envside.call(python, action, request).model_dump()
    except envside.EnvsideError as e:
        raise RuntimeError(f"could not score the rows' reasoning with {request.env_id}'s rubric:\n"
                           f"{e.tail(6)}") from None


def failures(scored: dict) -> tuple[int, str]:
    """(rows below full reward, detail by template: count, lowest reward, up to five lines and
    the reward functions' own error text)."""
    ceiling = scored["ceiling"]
    bad = [r for r in scored["rows"] if r["reward"] < ceiling - 1e-9]
    by_template: dict = collections.defaultdict(list)
    for r in bad:
        by_template[tuple(r["template"])].append(r)
    parts = []
    for (dom, sub), rs in sorted(by_template.items(), key=lambda kv: str(kv[0])):
        errors = list(dict.fromkeys(e for r in rs for e in r["errors"]))[:2]
        parts.append(f"{dom}/{sub}: {len(rs)} rows, reward {min(r['reward'] for r in rs):g} of "
                     f"{ceiling:g}, lines " + ", ".join(str(r["line"]) for r in rs[:5])
                     + (" ..." if len(rs) > 5 else "")
                     + (f"; the rubric said: {' | '.join(errors)}" if errors else ""))
    return len(bad), "; ".join(parts)
