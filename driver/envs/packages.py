"""Generated environment packages: their names, and the package directories the driver writes
(a generated env that is the hub env's class given the rows a teacher wrote, or the hub env on
its selection split) before install.py installs them into the training interpreter."""
from __future__ import annotations

import shutil
from pathlib import Path

from driver import resources
from driver.envs import envside, tasksets
from driver.envs.describe import hub_requirement, kind_of, row_truth
from driver.errors import DriverError
from driver.run.arm_files import ArmFiles
from generators.core import module_name


def package_name(dataset: str, suffix: str, tag: str | None = None) -> str:
    """`<env>_iter_<N>_<tag>` / `<env>_run_a_<tag>`: underscores only (installers resolve by
    that name). The tag is the run's own, so two runs sharing one interpreter never install
    over each other's environments."""
    return f"{module_name(dataset)}_{suffix}" + (f"_{tag}" if tag else "")


CLASSIC_MODULE = "classic/env_module.py.j2"


def write_package(dest: Path, name: str, hub: dict, dataset_path: Path, declare_hub: bool = True) -> Path:
    """Write an environment package whose load_environment returns the hub env's class with the
    hub's parser, rubric and system prompt; only the rows differ. The rows ship inside the
    package directory, so two generated packages never share a file. Where a hub reward reads
    the env's own state (hub_env.json's reward_reads_env_state), envside/row_truth.py ships
    beside the module, which scores that reward from each row's info.entry; envside/hub_parts.py
    always ships beside a classic module (its choice of class and settings). A taskset hub gets a
    taskset package instead (tasksets.write_package). `declare_hub`: the hub env's distribution
    is a requirement of the package (not where a registry installs it by its Hub id instead)."""
    aux = Path(dataset_path).parent / ArmFiles.AUX_REWARDS
    if kind_of(hub) == tasksets.KIND:
        if aux.exists():
            raise DriverError(
                "auxiliary rewards (aux_rewards.py) are not supported for v1 tasksets yet: a "
                "taskset's rewards are its Task class's. Remove aux_rewards.py and resume.")
        pyproject, module, values = tasksets.package_templates(hub)
    else:
        pyproject, module = "classic/env_pyproject.toml.j2", CLASSIC_MODULE
        values = {"hub_env_id": hub["env_id"], "hub_env_args": hub.get("env_args", {}),
                  "row_truth": row_truth(hub)}
    pkg_root = dest / name
    mod_dir = pkg_root / name
    mod_dir.mkdir(parents=True, exist_ok=True)
    render = resources.jinja()
    (mod_dir / "__init__.py").write_text(render.get_template(module).render(name=name, **values))
    shutil.copyfile(dataset_path, mod_dir / "dataset.jsonl")
    if module == CLASSIC_MODULE:   # it imports the choice of class and settings introspection made
        shutil.copyfile(envside.CALL.parent / "hub_parts.py", mod_dir / "hub_parts.py")
    truth = mod_dir / "row_truth.py"
    if values.get("row_truth"):   # the module imports it (envside/row_truth.py, as the gate scores)
        shutil.copyfile(envside.CALL.parent / "row_truth.py", truth)
    elif truth.exists():
        truth.unlink()
    if aux.exists():  # checked by driver/gates/aux_rewards.py before it gets here
        shutil.copyfile(aux, mod_dir / "aux_rewards.py")
    elif (mod_dir / "aux_rewards.py").exists():
        (mod_dir / "aux_rewards.py").unlink()
    (pkg_root / "pyproject.toml").write_text(render.get_template(pyproject).render(
        name=name, hub_requirement=hub_requirement(hub) if declare_hub else None,
        version=content_version(mod_dir)))
    return pkg_root


def content_version(mod_dir: Path) -> str:
    """The package's version, from what it ships (every file under its module directory, by
    path and bytes): a regenerated dataset for the same arm is a new version, never refused as
    a duplicate or installed stale under the old ref; the same content is the same version.
    A release segment (0.1.N), which every index and installer accepts."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(p for p in Path(mod_dir).rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(str(f.relative_to(mod_dir)).encode() + b"\0" + f.read_bytes() + b"\0")
    return f"0.1.{int(h.hexdigest()[:7], 16)}"


def write_selection_package(dest: Path, name: str, hub: dict) -> Path:
    """A classic env package that is the hub env on its selection split, with a zero-weight
    metric marking its rows (templates/classic/selection_env.py.j2 says why)."""
    from rl_contract.rows import SELECTION_METRIC

    pkg_root = dest / name
    (pkg_root / name).mkdir(parents=True, exist_ok=True)
    render = resources.jinja()
    (pkg_root / name / "__init__.py").write_text(render.get_template("classic/selection_env.py.j2").render(
        name=name, hub_env_id=hub["env_id"], selection_args=hub["selection"]["args"],
        metric=SELECTION_METRIC))
    (pkg_root / "pyproject.toml").write_text(
        render.get_template("classic/env_pyproject.toml.j2").render(
            name=name, hub_requirement=hub_requirement(hub), version=content_version(pkg_root / name)))
    return pkg_root
