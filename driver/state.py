"""The run directory: run.json (one typed model), metrics.json, the scratchpad, the lock.

Every file here is written atomically (temp file, fsync, rename, fsync of the directory), so a
driver killed at any instant leaves either the old or the new version, never half of one.
"""
from __future__ import annotations

import fcntl
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from driver import faults
from driver.errors import DriverError, UsageError

FORMAT_VERSION = 1

Status = Literal[
    "running", "waiting_teacher", "budget_exhausted", "max_iters_reached", "completed",
    "failed", "aborted",
]


# --------------------------------------------------------------------------------------------
# Atomic files

def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        faults.point(f"write:{path.name}")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def iter_jsonl(path: Path):
    """(line number, parsed value) for each non-blank line; the value is None when the line is
    not JSON. Callers decide what a bad line means (an error, a gate failure, a retrain)."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError:
                yield n, None


# --------------------------------------------------------------------------------------------
# run.json

class PhaseRecord(BaseModel):
    phase: str
    iteration: int | None = None
    start_ts: float
    end_ts: float | None = None
    outcome: str | None = None


class TrainerProcess(BaseModel):
    """A detached trainer: pid plus create time, so a recycled pid is never mistaken for it."""
    pid: int
    create_time: float
    output_dir: str
    config_paths: list[str]
    launched_ts: float
    # the arm's steps: it starts after start_step (its resume step) and ends at final_step,
    # so `driver status` reads progress without knowing how arms are named or resumed
    start_step: int = 0
    final_step: int | None = None


class LLMConfig(BaseModel):
    """The LLM teacher's endpoint. The key itself is never stored: only its variable's name."""
    model_config = {"extra": "forbid"}

    api: Literal["openai", "anthropic"] = "openai"
    base_url: str
    model: str
    key_env: str
    max_tokens: int = 16000
    timeout_s: float = 600
    price_in: float | None = None     # USD per million input tokens
    price_out: float | None = None    # USD per million output tokens


class RunState(BaseModel):
    """The single source of truth for a run: what the user asked for and where the run is."""
    model_config = {"extra": "forbid"}

    format_version: int = FORMAT_VERSION
    # What the user asked for (the seed's Phase 0 fields)
    dataset: str
    hub_id: str
    model: str
    start_ts: float
    budget_seconds: float
    max_iters: int
    batch_size: int
    rollouts_per_example: int = 16
    steps_per_run: int = 100
    eval_examples: int = 200
    max_completion_tokens: int = 1024
    temperature: float = 1.0          # train rollout sampling temperature (prime-rl's default 1.0)
    lr: float | None = None           # [trainer.optim] lr of every arm; None: the trainer's default
    init_from: str | None = None
    backend: str
    teacher: str
    dialect: str = "classic"
    seed: int = 0
    prime_rl_dir: str | None = None
    base_config: str | None = None
    env_args: dict = Field(default_factory=dict)   # --env-args: every hub env block gets them
    teacher_retries: int = 3
    stall_timeout_s: float = 1800     # a trainer with no new step or eval row for this long is stopped
    probe_prompts: int = 32           # 0 turns the pre-training gradient probe off
    probe_min_live: float = 0.1       # live fraction below which a dataset carries no gradient
    llm: LLMConfig | None = None
    env_tag: str | None = None        # suffix of generated env package names, unique per run
    # Where the run is
    status: Status = "running"
    phase: str = "introspect"
    iteration: int = 0
    loop_end: str | None = None
    reason: str | None = None
    history: list[PhaseRecord] = Field(default_factory=list)
    trainer: TrainerProcess | None = None
    compact_warnings: list[str] = Field(default_factory=list)
    # set when DRIVER_RL_COMMAND replaced prime-rl's `rl`: the command that produced the numbers
    trainer_stand_in: str | None = None
    phase4_errors: list[str] = Field(default_factory=list)
    iter_0_source: str | None = None
    iter_0_path: str | None = None
    iter_0_step: int | None = None
    end_ts: float | None = None
    total_duration_s: float | None = None


class RunDir:
    """Paths and typed reads/writes for one run directory."""

    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()

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
            fields = ", ".join(".".join(str(p) for p in err["loc"]) or "(root)" for err in e.errors())
            raise UsageError(
                f"run.json in {self.path} does not match the run format (bad fields: {fields}). "
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
        return m

    def upsert_metric(self, section: str, key: str, entry: dict) -> None:
        """Insert or replace the entry whose `key` field matches: an iteration is never counted
        twice, whatever the number of resumes."""
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

    def __exit__(self, *exc) -> None:
        self.release()


def now() -> float:
    return time.time()
