"""Environments: hub introspection, generated environment packages, cleanup-then-install.

All environment code runs in a subprocess of the interpreter that will load the environment at
training time (the driver's own for the embedded trainer, prime-rl's venv for prime-rl), as the
env-side jobs of driver/envside called through driver/envs/envside.py: the driver itself never
imports verifiers, and what it checks is what the trainer will see.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sysconfig
from pathlib import Path

from driver import faults, resources
from driver.envs import envside, tasksets
from driver.errors import DriverError
from generators.core import module_name

BUILTIN_ENVS = {"stock_arithmetic", "model_router", "hidden_number"}
CLASSIC = envside.CLASSIC    # hub_env.json `kind` of a classic env; tasksets.KIND for a v1 taskset


def kind_of(hub: dict) -> str:
    return hub.get("kind") or CLASSIC


def interaction_line(hub: dict) -> str:
    """How the env's episodes go, in one line (`driver introspect`, the run header)."""
    it = hub.get("interaction")
    if not it:
        return "episodes: not recorded (a v1 taskset, or a hub_env.json from before they were)"
    words = {"single_turn": "single-turn (one reply, scored)",
             "multi_turn": "multi-turn (the env answers each reply until it stops the episode)",
             "tools": "tool-using (the env runs the model's tool calls until it stops)"}
    line = f"episodes: {words.get(it['kind'], it['kind'])}"
    if it["kind"] == "single_turn":
        return line
    limit = it.get("max_turns")
    line += (f"; max_turns {limit}" if isinstance(limit, int) and limit > 0 else "; no turn limit")
    if it.get("env_response"):
        line += f"; env_response of {it['env_response']}"
    own = [c for c in it.get("stop_conditions") or [] if c not in VERIFIERS_STOPS]
    if own:
        line += f"; its own stop conditions: {', '.join(own)}"
    if it.get("tools"):
        line += f"; tools: {', '.join(it['tools'])}"
    keys = it.get("env_info_keys_read")
    line += ("; info keys its episode logic reads: " + (", ".join(keys) if keys else "none found")
             if keys is not None else "; info keys its episode logic reads: unknown (a sample episode did not play)")
    return line


# the stop conditions every classic MultiTurnEnv has (verifiers 0.3.1's multiturn_env.py)
VERIFIERS_STOPS = {"has_error", "has_final_env_response", "max_total_completion_tokens_reached",
                   "max_turns_reached", "prompt_too_long"}
_FORMAT_WORDS = re.compile(r"json|format|answer|reply|respond|tag|<|box|exactly", re.IGNORECASE)


def answer_format_instruction(system_prompt: str) -> str:
    """The sentences of the system prompt that state the answer format."""
    sentences = re.split(r"(?<=[.!?])\s+", system_prompt.strip())
    return " ".join(s for s in sentences if _FORMAT_WORDS.search(s)).strip()


def _unimportable(python: str, modules: list[str]) -> set[str]:
    """The modules the given interpreter cannot find (one subprocess for all of them)."""
    find = ("import importlib.util,sys; print('\\n'.join(m for m in sys.argv[1:] "
            "if importlib.util.find_spec(m) is None))")
    r = subprocess.run([python, "-c", find, *modules], capture_output=True, text=True, check=False)
    return set(r.stdout.split()) if r.returncode == 0 else set(modules)


def is_importable(python: str, module: str) -> bool:
    return not _unimportable(python, [module])


def missing_envs(python: str, env_ids: list[str]) -> list[str]:
    """The env ids whose modules the given interpreter cannot import."""
    gone = _unimportable(python, [module_name(e) for e in env_ids])
    return [e for e in env_ids if module_name(e) in gone]


def ensure_installed(python: str, env_id: str, hub_id: str | None = None) -> None:
    """An installed module is used directly; a built-in is installed from the bundled copy;
    otherwise `prime env install HUB_ID` (the run's --hub-id, else the env id) into `python`'s
    virtual environment when the prime CLI is there; else a clear error. An install counts
    only when `python` then imports the module."""
    mod = module_name(env_id)
    if is_importable(python, mod):
        return
    if mod in BUILTIN_ENVS:
        install_package(python, resources.environments_dir() / mod)
        if not is_importable(python, mod):
            raise DriverError(f"installing the built-in env {mod} into {python} left it unimportable there")
        return
    if shutil.which("prime"):
        why = prime_install(python, hub_id or env_id, mod)
        if not why:
            return
        raise DriverError(f"hub env not found: '{env_id}' is not installed for {python} and could "
                          f"not be installed: {why}", exit_code=2)
    raise DriverError(
        f"hub env not found: '{env_id}' is not installed for {python} and could not be "
        f"installed (the prime CLI is not on PATH). Install it (`prime env install "
        f"{hub_id or env_id}` with VIRTUAL_ENV set to that interpreter's venv, or `pip install` its "
        "package into that interpreter), then run the command again.", exit_code=2)


def venv_of(python: str) -> Path:
    """The virtual environment `python` runs in: the directory two levels above its bin/python
    (the path as given, not the binary a venv's python links to), which holds pyvenv.cfg."""
    exe = Path(python if os.sep in python else (shutil.which(python) or python))
    venv = Path(os.path.abspath(exe)).parent.parent
    if not (venv / "pyvenv.cfg").is_file():
        raise DriverError(
            f"the training interpreter {python} is not in a virtual environment ({venv} has no "
            "pyvenv.cfg), and `prime env install` installs only into one ($UV_PROJECT_ENVIRONMENT or "
            "$VIRTUAL_ENV). Train with a venv's interpreter (`python -m venv DIR`, then "
            "DIR/bin/python), or take the prime CLI off PATH so the driver installs into "
            f"{python} itself, and resume.", exit_code=2)
    return venv


PRIME_TIMEOUT = 1800.0   # seconds: a hub install resolves and downloads


def prime_install(python: str, target: str, module: str, path: Path | None = None) -> str | None:
    """`prime env install TARGET [-p PATH]` into `python`'s virtual environment; None when
    `python` then imports `module`, else why not (the interpreter, the command, the tail of its
    output). prime 0.18 has no --python: it installs into $UV_PROJECT_ENVIRONMENT, else
    $VIRTUAL_ENV, else the nearest project .venv, else its own interpreter, so both variables
    name that venv and it runs beside it; and it exits 0 when the install fails, so only the
    import in `python` is believed."""
    try:
        venv = venv_of(python)
    except DriverError as e:
        return str(e)
    cmd = [shutil.which("prime") or "prime", "--plain", "env", "install", target]
    if path is not None:
        cmd += ["-p", str(Path(path).resolve())]
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv), "VIRTUAL_ENV": str(venv),
           "PRIME_DISABLE_VERSION_CHECK": "1"}
    shown = f"`{shlex.join(cmd)}` (in {venv.parent}, VIRTUAL_ENV={venv})"
    try:
        r = subprocess.run(cmd, cwd=venv.parent, env=env, capture_output=True, text=True,
                           timeout=PRIME_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{shown} for {python} did not finish: {type(e).__name__}: {e}"
    if r.returncode == 0 and is_importable(python, module):
        return None
    out = "\n".join(((r.stdout or "") + (r.stderr or "")).strip().splitlines()[-15:]) or "no output"
    result = (f"it exited {r.returncode}" if r.returncode else
              f"it exited 0, but {python} cannot import {module}")
    return (f"{shown} did not install {module} for {python}: {result}. Its output ends:\n{out}\n"
            f"Run it by hand to see all of it; resume once {python} imports {module}.")


def introspect(python: str, env_id: str, env_args: dict | None = None, kind: str = CLASSIC) -> dict:
    return introspect_with_fingerprints(python, env_id, env_args, kind=kind)[0]


def introspect_with_fingerprints(python: str, env_id: str, env_args: dict | None = None,
                                 hub_id: str | None = None,
                                 kind: str = CLASSIC) -> tuple[dict, dict | None]:
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


# --------------------------------------------------------------------------------------------
# Generated environment packages

def package_name(dataset: str, suffix: str, tag: str | None = None) -> str:
    """`<env>_iter_<N>_<tag>` / `<env>_run_a_<tag>`: underscores only (installers resolve by
    that name). The tag is the run's own, so two runs sharing one interpreter never install
    over each other's environments."""
    return f"{module_name(dataset)}_{suffix}" + (f"_{tag}" if tag else "")


def write_package(dest: Path, name: str, hub: dict, dataset_path: Path) -> Path:
    """Write an environment package whose load_environment returns the hub env's class with the
    hub's parser, rubric and system prompt; only the rows differ. The rows ship inside the
    package directory, so two generated packages never share a file. Where a hub reward reads
    the env's own state (hub_env.json's reward_reads_env_state), envside/row_truth.py ships
    beside the module, which scores that reward from each row's info.entry. A taskset hub gets a
    taskset package instead (tasksets.write_package)."""
    aux = Path(dataset_path).parent / "aux_rewards.py"
    if kind_of(hub) == tasksets.KIND:
        if aux.exists():
            raise DriverError(
                "auxiliary rewards (aux_rewards.py) are not supported for v1 tasksets yet: a "
                "taskset's rewards are its Task class's. Remove aux_rewards.py and resume.")
        pyproject, module, values = tasksets.package_templates(hub)
    else:
        pyproject, module = "classic/env_pyproject.toml.j2", "classic/env_module.py.j2"
        values = {"hub_env_id": hub["env_id"], "hub_env_args": hub.get("env_args", {}),
                  "row_truth": row_truth(hub)}
    pkg_root = dest / name
    mod_dir = pkg_root / name
    mod_dir.mkdir(parents=True, exist_ok=True)
    render = resources.jinja()
    (pkg_root / "pyproject.toml").write_text(render.get_template(pyproject).render(
        name=name, hub_requirement=hub_requirement(hub)))
    (mod_dir / "__init__.py").write_text(render.get_template(module).render(name=name, **values))
    shutil.copyfile(dataset_path, mod_dir / "dataset.jsonl")
    truth = mod_dir / "row_truth.py"
    if values.get("row_truth"):   # the module imports it (envside/row_truth.py, as the gate scores)
        shutil.copyfile(envside.CALL.parent / "row_truth.py", truth)
    elif truth.exists():
        truth.unlink()
    if aux.exists():  # checked by driver/gates/aux_rewards.py before it gets here
        shutil.copyfile(aux, mod_dir / "aux_rewards.py")
    elif (mod_dir / "aux_rewards.py").exists():
        (mod_dir / "aux_rewards.py").unlink()
    return pkg_root


def hub_requirement(hub: dict) -> str:
    """The requirement a generated env declares for the hub env it loads by id: the hub env's
    distribution (hub_env.json's `distribution`, read where it is installed), else its id. A
    platform that installs envs from their wheels' requirements (the Environments Hub's `env
    push` sends them) then installs the hub env with it."""
    dist = hub.get("distribution") or {}
    return str(dist.get("name") or hub["env_id"])


def row_truth(hub: dict) -> dict | None:
    """hub_env.json's reward_reads_env_state when a reward reads the env's own state and the env
    holds a scorer: the generated env scores that reward from the row's info.entry."""
    record = hub.get("reward_reads_env_state") or {}
    return record if record.get("verdict") == "yes" and record.get("scorer") else None


def refuse_unscorable(hub: dict) -> None:
    """Stop before iter_0 when a reward reads the env's own state and the env exposes no scorer
    a generated env could call instead: no generated row could be scored."""
    record = hub.get("reward_reads_env_state") or {}
    if record.get("verdict") == "yes" and not record.get("scorer"):
        raise DriverError(
            f"{hub['env_id']}'s reward ({', '.join(record.get('funcs') or [])}) reads the env's own state, "
            f"not the row: {record.get('evidence', '')}. Rows a teacher writes cannot be scored by it. A "
            "generated env scores such a reward through the env's own scorer: the env needs an attribute "
            "holding an object with score_answer(answer, entry) (answer: the completion as the hub's "
            "parser parses it; entry: a row's ground truth, which a generated row carries as info.entry), "
            "as ReasoningGymEnv's rg_dataset has. Give the env such an attribute, or use an env whose "
            "reward scores from the row, and start the run again.", exit_code=2)


def write_selection_package(dest: Path, name: str, hub: dict) -> Path:
    """A classic env package that is the hub env on its selection split, with a zero-weight
    metric marking its rows (templates/classic/selection_env.py.j2 says why)."""
    from rl_contract.rows import SELECTION_METRIC

    pkg_root = dest / name
    (pkg_root / name).mkdir(parents=True, exist_ok=True)
    render = resources.jinja()
    (pkg_root / "pyproject.toml").write_text(
        render.get_template("classic/env_pyproject.toml.j2").render(
            name=name, hub_requirement=hub_requirement(hub)))
    (pkg_root / name / "__init__.py").write_text(render.get_template("classic/selection_env.py.j2").render(
        name=name, hub_env_id=hub["env_id"], selection_args=hub["selection"]["args"],
        metric=SELECTION_METRIC))
    return pkg_root


_SCHEMES: dict[str, dict] = {}


def install_scheme(python: str) -> dict:
    """`python`'s install paths (sysconfig's), read once per driver process."""
    if python not in _SCHEMES:
        r = subprocess.run([python, "-c", "import json, sysconfig; print(json.dumps(sysconfig.get_paths()))"],
                           capture_output=True, text=True, timeout=60, check=False)
        if r.returncode != 0:
            raise DriverError(f"cannot read the install paths of {python}: {r.stderr.strip()[-500:]}")
        _SCHEMES[python] = json.loads(r.stdout)
    return _SCHEMES[python]


def purelib(python: str) -> Path:
    return Path(install_scheme(python)["purelib"])


def _is_driver_target(python: str) -> bool:
    """Whether `python` installs where the driver's own interpreter does (its purelib: two
    venvs' pythons link to one binary, so the binary says nothing)."""
    return purelib(python).resolve() == Path(sysconfig.get_paths()["purelib"]).resolve()


def _copies(name: str) -> list[str]:
    """The site-packages entries that are copies of generated package `name`."""
    return [f"{name}.py", name, f"{name}-*.dist-info", f"_{name}.pth", f"__editable__*{name}*"]


def cleanup(python: str, name: str) -> list[str]:
    """Remove every installed copy of `name` from site-packages: its module, its metadata, an
    editable install's path file, and any stale root-level copy of its data or module. Returns
    what was removed."""
    sp = purelib(python)
    removed = []
    for pattern in ["dataset.jsonl", *_copies(name)]:
        for p in sp.glob(pattern):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p.name)
    return removed


_WHERE = ("import importlib.util, sys\n"
          "s = importlib.util.find_spec(sys.argv[1])\n"
          "print('\\n'.join(list(s.submodule_search_locations or []) or [s.origin or '']) if s else '')")


def stale_copies(python: str, name: str) -> list[str]:
    """Copies of `name` that `python` may load instead of the installed package: entries of its
    site-packages named after `name` that the installed distribution's RECORD does not own, and
    the place `python` finds `name` when that is not the installed package's directory (a copy
    earlier on sys.path). Empty when the one copy is the installed one."""
    sp = purelib(python)
    owned: set[str] = set()
    for dist in sp.glob(f"{name}-*.dist-info"):
        record = dist / "RECORD"
        if record.is_file():
            owned |= {line.split(",", 1)[0].split("/", 1)[0] for line in record.read_text().splitlines() if line}
    stale = [str(p) for pattern in _copies(name) for p in sp.glob(pattern) if p.name not in owned]
    r = subprocess.run([python, "-c", _WHERE, name], capture_output=True, text=True, timeout=60, check=False)
    installed = (sp / name).resolve()
    for where in filter(None, map(str.strip, r.stdout.splitlines() if r.returncode == 0 else [])):
        found = Path(where).resolve()
        if found != installed and installed not in found.parents and where not in stale:
            stale.append(where)
    return stale


def install_package(python: str, pkg_dir: Path) -> None:
    """Install a package directory into `python`'s site-packages: hatchling builds its wheel in
    this process and `installer` (PyPA's wheel installer) unpacks it into that interpreter's
    scheme. No pip, no resolver, no interpreter start: a generated environment has no
    dependency the hub env does not already bring. With the `prime` CLI on PATH and another
    interpreter as the target, `prime env install` does it instead, as a prime user expects,
    into that interpreter's venv and checked by importing the package there (prime_install)."""
    import tempfile

    if shutil.which("prime") and not _is_driver_target(python):
        why = prime_install(python, pkg_dir.name, pkg_dir.name, path=Path(pkg_dir).parent)
        if why:
            raise DriverError(f"installing {pkg_dir} failed: {why}")
        return
    from hatchling.builders.wheel import WheelBuilder
    from installer import install
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    scheme = install_scheme(python)
    with tempfile.TemporaryDirectory(prefix="driver-wheel-") as tmp:
        try:
            wheel = next(iter(WheelBuilder(str(pkg_dir)).build(directory=tmp, versions=["standard"])))
            dest = SchemeDictionaryDestination(
                {"purelib": scheme["purelib"], "platlib": scheme["platlib"],
                 "headers": scheme["include"], "scripts": scheme["scripts"], "data": scheme["data"]},
                interpreter=python, script_kind="posix", bytecode_optimization_levels=())
            with WheelFile.open(wheel) as source:
                install(source, dest, {"INSTALLER": b"synthetic-self-improve-rl\n"})
        except Exception as e:  # noqa: BLE001 - a broken pyproject, a full disk, a file already there
            raise DriverError(f"installing {pkg_dir} failed: {type(e).__name__}: {e}") from None


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


def count_rows(python: str, name: str, kind: str = CLASSIC) -> int | None:
    """How many rows (or tasks) an installed generated env builds, in a fresh process."""
    try:
        return envside.call(python, envside.JOBS[kind].count, envside.CountRequest(env_id=name)).rows
    except envside.EnvsideError:
        return None


def install_generated(python: str, pkg_dir: Path, expected_rows: int, kind: str = CLASSIC) -> dict:
    """Cleanup, install, then count rows in a fresh process of the same interpreter. A mismatch
    or a failed load repeats the cleanup once, then stops with what the load raised first (the
    cause verifiers' loader wraps: its type, message, file and line), naming a stale copy of
    the package only when one is there (stale_copies)."""
    name = pkg_dir.name
    rows: int | None = None
    failed: envside.EnvsideError | None = None
    for attempt in (1, 2):
        removed = cleanup(python, name)
        faults.point("install:after-cleanup")
        install_package(python, pkg_dir)
        faults.point("install:after-install")
        try:
            rows = envside.call(python, envside.JOBS[kind].count, envside.CountRequest(env_id=name)).rows
            failed = None
        except envside.EnvsideError as e:
            rows, failed = None, e
        if rows == expected_rows:
            return {"package": name, "rows": rows, "attempts": attempt, "removed": removed}
    stale = stale_copies(python, name)
    if stale:
        then = (f" A stale copy of {name} is still there, which {python} may load instead of the "
                f"installed one: {', '.join(stale)}. Remove it, then resume.")
    elif failed is not None:
        then = (f" Fix what the error names (the package is {pkg_dir}, its rows "
                f"{pkg_dir / name / 'dataset.jsonl'}), then resume.")
    else:
        then = (f" Its rows are {pkg_dir / name / 'dataset.jsonl'}: check that they are the ones the "
                "dataset phase wrote, then resume.")
    if failed is not None:
        raise DriverError(f"loading {name} failed (cleanup and install repeated once): "
                          f"{failed.first_error(prefer=f'{os.sep}{name}{os.sep}')}.{then}")
    raise DriverError(f"environment {name} builds {rows} rows after install, expected {expected_rows} "
                      f"(cleanup repeated once).{then}")


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
