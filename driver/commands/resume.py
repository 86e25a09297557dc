"""`driver resume RUN_DIR`: continue a run where it stopped (optionally with another teacher)."""
from __future__ import annotations

import argparse
import sys

from driver.commands.flags import EXIT_CODES, add_model_flags, given_values
from driver.run.model import RunConfig

NAME = "resume"
_FLAGS: dict[str, str] = {}


def add(sub) -> None:
    s = sub.add_parser(NAME, help="continue a run directory where it stopped", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Continue a run at the phase it stopped in. The flags below "
                                   "change the run's settings from here on (the new teacher "
                                   "takes over from the next brief it has to write).")
    s.add_argument("run_dir")
    _FLAGS.update(add_model_flags(s, RunConfig, resumable_only=True))
    _FLAGS["llm"] = "--llm-model"


def main(a) -> int:
    from pydantic import ValidationError

    from driver import loop, teachers
    from driver.context import Ctx
    from driver.errors import UsageError
    from driver.run.files import read_json
    from driver.run.model import RunState, validation_message
    from driver.run.rundir import RunDir, RunLock

    rd = RunDir(a.run_dir)
    rd.load()  # a bad run.json or metrics.json is reported before anything else happens
    rd.load_metrics()
    changes = given_values(a, RunConfig)
    with RunLock(rd.path):
        state = rd.load()  # re-read under the lock
        teacher = changes.get("teacher", state.teacher)
        if changes and (teacher != state.teacher or teacher == "llm"):
            update = {"teacher": teacher}
            if teacher == "llm":
                update["llm"] = changes.get("llm") or (state.llm.model_dump() if state.llm else None)
            try:
                new = RunState.model_validate({**state.model_dump(), **update,
                                               **({} if teacher == "llm" else {"llm": None})})
            except ValidationError as e:
                raise UsageError(validation_message(e, _FLAGS)) from None
            if rd.hub_env_json.exists():   # refuse a teacher that cannot teach here, first
                teachers.preflight(new, read_json(rd.hub_env_json))
            print(f"teacher: {state.teacher} -> {new.teacher}", file=sys.stderr, flush=True)
            state = new
            rd.save(state)
        print(f"resuming {rd.path} at phase {state.phase} (iteration {state.iteration})",
              file=sys.stderr, flush=True)
        return loop.run(Ctx.open(rd, state))
