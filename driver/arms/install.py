"""An arm's generated environment: written, cleaned up, installed, and its rows counted in a
fresh process of the training interpreter; and, where the backend's trainer loads envs from a
registry (hosted), published there before the arm trains."""
from __future__ import annotations

from driver import faults
from driver.arms.arm import Arm
from driver.backends import EnvPublisher
from driver.backends import process
from driver.context import Ctx
from driver.envs.describe import kind_of
from driver.envs.install import count_rows, install_generated
from driver.envs.packages import write_package
from driver.run.files import atomic_write_json, file_sha256, read_json
from driver.run.arm_files import ArmFiles


def install_env(ctx: Ctx, arm: Arm) -> dict:
    """Write the generated package and cleanup-then-install it; record what was installed."""
    marker = arm.dir / ArmFiles.ENV_INSTALLED
    expected = process.count_lines(arm.dataset)
    sha = file_sha256(arm.dataset)
    if marker.exists():
        done = read_json(marker)
        if done.get("dataset_sha256") == sha and count_rows(
                ctx.trainer.python, arm.package, kind_of(ctx.hub)) == expected:
            return publish(ctx, arm, done)
    # a backend that installs envs from a registry (hosted) names the hub env by its registry
    # id in the run's config: the package declares no bare name a public index would resolve
    pkg_dir = write_package(arm.dir, arm.package, ctx.hub, arm.dataset,
                            declare_hub=not isinstance(ctx.trainer, EnvPublisher))
    faults.point("install:package-written")
    result = install_generated(ctx.trainer.python, pkg_dir, expected, kind_of(ctx.hub))
    result["dataset_sha256"] = sha
    atomic_write_json(marker, result)
    ctx.say(f"[{arm.name}] installed {arm.package}: {result['rows']} rows")
    return publish(ctx, arm, result)


def publish(ctx: Ctx, arm: Arm, installed: dict) -> dict:
    """Publish the installed package where the backend's trainer loads envs from (a private,
    versioned Hub env for hosted training), once per content: its id goes into
    env_installed.json (and from there into the hosted configs and metrics.json)."""
    if not isinstance(ctx.trainer, EnvPublisher):
        return installed
    pkg_dir = arm.dir / arm.package
    hub = ctx.trainer.publish_env(pkg_dir)
    if installed.get("hub") != hub:
        installed = {**installed, "hub": hub}
        atomic_write_json(arm.dir / ArmFiles.ENV_INSTALLED, installed)
        ctx.say(f"[{arm.name}] pushed {arm.package} to the Environments Hub as {hub['ref']} (private)")
    return installed
