"""The run model: run.json's typed content (what the user asked for and where the run is) and
metrics.json's typed entries."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from driver.run.defaults import BACKEND_DEFAULTS, BACKENDS, RUN_DEFAULTS, TEACHERS, batch_problem

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
