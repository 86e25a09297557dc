"""What every phase receives: the run directory, its state, and the resolved collaborators."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from driver import dialects
from driver.backends import Backend, resolve
from driver.backends.base import Runner
from driver.dialects.base import Dialect
from driver.errors import UsageError
from driver.run.files import read_json
from driver.run.model import Knobs, LimitChange, RunState, TrainerProcess
from driver.run.rundir import RunDir, now


def stop_grace_s(state: RunState) -> float:
    """How long a stopped launch's own cleanup gets before SIGKILL: --stop-grace, else (prime_rl)
    its launcher's cleanup limit with the default processes (rl_contract/launch.py)."""
    from rl_contract.launch import cleanup_bound_s

    return state.stop_grace_s if state.stop_grace_s is not None else cleanup_bound_s(state.dialect)


@dataclass
class Ctx:
    rd: RunDir
    state: RunState
    backend: Backend | None      # None where only records are read (`driver report`)
    dialect: Dialect
    poll_interval: float = 1.0
    quiet: bool = False
    _hub: dict | None = field(default=None, repr=False)
    # hub_env.json's content and the eval fingerprints, when `driver run` loaded the env before
    # creating the run directory (commands/run.py); the introspect phase writes them
    introspected: tuple[dict, dict | None] | None = field(default=None, repr=False)

    @classmethod
    def open(cls, rd: RunDir, state: RunState, quiet: bool = False) -> "Ctx":
        backend = resolve(state.backend, state.prime_rl_dir)
        if backend.dialect != state.dialect:   # configs and layouts of two generations never mix
            raise UsageError(
                f"this run speaks prime-rl's {state.dialect} dialect (prime-rl "
                f"{state.prime_rl_version or '?'}), but the trainer now resolves to {backend.dialect} "
                f"(prime-rl {backend.prime_rl_version or '?'} from {backend.version_source}). Resume "
                f"with the checkout the run started on, or start a new run.")
        return cls(rd=rd, state=state, backend=backend, dialect=dialects.get(state.dialect),
                   poll_interval=float(os.environ.get("DRIVER_POLL_INTERVAL", "1")), quiet=quiet)

    @classmethod
    def records(cls, rd: RunDir, state: RunState) -> "Ctx":
        """A context that reads records only: no backend (prime-rl checkout, torch) is needed."""
        return cls(rd=rd, state=state, backend=None, dialect=dialects.get(state.dialect), quiet=True)

    @property
    def trainer(self) -> Backend:
        """The backend, where an arm is trained, probed or installed."""
        if self.backend is None:
            raise UsageError("this command reads records only and has no trainer")
        return self.backend

    def runner(self) -> Runner:
        """The backend's runner, stopping a launch with the run's stop grace."""
        runner = self.trainer.runner()
        if hasattr(runner, "grace_s"):
            runner.grace_s = stop_grace_s(self.state)
        return runner

    @property
    def knobs(self) -> Knobs:
        return self.state.knobs()

    @property
    def hub(self) -> dict:
        if self._hub is None:
            self._hub = read_json(self.rd.hub_env_json)
        return self._hub

    def save(self) -> None:
        self.rd.save(self.state)

    # ---- the run's transitions outside the loop's own (each saved as it happens) -------------
    def trainer_running(self, tp: TrainerProcess) -> None:
        """A trainer (or evaluator) was launched or re-attached: run.json names it first, so a
        driver killed at any later instant finds it again instead of launching a second."""
        if self.state.trainer != tp:
            self.state.trainer = tp
            self.save()

    def trainer_done(self, failure: str | None = None) -> None:
        """The trainer ended (`failure`: why the arm failed, for `driver status`)."""
        self.state.trainer = None
        if failure:
            self.state.reason = failure
        self.save()

    def anchored(self, source: str, path: str, step: int) -> None:
        """iter_0 is in place: every later arm starts from its checkpoint at `step`."""
        self.state.iter_0_source, self.state.iter_0_path, self.state.iter_0_step = source, path, step
        self.save()

    def control_failed(self, message: str) -> None:
        """A control arm failed: recorded (once) and the run goes on."""
        if message not in self.state.phase4_errors:
            self.state.phase4_errors.append(message)
            self.save()

    def closed(self) -> None:
        """The run ended: its end time once, and its status from how the loop ended."""
        st = self.state
        if st.end_ts is None:
            st.end_ts = now()
            st.total_duration_s = st.end_ts - st.start_ts
        st.status = st.loop_end or "completed"
        self.save()

    def limits_changed(self, values: dict[str, float], reopen: bool,
                       set_aside: list[str]) -> None:
        """`driver resume --budget/--max-iters` changed the loop's limits, recorded in
        limit_changes with the old and new values. `reopen`: the loop had ended on a limit the
        new values lift, so the run goes back to the gate, open again (no loop_end, no end
        time); the old controls' failures move into the record, and the controls and finalize
        run again at the loop's new end (their directories were set aside: `set_aside`)."""
        st = self.state
        change = LimitChange(ts=now(), phase=st.phase, reopened=st.loop_end if reopen else None,
                             changed={k: {"old": getattr(st, k), "new": v} for k, v in values.items()},
                             set_aside=set_aside, phase4_errors=st.phase4_errors if reopen else [])
        for name, value in values.items():
            setattr(st, name, value)
        if reopen:
            st.phase, st.loop_end, st.end_ts, st.total_duration_s = "gate", None, None, None
            st.loop_limits = []
            st.phase4_errors = []
        st.limit_changes.append(change)
        self.save()

    def rendered_only(self) -> None:
        """`driver run --dry-run` stops after introspection and rendering."""
        self.state.phase, self.state.status = "baseline", "dry_run"
        self.state.reason = f"configs rendered by --dry-run; `driver resume {self.rd.path}` trains"
        self.save()

    def aborted(self, reason: str) -> None:
        """A cause no resume can fix (the hub env cannot be loaded)."""
        self.state.status, self.state.reason = "aborted", reason
        self.save()

    def say(self, msg: str) -> None:
        if not self.quiet:
            print(msg, file=sys.stderr, flush=True)

    def iter_dir(self, n: int) -> Path:
        return self.rd.path / f"iter_{n}"
