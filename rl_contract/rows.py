"""The rollout rows the driver reads, as prime-rl writes them: one statement of the contract, for
the driver (which relies on it) and the doubles (which honour it). Each fact below was read off
prime-rl's own code; tests/fixtures/prime_rl_rows/ holds a row of each kind produced by that code
path, with the file, function and commit it came from, and tests/test_row_contract.py holds the
driver's readers to them.

Classic (prime-rl v0.5.1.dev209 = 09e2977, verifiers 58b119f): `save_rollouts`
(src/prime_rl/orchestrator/vf_utils.py:82-89) writes verifiers' `state_to_output` rows
(verifiers/utils/save_utils.py:196-314) to run_default/rollouts/step_N/{train,eval}_rollouts.jsonl.
- Every row: `example_id` (the example's index in its own dataset, from 0), `reward` (float),
  `metrics` ({reward function name: float}, zero-weight ones included), `is_truncated`.
- Train rows only: prime-rl adds `env_name` (scheduler.py:477: the env block's `name`, else its
  id), `advantage`, `filters`, `is_filtered`.
- Eval rows: nothing from prime-rl (orchestrator/envs.py:319 returns verifiers' outputs as they
  are). A rollout that raised is no row at all: envs.py:236 keeps only the rollouts that came
  back (a failed one is None, :206-209,224-227) and :240-243 logs how many failed
  (rl_contract/classic.py: the driver counts those as errored episodes). The rows of every eval
  env of a step go into one file (orchestrator.py:813-834), with NO `env_name`, and each env's
  `example_id`s start at 0, so two eval envs' rows cannot be told apart by their keys.
  => The driver labels the selection split's rows with a metric of its own: the selection split
  is evaluated through a generated env that adds SELECTION_METRIC (zero weight, 1.0 on every
  row) to the hub env's rubric; a row is the selection split's when that metric is 1.

Current (prime-rl v0.8.1.dev67 = 559b447): `FileMonitor.log_episodes` (monitors/file.py:43-59)
appends verifiers Episodes to run/rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl:
`env.name` (the source's name, dispatcher.py:634) on every episode, `task.key` per example,
`traces[].rewards` {name: {score, weight}} (reward = sum of score x weight), `ok`/`errors`.
"""
from __future__ import annotations

# a zero-weight metric the driver's selection-split env adds: 1.0 marks a selection-split row
SELECTION_METRIC = "split_selection"

# what the driver needs of every eval row (after the dialect's view cuts it to numbers)
EVAL_ROW_FIELDS = ("example_id", "reward", "metrics")


def problems(views: list[dict], *, selection_expected: bool, unique_ids: bool) -> list[str]:
    """What in an eval file's rows (cut to numbers) breaks the contract: a row with no example
    id (nothing to pair it on), ids repeated within one split where each example has one
    rollout (they would collide in the paired statistics), or a selection split the configs
    asked for whose rows carry no label (they would mix into the eval split's accuracy)."""
    out = []
    missing = sum(1 for v in views if v.get("example_id") is None)
    if missing:
        out.append(f"{missing} of {len(views)} rows have no example_id")
    if selection_expected and not any(v.get("split") == "selection" for v in views):
        out.append("no row is labelled as the selection split's (neither env_name nor the "
                   f"{SELECTION_METRIC} metric): its rows would mix into the eval split's")
    if unique_ids:
        for split in ("eval", "selection"):
            ids = [v["example_id"] for v in views if v.get("split") == split
                   and v.get("example_id") is not None]
            repeated = len(ids) - len(set(ids))
            if repeated:
                out.append(f"{repeated} example ids repeat within the {split} split (one rollout "
                           "per example was asked for): rows of two splits share ids")
    return out
