"""The taskset side of the environment seam (verifiers v1, prime-rl >= v0.8.1): what the driver
needs to know of a hub that is a `vf.Taskset` rather than a classic environment.

The jobs on a taskset (introspection, row counts, train resamples, gate scoring, eval
fingerprints) are driver/envside/taskset.py's, run in the interpreter that trains like the
classic ones (driver/envs/envside.py); the driver never imports verifiers. A taskset selects its
split with a config field: hub_env.json records the train and eval splits' values of it
(`train_args`, `eval_args`), and generated environments are taskset packages.
"""
from __future__ import annotations

from driver.envs.envside import TASKSET

KIND = TASKSET   # hub_env.json `kind` of a v1 taskset


def train_fields(hub: dict) -> dict:
    return {**(hub.get("env_args") or {}), **(hub.get("train_args") or {})}


def eval_fields(hub: dict) -> dict:
    return {**(hub.get("env_args") or {}), **(hub.get("eval_args") or {})}


def package_templates(hub: dict) -> tuple[str, str, dict]:
    """(pyproject template, module template, its values) of a generated taskset package: its
    one Taskset yields tasks of the hub taskset's own Task class (its rewards, stops and
    metrics by construction) built from the generated rows."""
    split_field = hub.get("split_field")
    fields = {k: v for k, v in (hub.get("env_args") or {}).items() if k != split_field}
    return ("current/taskset_pyproject.toml.j2", "current/taskset_module.py.j2",
            {"hub_taskset_id": hub["env_id"], "system_prompt": hub.get("system_prompt") or "",
             "hub_fields": fields})
