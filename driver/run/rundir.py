"""The run directory: the one owner of run.json and metrics.json, and the lock that keeps a
second driver out."""
from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

from pydantic import ValidationError

from driver import clock
from driver.errors import DriverError, UsageError
from driver.run.files import atomic_write_json, read_json
from driver.run.model import FORMAT_VERSION, ArmMetrics, RunState, validation_message


class RunDir:
    """Paths and typed reads/writes for one run directory."""

    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()

    @classmethod
    def create(cls, root: str | Path, dataset: str) -> "RunDir":
        """A new, empty run directory under `root`: `<dataset>-<UTC stamp>[-k]`."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        name = dataset.replace("/", "_")
        path, k = Path(root) / f"{name}-{stamp}", 2
        while path.exists():
            path, k = Path(root) / f"{name}-{stamp}-{k}", k + 1
        path.mkdir(parents=True)
        return cls(path)

    # paths ---------------------------------------------------------------------------------
    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def metrics_json(self) -> Path:
        return self.path / "metrics.json"

    @property
    def scratchpad(self) -> Path:
        return self.path / "scratchpad.md"

    @property
    def hub_env_json(self) -> Path:
        return self.path / "hub_env.json"

    def arm_dir(self, arm: str) -> Path:
        return self.path / arm

    # run.json ------------------------------------------------------------------------------
    def load(self) -> RunState:
        if not self.run_json.exists():
            raise UsageError(
                f"{self.path} is not a run directory (no run.json). "
                "Start a run with `driver run`, or pass the directory that `driver run` printed."
            )
        try:
            raw = read_json(self.run_json)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise UsageError(
                f"run.json in {self.path} is corrupted ({e}). Nothing was changed. Restore it from "
                "a backup, or start a new run; the other files in the directory are intact."
            ) from None
        if isinstance(raw, dict) and isinstance(raw.get("format_version"), int) \
                and raw["format_version"] > FORMAT_VERSION:
            raise UsageError(
                f"run.json in {self.path} has format_version {raw['format_version']}, newer than "
                f"this driver understands ({FORMAT_VERSION}). Upgrade the driver "
                "(pip install -U synthetic-self-improve-rl) and resume again."
            )
        try:
            return RunState.model_validate(raw)
        except ValidationError as e:
            raise UsageError(
                f"run.json in {self.path} does not match the run format ({validation_message(e)}). "
                "Nothing was changed. Restore the file from a backup or start a new run."
            ) from None

    def save(self, state: RunState) -> None:
        atomic_write_json(self.run_json, state.model_dump(mode="json"))

    # metrics.json --------------------------------------------------------------------------
    def load_metrics(self) -> dict:
        if not self.metrics_json.exists():
            return {"iters": [], "controls": []}
        try:
            m = read_json(self.metrics_json)
            if not isinstance(m, dict):
                raise ValueError("not a JSON object")
        except (ValueError, UnicodeDecodeError) as e:
            raise UsageError(
                f"metrics.json in {self.path} is corrupted ({e}). Nothing was changed. Restore it "
                "from a backup; every arm's numbers can also be rebuilt from its "
                "eval_summary.json.") from None
        m.setdefault("iters", [])
        m.setdefault("controls", [])
        for section in ("iters", "controls"):
            for entry in m[section]:
                try:
                    ArmMetrics.model_validate(entry)
                except ValidationError as e:
                    raise UsageError(
                        f"metrics.json in {self.path} has a bad {section} entry "
                        f"({validation_message(e)}). Nothing was changed. Restore it from a "
                        "backup; every arm's numbers can also be rebuilt from its "
                        "eval_summary.json.") from None
        return m

    def put_run_figure(self, name: str, figure: dict) -> None:
        """A figure of the whole run beside the arms' entries (the summary's replay noise),
        written only when it changed."""
        m = self.load_metrics()
        if m.get(name) != figure:
            m[name] = figure
            atomic_write_json(self.metrics_json, m)

    def upsert_metric(self, section: str, key: str, entry: dict) -> None:
        """Insert or replace the entry whose `key` field matches: an iteration is never counted
        twice, whatever the number of resumes."""
        # typed on the way in: a misspelt or mistyped figure fails here, not in a later reader
        entry = ArmMetrics.model_validate(entry).model_dump(mode="json", exclude_unset=True)
        m = self.load_metrics()
        rows = [r for r in m[section] if r.get(key) != entry[key]]
        rows.append(entry)
        rows.sort(key=lambda r: r[key])
        m[section] = rows
        atomic_write_json(self.metrics_json, m)


# --------------------------------------------------------------------------------------------
# The lock

class RunLock:
    """An exclusive flock on RUN_DIR/.lock holding the owner's pid. The kernel drops the lock
    when its holder dies, so a SIGKILLed driver never leaves a stale lock behind."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / ".lock"
        self.fd: int | None = None

    def acquire(self) -> "RunLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise DriverError(
                f"{self.path.parent} is in use by another driver (pid {holder}). Wait for it "
                f"to finish, watch it with `driver status {self.path.parent}`, or stop it "
                f"(kill {holder}) before resuming.", exit_code=2,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def now() -> float:
    """The time of day a record is stamped with (driver.clock.wall)."""
    return clock.wall()
