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

from pydantic import BaseModel, Field, ValidationError, model_validator

from driver import faults
from driver.defaults import BACKEND_DEFAULTS, BACKENDS, RUN_DEFAULTS, TEACHERS, batch_problem
from driver.errors import DriverError, UsageError

FORMAT_VERSION = 1

Status = Literal[
    "running", "waiting_teacher", "budget_exhausted", "max_iters_reached", "completed",
    "failed", "aborted",
]
# every phase loop.py routes between (its module docstring draws the order)
Phase = Literal["introspect", "baseline", "gate", "weakness", "dataset", "environment", "probe",
                "train", "evaluate", "run_a", "run_b", "run_c", "finalize", "done"]
Backend = Literal[BACKENDS]
Teacher = Literal[TEACHERS]
Dialect = Literal["classic", "current"]


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
    # its start as seconds since boot, which no clock adjustment moves (the identity check's
    # key; absent in records written before it existed, which compare create_time)
    started_since_boot: float | None = None
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
    """The single source of truth for a run: what the user asked for and where the run is.
    Built once by `driver run` (RunState.create fills the backend's defaults) and validated
    then: a value out of range or two knobs that disagree fail before a run directory exists."""
    model_config = {"extra": "forbid", "validate_assignment": True}

    format_version: int = FORMAT_VERSION
    # What the user asked for (the seed's Phase 0 fields)
    dataset: str
    hub_id: str
    model: str
    start_ts: float
    budget_seconds: float = Field(gt=0, description="wall-clock cap of the iteration loop")
    max_iters: int = Field(RUN_DEFAULTS["max_iters"], ge=1, description="total iterations including iter_0")
    batch_size: int = Field(ge=1, description="rollouts per step (prompts x rollouts_per_example)")
    rollouts_per_example: int = Field(16, ge=1, description="GRPO group size")
    steps_per_run: int = Field(100, ge=1, description="optimizer steps each arm trains")
    eval_examples: int = Field(RUN_DEFAULTS["eval_examples"], ge=1, description="eval examples per iteration")
    max_completion_tokens: int = Field(1024, ge=1)
    temperature: float = Field(1.0, gt=0, le=2,
                               description="train rollout sampling temperature (prime-rl's default 1.0)")
    lr: float | None = Field(None, gt=0, lt=1,
                             description="[trainer.optim] lr of every arm; None: the trainer's default")
    difficulty_filter: bool = Field(
        RUN_DEFAULTS["difficulty_filter"],
        description="every arm drops groups whose rollouts all score the same (mean reward 0 or 1) "
                    "and refills its batch: classic [orchestrator.buffer] online_difficulty_filtering, "
                    "current [orchestrator.train] filter_zero_advantages (already its default)")
    init_from: str | None = None
    backend: Backend
    teacher: Teacher = RUN_DEFAULTS["teacher"]
    dialect: Dialect = Field("classic", description="the configs and layout the trainer speaks "
                             "(driver.dialects.WINDOWS), chosen from the prime-rl checkout's version")
    prime_rl_version: str | None = Field(None, description="the version the dialect was chosen from")
    prime_rl_version_source: str | None = Field(None, description="where that version was read")
    seed: int = RUN_DEFAULTS["seed"]
    prime_rl_dir: str | None = None
    base_config: str | None = None
    env_args: dict = Field(default_factory=dict, description="--env-args: every hub env block gets them")
    teacher_retries: int = Field(RUN_DEFAULTS["teacher_retries"], ge=1)
    stall_timeout_s: float = Field(RUN_DEFAULTS["stall_timeout_s"], gt=0,
                                   description="a trainer with no new step or eval row for this long is stopped")
    probe_prompts: int = Field(RUN_DEFAULTS["probe_prompts"], ge=0, description="0 turns the pre-training gradient probe off")
    probe_min_live: float = Field(RUN_DEFAULTS["probe_min_live"], ge=0, le=1,
                                  description="live fraction below which a dataset carries no gradient")
    llm: LLMConfig | None = None
    env_tag: str | None = None        # suffix of generated env package names, unique per run
    # Where the run is
    status: Status = "running"
    phase: Phase = "introspect"
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

    @classmethod
    def create(cls, backend: str, **given) -> "RunState":
        """A new run's state: `given` values (None = not given) over the backend's defaults."""
        values = dict(BACKEND_DEFAULTS.get(backend, {}))
        values.update({k: v for k, v in given.items() if v is not None})
        return cls(backend=backend, **values)

    @model_validator(mode="after")
    def _knobs_agree(self) -> "RunState":
        problem = batch_problem(self.batch_size, self.rollouts_per_example)
        if problem:
            raise ValueError(problem + " (--batch-size counts rollouts, not prompts)")
        return self


class ArmMetrics(BaseModel):
    """One metrics.json entry: an iteration (`iter`) or a control run (`run`). Numbers only, and
    the names of the files they came from; eval rollout text never reaches this file."""
    model_config = {"extra": "forbid"}

    iter: int | None = Field(None, ge=0, description="iteration index (the iters section)")
    run: Literal["run_a", "run_b", "run_c"] | None = Field(None, description="control (controls)")
    skipped: bool | None = Field(None, description="the iteration's datasets were all rejected")
    reason: str | None = None                 # why it was skipped
    failures: list[str] | None = None         # the rejection lines, at most ten
    source: str | None = None                 # iter_0: trained, or init-from
    eval_acc: float | None = Field(None, ge=0, le=1, description="eval split accuracy")
    eval_reward_mean: float | None = None
    eval_lenient_acc: float | None = Field(None, ge=0, le=1)
    n_eval: int | None = Field(None, ge=0)
    selection_acc: float | None = Field(None, ge=0, le=1,
                                        description="selection split accuracy, when the hub has one")
    n_selection: int | None = Field(None, ge=0)
    train_reward_mean: float | None = None
    train_diagnose: dict | None = None        # driver.diagnose's figures for the last step
    checkpoint: str | None = None
    rows: int | None = Field(None, ge=0, description="training rows behind the arm")
    final_step: int | None = Field(None, ge=0)
    delta_vs_prev: float | None = None
    verdict: str | None = None                # evaluation.verdict against the previous iteration
    probe: dict | None = None                 # the gradient probe's figures
    hparams: dict | None = None               # the teacher's hparams.json, as applied
    teacher_usage: dict | None = None         # LLM teacher tokens and cost
    best_iter: int | None = Field(None, ge=1, description="the iteration a control replays")

    @model_validator(mode="after")
    def _one_kind(self) -> "ArmMetrics":
        if (self.iter is None) == (self.run is None):
            raise ValueError("an entry names exactly one of iter (an iteration) or run (a control)")
        return self


def validation_message(e: ValidationError, flags: dict[str, str] | None = None) -> str:
    """A pydantic error as one clause per problem. With `flags` (the CLI's), a field is named
    by the flag that sets it (`--field-name` unless `flags` says otherwise); without, by its
    own name (a run.json or metrics.json field)."""
    clauses = []
    for err in e.errors():
        field = ".".join(str(x) for x in err.get("loc", ()))
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        if not field:
            clauses.append(msg)
            continue
        name = field if flags is None else flags.get(field, "--" + field.replace("_", "-"))
        clauses.append(f"{name} {err.get('input')!r}: {msg}" if "input" in err else f"{name}: {msg}")
    return "; ".join(clauses)


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

    def __exit__(self, *exc) -> None:
        self.release()


def now() -> float:
    return time.time()
