"""`driver run`: create a run directory and drive every phase.

Everything `driver resume` cannot fix is refused here, before the run directory exists: a bad
flag, an unknown backend or a missing trainer, a base config prime-rl would reject, an
--init-from directory that lacks what iter_0 is reused from.
"""
from __future__ import annotations

import argparse
import sys
import time

from driver.commands.flags import EXIT_CODES, add_model_flags, given_values
from driver.run.model import RunConfig

NAME = "run"
_FLAGS: dict[str, str] = {}


def add(sub) -> None:
    r = sub.add_parser(NAME, help="start a new run", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Create a run directory and drive every phase: introspect, "
                                   "iter_0 baseline, the teacher/student loop, controls, finalize.")
    _FLAGS.update(add_model_flags(r, RunConfig))
    _FLAGS["llm"] = "--llm-model"
    r.add_argument("--runs-dir", default="runs", help="where run directories go (default: %(default)s)")
    r.add_argument("--dry-run", action="store_true",
                   help="introspect the hub env, render and check every config of iter_0, an "
                        "iteration and each control into the run directory, print their paths "
                        "and stop (`driver resume RUN_DIR` then trains)")


def main(a) -> int:
    from pathlib import Path

    from pydantic import ValidationError

    from driver import backends, loop
    from driver.context import Ctx
    from driver.errors import UsageError
    from driver.run.model import RunState, validation_message
    from driver.run.rundir import RunDir, RunLock

    values = given_values(a, RunConfig)
    why_local = None
    if "backend" not in values:
        values["backend"], why_local = backends.choose(values.get("prime_rl_dir"))
    if values.get("teacher", "builtin") != "llm":
        values.pop("llm", None)
    if values.get("init_from"):
        values["init_from"] = str(Path(values["init_from"]).resolve())
    try:   # the run model fills the backend's defaults and checks every knob, once
        state = RunState(start_ts=time.time(), **values)
    except ValidationError as e:
        raise UsageError(validation_message(e, _FLAGS)) from None
    backend = backends.resolve(state.backend, state.prime_rl_dir)  # refuse before creating anything
    _check_init_from(state, backend.dialect)
    if not state.base_config:
        from driver.backends.prime_rl import canonical_config

        found = canonical_config(state.prime_rl_dir, state.dataset)
        if found:
            print(f"canonical config: {found} (iter_0 trains on it; run B copies its train env; "
                  "pass --base-config to choose another)", flush=True)
            state.base_config = found
    if state.base_config:
        state.base_config = str(Path(state.base_config).resolve())
        _check_base_config(Path(state.base_config), backend.dialect)
    rd = RunDir.create(a.runs_dir, state.dataset)
    _record_backend(state, rd, backend)
    with RunLock(rd.path):
        if why_local:
            print(f"using the embedded default ({why_local}): the {state.dataset} env, the embedded "
                  f"trainer, the {state.model} student, the {state.teacher} teacher, a "
                  f"{state.budget_seconds / 60:g}-minute loop budget. Pass --backend prime_rl "
                  "--prime-rl-dir DIR for the real trainer.", flush=True)
        print(f"run directory: {rd.path}", flush=True)
        rd.save(state)
        version = (f", prime-rl {backend.prime_rl_version} from {backend.version_source}"
                   if backend.prime_rl_version else "")
        print(f"backend: {backend.name} ({backend.describe()}); dialect: {backend.dialect}"
              f"{version}; teacher: {state.teacher}", file=sys.stderr, flush=True)
        if backend.stand_in:
            print(f"trainer: a stand-in ({backend.stand_in}, from DRIVER_RL_COMMAND), not prime-rl; "
                  f"the {state.model} name is only passed to it", file=sys.stderr, flush=True)
        ctx = Ctx.open(rd, state)
        if a.dry_run:
            from driver.phases import dry_run

            for path in dry_run.render(ctx):
                print(f"rendered: {path}", flush=True)
            print(f"dry run: nothing trained. `driver resume {rd.path}` trains.", flush=True)
            return 0
        return loop.run(ctx)


def _record_backend(state, rd, backend) -> None:
    import hashlib

    # suffix of generated env package names: two runs sharing one interpreter never install
    # over each other's environments
    state.env_tag = hashlib.sha256(str(rd.path).encode()).hexdigest()[:6]
    state.trainer_stand_in = backend.stand_in
    state.dialect = backend.dialect
    state.prime_rl_version, state.prime_rl_version_source = backend.prime_rl_version, backend.version_source


def _check_init_from(state, dialect: str) -> None:
    from pathlib import Path

    from driver import dialects
    from driver.errors import UsageError
    from driver.phases.setup import init_from_problems

    if not state.init_from:
        return
    if not Path(state.init_from).is_dir():
        raise UsageError(f"--init-from {state.init_from} is not a directory")
    if dialect != "classic":
        raise UsageError(f"--init-from reads a classic run's layout (weights/, run_default/); this "
                         f"trainer writes the {dialect} layout, so a prior run cannot be reused "
                         "there yet. Start without --init-from.")
    _, missing = init_from_problems(dialects.get(dialect), Path(state.init_from))
    if missing:   # before anything is created: iter_0 would be reused without these
        raise UsageError(f"--init-from {state.init_from} is missing: " + ", ".join(missing[:6])
                         + (f" (and {len(missing) - 6} more)" if len(missing) > 6 else ""))


def _check_base_config(path, dialect: str) -> None:
    """Refuse, before anything is created, a base config prime-rl would reject on its own:
    unreadable TOML, unknown keys, bad batch arithmetic, no train env, checked against the
    dialect the trainer speaks. The launch checks the full composition (with the eval overlay
    and flags) again before iter_0 trains."""
    from driver import dialects
    from driver.errors import DriverError, UsageError
    from rl_contract import composition

    if not path.is_file():
        raise UsageError(f"--base-config {path} is not a file")
    try:
        dialects.get(dialect).check_effective(composition.compose(["@", str(path)]))
    except (composition.CompositionError, DriverError) as e:
        raise UsageError(f"base config {path} does not compose for prime-rl's {dialect} "
                         f"configs: {e}") from None
