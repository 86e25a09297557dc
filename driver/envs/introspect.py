"""Loading the hub env in the interpreter that trains, once it is installed there: hub_env.json's
content with the eval split's decontamination fingerprints (introspect), and a seeded resample
of its train rows (sample_train_rows). Both are env-side jobs (driver/envside, through
driver/envs/envside.py): the driver itself never imports verifiers, and what it reads is what
the trainer will see."""
from __future__ import annotations

from pathlib import Path

from driver.envs import envside, tasksets
from driver.envs.describe import answer_format_instruction, kind_of, row_truth
from driver.envs.install import ensure_installed
from driver.errors import DriverError
from generators.core import module_name


def introspect(python: str, env_id: str, env_args: dict | None = None,
               kind: str = envside.CLASSIC) -> dict:
    return introspect_with_fingerprints(python, env_id, env_args, kind=kind)[0]


def introspect_with_fingerprints(python: str, env_id: str, env_args: dict | None = None,
                                 hub_id: str | None = None,
                                 kind: str = envside.CLASSIC) -> tuple[dict, dict | None]:
    """hub_env.json's content, and the eval split's decontamination fingerprints (hashes
    only), from one load of the env (`kind`: a classic environment or a v1 taskset)."""
    ensure_installed(python, env_id, hub_id)
    request = envside.IntrospectRequest(env_id=env_id, env_args=env_args or {},
                                        module=None if kind == tasksets.KIND else module_name(env_id))
    try:
        got = envside.call(python, envside.JOBS[kind].introspect, request)
    except envside.EnvsideError as e:
        raise DriverError(f"hub env not found: loading '{env_id}' failed:\n{e.tail()}", exit_code=2) from None
    info = got.hub.as_dict()
    info["env_id"] = env_id
    info["env_args"] = env_args or {}
    info["answer_format_instruction"] = answer_format_instruction(info["system_prompt"])
    return info, (got.fingerprints.model_dump() if got.fingerprints else None)


class UnscorableRows(DriverError):
    """Rows that the hub rubric (through the generated env) could not score."""


def sample_train_rows(python: str, hub: dict, n: int, seed: str, dest: Path) -> int:
    """Write `n` rows resampled (seeded, without replacement until the split runs out) from the
    hub env's train split to `dest`. Train rows only: the eval split is never read."""
    tmp = Path(dest).with_name(Path(dest).name + ".tmp")
    env_id, kind = hub["env_id"], kind_of(hub)
    fields = tasksets.train_fields(hub) if kind == tasksets.KIND else hub.get("env_args") or {}
    truth = row_truth(hub)
    try:
        got = envside.call(python, envside.JOBS[kind].sample_train, envside.SampleRequest(
            env_id=env_id, env_args=fields, n=n, seed=seed, dest=str(tmp),
            scorer_attr=(truth or {}).get("scorer", {}).get("attr"))).rows
    except envside.EnvsideError as e:
        if truth:   # the env's scorer holds no entry for its own train rows: none is scoreable
            raise UnscorableRows(f"{env_id}'s reward scores against the env's own state and its "
                                 f"scorer gave no entry for a train row ({e}): resampled rows "
                                 "could not be scored") from None
        raise DriverError(f"resampling {n} train rows of {env_id} failed:\n{e.tail()}") from None
    if got != n:
        raise DriverError(f"resampling {n} train rows of {env_id} failed: {got} rows came back")
    tmp.replace(dest)
    return n
