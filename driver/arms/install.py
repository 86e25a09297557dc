"""An arm's generated environment: written, cleaned up, installed, and its rows counted in a
fresh process of the training interpreter."""
from __future__ import annotations

from driver import faults
from driver.arms.arm import Arm
from driver.backends import process as training
from driver.context import Ctx
from driver.envs import hub as envs
from driver.run.files import atomic_write_json, read_json


def install_env(ctx: Ctx, arm: Arm) -> dict:
    """Write the generated package and cleanup-then-install it; record what was installed."""
    marker = arm.dir / "env_installed.json"
    expected = training.count_lines(arm.dataset)
    sha = envs.file_sha256(arm.dataset)
    if marker.exists():
        done = read_json(marker)
        if done.get("dataset_sha256") == sha and envs.count_rows(
                ctx.trainer.python, arm.package, envs.kind_of(ctx.hub)) == expected:
            return done
    pkg_dir = envs.write_package(arm.dir, arm.package, ctx.hub, arm.dataset)
    faults.point("install:package-written")
    result = envs.install_generated(ctx.trainer.python, pkg_dir, expected, envs.kind_of(ctx.hub))
    result["dataset_sha256"] = sha
    atomic_write_json(marker, result)
    ctx.say(f"[{arm.name}] installed {arm.package}: {result['rows']} rows")
    return result
