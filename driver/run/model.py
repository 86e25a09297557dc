"""The run model: the one source of every knob (its default, bounds, help text and flag), run.json's
typed content, and metrics.json's typed entries.

Three layers, each a subclass of the one before, so a field is declared exactly once:
- `Knobs`: what every arm's config is rendered from (the dialects read this and nothing else);
- `RunConfig`: what the user asks for (`driver run`'s flags are generated from these fields,
  driver/commands/flags.py);
- `RunState`: RunConfig plus where the run is (run.json).
A default that depends on the backend is the field's `by_backend` entry; every other default is
the field's own. A rule across fields is a validator here, so the CLI, run.json and the dialects
enforce one statement of it.
"""
from __future__ import annotations

from typing import Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

FORMAT_VERSION = 1

BackendName = Literal["prime_rl", "local", "hosted"]
BACKEND_NAMES: tuple[str, ...] = get_args(BackendName)
TeacherName = Literal["builtin", "agent", "llm"]
TEACHER_NAMES: tuple[str, ...] = get_args(TeacherName)
DialectName = Literal["classic", "current"]
Status = Literal["running", "waiting_teacher", "budget_exhausted", "max_iters_reached", "completed",
                 "failed", "aborted", "dry_run", "cost_exhausted"]

MIN_PROMPTS_PER_STEP = 16   # GRPO compares within groups; fewer prompts a step is mostly noise
# --student-solver: the fewest train rows the solver must answer at full reward to warm-start the
# built-in student (all of a smaller split), and the least share of the split (the env-side job,
# driver/envside/student.py, applies them to the split it reads)
SOLVER_MIN_ROWS, SOLVER_MIN_SHARE = 200, 0.5


def setting(default: Any = None, *, help: str, flag: str | None = None,
            by_backend: dict[str, Any] | None = None, parse: str | None = None,
            resumable: bool = False, **bounds: Any) -> Any:
    """A run-model field that is also a CLI flag. `flag`: its name when not `--field-name`;
    `by_backend`: the default for each backend (then `default` is None: not given); `parse`:
    how the flag's text becomes a value (duration: 10h/30m/45s; json: a JSON object; name: one
    printable line); `resumable`: `driver resume` may change it too."""
    if by_backend is not None and set(by_backend) != set(BACKEND_NAMES):
        # checked at import: a backend added to BackendName without its default here would
        # otherwise reach the validators as a missing value
        missing, extra_names = set(BACKEND_NAMES) - set(by_backend), set(by_backend) - set(BACKEND_NAMES)
        raise TypeError(f"a per-backend default (help: {help[:60]!r}) names no value for "
                        f"{sorted(missing)} and values for unknown backends {sorted(extra_names)}: "
                        f"give every backend in BackendName ({', '.join(BACKEND_NAMES)}) its default")
    extra = {"flag": flag, "by_backend": by_backend, "parse": parse, "resumable": resumable}
    if "default_factory" in bounds:
        return Field(description=help, json_schema_extra={k: v for k, v in extra.items()
                                                          if v not in (None, False)}, **bounds)
    return Field(default, description=help, json_schema_extra={k: v for k, v in extra.items()
                                                               if v not in (None, False)}, **bounds)


def batch_problem(batch_size: int, rollouts_per_example: int) -> str | None:
    """What is wrong with a batch size for a group size, or None: the one statement of the rule
    the run model (flags) and the dialects (a config file's own values) both enforce."""
    if batch_size % rollouts_per_example:
        return (f"batch_size {batch_size} is not divisible by rollouts_per_example "
                f"{rollouts_per_example}")
    prompts = batch_size // rollouts_per_example
    if prompts < MIN_PROMPTS_PER_STEP:
        return (f"batch_size {batch_size} / rollouts_per_example {rollouts_per_example} = "
                f"{prompts} unique prompts per step; GRPO needs at least {MIN_PROMPTS_PER_STEP}")
    return None


# --------------------------------------------------------------------------------------------
# Knobs: what an arm's config is rendered from

class Knobs(BaseModel):
    """The seed procedure's standardized hyperparameters, shared by every arm (a teacher's
    hparams.json may change the ones it names for its own iteration's training)."""
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    # The local row is sized so that a whole default run, controls included, takes about ten
    # minutes on 2 CPU cores; the prime_rl row is the seed procedure's standard for a GPU node.
    # hosted runs prime-rl on the platform's GPU nodes, so it takes the procedure's standard
    # sizes too; its student is Qwen3-4B-Instruct-2507, the model the seeds name for hosted
    # runs, which is in prime-rl's renderer map (preflight refuses any model `prime train
    # models` does not list).
    model: str = setting(
        help="student model, used verbatim in [model] name", parse="name",
        by_backend={"prime_rl": "Qwen/Qwen3-0.6B", "local": "builtin:tiny-char-qwen2",
                    "hosted": "Qwen/Qwen3-4B-Instruct-2507"})
    batch_size: int = setting(
        help="TOTAL rollouts per step, not unique prompts: a multiple of --rollouts-per-example "
             f"giving at least {MIN_PROMPTS_PER_STEP} prompts", ge=1,
        by_backend={"prime_rl": 512, "local": 64, "hosted": 512})
    rollouts_per_example: int = setting(help="group size", ge=1,
                                        by_backend={"prime_rl": 16, "local": 4, "hosted": 16})
    steps_per_run: int = setting(help="new training steps per arm; max_steps is absolute", ge=1,
                                 by_backend={"prime_rl": 100, "local": 30, "hosted": 100})
    max_completion_tokens: int = setting(
        help="completion limit of training and of every eval, set explicitly in both (a "
             "teacher's hparams.json may change its iteration's training limit, never an eval's)",
        ge=1, by_backend={"prime_rl": 1024, "local": 96, "hosted": 1024})
    # local: temperature 0.7 and lr 5e-5, a compromise read off bench/rl_headroom.py on the
    # first-stage demo student (docs/research.md): at 1e-4 iter_0 alone eroded its planted
    # skill, at 1e-5 nothing moved at all. The demo student's planted habit was chosen at these.
    temperature: float = setting(
        help="train rollout sampling temperature in (0, 2], rendered into every arm's "
             "[orchestrator.train.sampling] and used by the probe", gt=0, le=2,
        by_backend={"prime_rl": 1.0, "local": 0.7, "hosted": 1.0})
    lr: float | None = setting(
        help="learning rate of every arm in (0, 1), rendered as [trainer.optim] lr (unset: the "
             "trainer's own default)", gt=0, lt=1,
        by_backend={"prime_rl": None, "local": 5e-5, "hosted": None})
    # local: 4e-5, a smaller anchor step than the iterations' 5e-5, so iter_0's own 30 steps
    # leave more of the demo's planted habit for the teacher's rows to fix (docs/research.md, "A
    # rate between"). Every arm after iter_0 (iterations and controls alike) trains at --lr or
    # its best iteration's hparams.json either way, so C's comparison with the best iteration
    # does not depend on it. Elsewhere unset: iter_0 trains at --lr
    iter0_lr: float | None = setting(
        help="learning rate of iter_0's own training alone, the anchor every iteration and "
             "control starts from, in (0, 1); unset: --lr. A --lr given without it sets "
             "iter_0's rate too; a --base-config's own lr yields to it, as to --lr; refused "
             "beside --init-from, whose iter_0 is trained already", gt=0, lt=1,
        by_backend={"prime_rl": None, "local": 4e-5, "hosted": None})
    seq_len: int = setting(2048, help="trainer sequence length of every arm", ge=256)
    difficulty_filter: bool = setting(
        False,
        help="online difficulty filtering in every arm the driver renders: a group whose rollouts "
             "all score the same (mean reward 0 or 1) carries no GRPO signal, so it leaves the "
             "batch and the step is refilled with other prompts. Classic prime-rl: "
             "[orchestrator.buffer] online_difficulty_filtering = true; current prime-rl filters "
             "zero-advantage groups by default (filter_zero_advantages). A canonical "
             "--base-config keeps its own setting for iter_0")
    eval_examples: int = setting(200, help="hub eval examples per arm's evaluation, of the eval "
                                           "split and of the selection split each: every arm, the "
                                           "controls included, is measured on the same examples",
                                 ge=1)
    # local: 4, seed 003's; prime_rl and hosted: 0, since each draw is one more pass of the eval
    # on the GPU (four draws make an arm's eval five times as long): a user opts in
    eval_draws: int = setting(
        ge=0, le=64, by_backend={"prime_rl": 0, "local": 4, "hosted": 0},
        help="stochastic draws per eval example beside the greedy one (seed 003's second "
             "measurement: a per-draw success rate at temperature 1.0, on --backend local each "
             "draw from a seed common to every arm; 0: greedy only). Where every arm has them "
             "the summary decides on them and prints both. Measured on --backend local and on "
             "current prime-rl (a per-source sampling override); classic prime-rl and hosted "
             "runs share one eval sampling across eval envs, so there the eval is greedy only "
             "and the header says so")
    eval_temperature: float = setting(
        0.0, ge=0, le=2,
        help="sampling temperature of every arm's eval, iter_0's included (0: greedy), rendered "
             "explicitly into every eval config; a canonical --base-config's eval temperature "
             "becomes this value, and its other eval sampling keys are refused")
    wandb: Literal["auto", "on", "off"] = setting(
        "auto",
        help="log every arm the driver renders to W&B: on, off, or auto (on when W&B credentials "
             "are found: WANDB_API_KEY or a `wandb login`; `wandb.init` fails without them in a "
             "detached trainer). `driver run` records the choice; on without credentials is "
             "refused before anything starts")

    @classmethod
    def defaults_for(cls, backend: str, given: dict[str, Any] | None = None) -> dict[str, Any]:
        """The fields whose default depends on the backend, with `backend`'s values, for a run
        given the values `given`."""
        out = {}
        for name, f in cls.model_fields.items():
            extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
            by_backend = extra.get("by_backend")
            if isinstance(by_backend, dict) and backend in by_backend:
                out[name] = by_backend[backend]
        # iter_0's own rate is a default only beside the default --lr: a rate the user gives is
        # iter_0's too. A run.json written before the field always holds lr, so it resumes with
        # iter_0 at its lr
        if given and "lr" in given and "iter0_lr" not in given:
            out["iter0_lr"] = None
        return out

    @classmethod
    def for_backend(cls, backend: str, **given: Any) -> "Knobs":
        """Knobs with `backend`'s defaults under the values given."""
        return cls.model_validate({**cls.defaults_for(backend, given), **given})

    @model_validator(mode="after")
    def _batch_is_whole_groups(self) -> "Knobs":
        problem = batch_problem(self.batch_size, self.rollouts_per_example)
        if problem:
            raise ValueError(problem + " (--batch-size counts rollouts, not prompts)")
        return self

    def for_iter0(self) -> "Knobs":
        """The knobs iter_0 trains with: the run's, at --iter0-lr where it is set."""
        return self if self.iter0_lr is None else self.model_copy(update={"lr": self.iter0_lr})


# --------------------------------------------------------------------------------------------
# What the user asks for

class LLMConfig(BaseModel):
    """The LLM teacher's endpoint. The key itself is never stored: only its variable's name."""
    model_config = ConfigDict(extra="forbid")

    api: Literal["openai", "anthropic"] = setting(
        "openai", help="LLM teacher protocol: an OpenAI-compatible /chat/completions endpoint or "
                       "Anthropic's /v1/messages", resumable=True)
    base_url: str | None = setting(help="LLM teacher endpoint (default: "
                                        "https://api.openai.com/v1 or https://api.anthropic.com); "
                                        "`driver run` asks its model list once before iter_0 "
                                        "trains and warns if it does not answer",
                                   resumable=True)
    model: str | None = setting(help="LLM teacher model name (required with --teacher llm)",
                                parse="name", resumable=True)
    key_env: str | None = setting(help="environment variable holding the API key; the key is "
                                       "never written to disk (default: OPENAI_API_KEY or "
                                       "ANTHROPIC_API_KEY)", resumable=True)
    max_tokens: int = setting(16000, help="reply token limit per call", ge=1, resumable=True)
    timeout_s: float = setting(600, help="how long to wait for one reply: Nh, Nm or Ns", gt=0, flag="--llm-timeout",
                               parse="duration", resumable=True)
    price_in: float | None = setting(help="USD per million input tokens, for cost in metrics.json",
                                     ge=0, resumable=True)
    price_out: float | None = setting(help="USD per million output tokens", ge=0, resumable=True)

    DEFAULT_BASE_URL: ClassVar[dict[str, str]] = {"openai": "https://api.openai.com/v1",
                                                  "anthropic": "https://api.anthropic.com"}
    DEFAULT_KEY_ENV: ClassVar[dict[str, str]] = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

    @model_validator(mode="after")
    def _api_defaults(self) -> "LLMConfig":
        if not self.model:
            raise ValueError("--teacher llm needs --llm-model (and --llm-base-url for a "
                             "non-default endpoint)")
        if self.base_url is None:
            self.base_url = self.DEFAULT_BASE_URL[self.api]
        if self.key_env is None:
            self.key_env = self.DEFAULT_KEY_ENV[self.api]
        return self


class RunConfig(Knobs):
    """What the user asked for (the seed's Phase 0 fields). Every field is a `driver run` flag."""
    dataset: str = setting("stock_arithmetic", help="hub env name (a verifiers environment id)",
                           parse="name")
    hub_id: str | None = setting(help="Prime hub slug (default: primeintellect/<dataset>)",
                                 parse="name")
    budget_seconds: float = setting(
        help="wall-clock budget of the whole run, controls included, counted from the run's "
             "start (the teacher's time and any time the run was stopped included): Nh, Nm or Ns. "
             "The loop starts another iteration only while the time left covers it and the "
             "controls at their measured time (an iteration at the slowest so far, or at iter_0's "
             "training and evaluation before the first; a control at the slowest arm), so the controls run inside it. `driver resume RUN --budget 12h` "
             "extends it, re-opening a loop that ended on it", gt=0, flag="--budget", parse="duration",
        resumable=True,
        by_backend={"prime_rl": 10 * 3600, "local": 2 * 3600, "hosted": 10 * 3600})
    max_cost_usd: float | None = setting(
        flag="--max-cost", gt=0,
        help="a ceiling in USD on what the whole run spends, controls included (Hosted "
             "Training: every launch's larger of its GPU-hours at the rate its dispatch quoted and "
             "`prime train usage`). No launch (a training run, an eval run, a probe, a control's) "
             "is submitted where what the run has spent plus its estimated cost (the costliest "
             "billed launch of its kind) would pass it, and the loop starts another iteration "
             "only while what is spent plus that iteration's and the controls' estimated cost "
             "fits; before anything of a kind is billed, only a spent ceiling refuses. A control "
             "it refuses is recorded as skipped. Only the hosted backend spends money")
    # local: the demo ends on its iteration count, so its result does not depend on how fast
    # the machine is (its budget is a ceiling far above what a 2-core machine needs)
    max_iters: int = setting(help="total iterations including iter_0 (`driver resume RUN "
                                  "--max-iters N` raises it, re-opening a loop that ended on it)",
                             ge=1, resumable=True,
                             by_backend={"prime_rl": 15, "local": 4, "hosted": 15})
    init_from: str | None = setting(
        help="a prior run to reuse as iter_0 (skips training it): a run directory this driver "
             "made, its iter_0/, or a prime-rl output directory (prime_out/ beside run.json and "
             "metrics.json); of the same dialect, hub env and model")
    backend: BackendName = setting(
        help="trainer: prime_rl (uv run rl in a prime-rl checkout), local (the embedded "
             "trainer: CPU, or one GPU when present; needs the [embedded] extra) or hosted "
             "(Prime Intellect's Hosted Training through the `prime` CLI: no GPU needed here) "
             "(default: prime_rl when a checkout is set with --prime-rl-dir or PRIME_RL_DIR, "
             "else local)")
    hosted_volume: str = setting(
        "synthetic-self-improve-rl", parse="name",
        help="hosted backend: the named volume every run of this loop writes to (runs/<runId>/ "
             "on it); iterations fork iter_0's checkpoint from it. Created by the first "
             "submission if absent, at the CLI's default size (5Ti): create it first with "
             "`prime volumes create NAME --size 500Gi` to choose")
    prime_rl_dir: str | None = setting(help="prime-rl checkout (or set PRIME_RL_DIR)")
    base_config: str | None = setting(
        help="canonical iter_0 rl.toml (default: the prime-rl checkout's configs/<env>/rl.toml "
             "when there is one, else rendered from templates)")
    settings_from: str | None = setting(
        help="where the hub env has no canonical config: another env's canonical rl.toml whose "
             "settings (trainer, optimizer, inference, sampling, batch, deployment; never its "
             "envs) every arm and iter_0 train with. Default: the closest in the prime-rl "
             "checkout (same model, else same model size), named in the run header; `none` "
             "trains on prime-rl's defaults")
    env_args: dict = setting(
        default_factory=dict, parse="json",
        help="JSON object of load_environment arguments for the hub env; every hub env block "
             "(iter_0's train env, every eval, run B's real data) gets them")
    student_solver: str | None = setting(
        help="--backend local, built-in student: a Python file defining solve(question: str, "
             "info: dict) -> str | None, a completion in the env's answer format for one train "
             "row (None: cannot). Before anything is created it runs on the env's train rows "
             "(never an eval row); the completions the env's rubric scores at full reward, at "
             f"least {SOLVER_MIN_ROWS} (all of a smaller split) and {SOLVER_MIN_SHARE:.0%} of the "
             "split, become the student's warm-start corpus (recipe corpus=solver). On a multi-turn "
             "env it defines next_move(messages: list[dict], info: dict) -> str | None instead, "
             "asked once per turn with the conversation so far while the env plays each train "
             "row; the episodes the rubric scores at full reward become the corpus")
    teacher: TeacherName = setting(
        "builtin", resumable=True,
        help="who writes weakness reports and generators: builtin (no LLM; needs a family "
             "generator for the env), agent (stops with exit 3 and a TEACHER.md brief for a "
             "coding agent), llm (an API; see --llm-*)")
    llm: LLMConfig | None = setting(help="the LLM teacher's settings (--llm-*)", flag="--llm-",
                                    resumable=True)
    teacher_retries: int = setting(3, help="gate failures before an iteration is skipped", ge=1)
    # A healthy prime-rl arm is silent for long stretches only at two places: while vLLM and the
    # trainer start, and while the final eval runs (a full-split eval writes its file once, at
    # the end). Each place has its own limit; the poll's hard cap is their sum over the arm's
    # steps, so it never stops a working arm (the procedure budgets ~2.5 h per control arm).
    startup_timeout_s: float = setting(
        flag="--startup-timeout", parse="duration", gt=0, resumable=True,
        by_backend={"prime_rl": 3600, "local": 600, "hosted": 3600},
        help="a launch that writes no train step for this long after it starts (model loading, "
             "vLLM start-up, the embedded trainer building its built-in student) is stopped and the "
             "arm marked failed; `driver resume` retrains it (`driver resume --startup-timeout D` "
             "with a longer one)")
    stall_timeout_s: float = setting(
        1800, flag="--stall-timeout", parse="duration", gt=0, resumable=True,
        help="a trainer that writes no new train step for this long between two steps (nor, on "
             "prime-rl's current generation, an episode to the step under way: it keeps writing "
             "them through empty batches until its own abort) is stopped and the arm marked "
             "failed; `driver resume` retrains it")
    eval_timeout_s: float = setting(
        flag="--eval-timeout", parse="duration", gt=0, resumable=True,
        by_backend={"prime_rl": 7200, "local": 1800, "hosted": 7200},
        help="after an arm's last train step (or from launch, for a final-weights eval), how long "
             "its eval may take to complete before the launch is stopped and the arm marked "
             "failed")
    queue_timeout_s: float = setting(
        21600, flag="--queue-timeout", parse="duration", gt=0, resumable=True,
        help="--backend hosted: how long a run may wait in the platform's queue (QUEUED, PENDING; "
             "unbilled, and never counted against --startup-timeout, whose clock starts when the "
             "run starts) before the driver stops it and marks the arm failed; `driver resume` "
             "submits it again (`driver resume --queue-timeout D` with a longer wait)")
    stop_grace_s: float | None = setting(
        flag="--stop-grace", parse="duration", gt=0,
        by_backend={"prime_rl": None, "local": 10, "hosted": 10},
        help="when a launch must be stopped (a stall, a timeout): how long its launcher's own "
             "cleanup gets after SIGTERM before every process it started is SIGKILLed (default "
             "for prime_rl: its launcher's cleanup limit with the default processes, "
             "rl_contract/launch.py)")
    probe_prompts: int = setting(
        32, ge=0, help="pre-training gradient probe: the anchor student samples a group on this "
                       "many generated rows; 0 turns it off")
    hosted_probe_share: float = setting(
        0.1, ge=0, le=1,
        help="hosted backend: the probe is a paid one-step run per iteration; it runs only when "
             "its estimated cost (from iter_0's measured start-up and step time, stated before "
             "it runs) is at most this share of an arm's; 1 always runs it")
    probe_min_live: float = setting(
        0.1, ge=0, le=1, help="a dataset whose probe has fewer live groups (outcome varies) than "
                              "this fraction goes back to the teacher, in [0, 1]")
    seed: int = setting(0, help="seed for every random choice")

    @model_validator(mode="before")
    @classmethod
    def _fill(cls, values: Any) -> Any:
        # a field left out takes its backend's default; one present (even as None: lr = None
        # leaves the trainer's own) is the run's choice
        if isinstance(values, dict):
            values = dict(values)
            backend = values.get("backend")
            # an iter_0 reused (--init-from) has trained already: no rate of its own by default
            if values.get("init_from"):
                values.setdefault("iter0_lr", None)
            if isinstance(backend, str):
                for name, default in cls.defaults_for(backend, values).items():
                    values.setdefault(name, default)
            if not values.get("hub_id") and values.get("dataset"):
                values["hub_id"] = f"primeintellect/{values['dataset']}"
        return values

    @model_validator(mode="after")
    def _teacher_settings(self) -> "RunConfig":
        if self.teacher == "llm" and self.llm is None:
            raise ValueError("--teacher llm needs --llm-model (and --llm-base-url for a "
                             "non-default endpoint)")
        if self.student_solver and not (self.backend == "local" and self.model.startswith("builtin:")):
            raise ValueError("--student-solver warm-starts the embedded trainer's built-in student: "
                             "it needs --backend local and --model builtin:tiny-char-qwen2[?settings] "
                             f"(this run: --backend {self.backend}, --model {self.model})")
        if self.init_from and self.iter0_lr is not None:
            raise ValueError("--iter0-lr sets iter_0's own training, and --init-from reuses an "
                             "iter_0 already trained: give one of them")
        return self


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
    # its log; the launch's process tree is recorded beside it (<log>.tree.json), so a stop
    # reaches every process it started, those in sessions of their own included
    log: str | None = None
    # the arm's steps: it starts after start_step (its resume step) and ends at final_step,
    # so `driver status` reads progress without knowing how arms are named or resumed
    start_step: int = 0
    final_step: int | None = None
    # a hosted launch (driver/backends/hosted/) has no local process: it is the platform's
    # run with this id (pid and create_time are 0), found again by the id, never resubmitted
    run_id: str | None = None

    @property
    def handle(self) -> str:
        """How a message names the launch: its hosted run id, else its pid."""
        return f"run {self.run_id}" if self.run_id else f"pid {self.pid}"


class LimitChange(BaseModel):
    """One `driver resume --budget/--max-iters`: the old and new value of each limit it changed,
    and, when the loop had ended on a limit, what re-opening it set aside (the controls, measured
    against the old best iteration, run again at the new end)."""
    ts: float
    phase: str                                # where the run was
    changed: dict[str, dict[str, int | float]]   # {"budget_seconds": {"old": .., "new": ..}}
    reopened: str | None = None               # the loop_end it re-opened; None: the loop was open
    set_aside: list[str] = Field(default_factory=list)        # control dirs, renamed *.before-K
    phase4_errors: list[str] = Field(default_factory=list)    # the old controls' failures


class RunState(RunConfig):
    """The single source of truth for a run: what the user asked for and where the run is.
    Built once by `driver run` and validated then: a value out of range or two knobs that
    disagree fail before a run directory exists."""
    format_version: int = FORMAT_VERSION
    start_ts: float
    dialect: DialectName = Field("classic", description="the configs and layout the trainer speaks "
                                 "(driver.dialects.WINDOWS), chosen from the prime-rl checkout's version")
    prime_rl_version: str | None = Field(None, description="the version the dialect was chosen from")
    prime_rl_version_source: str | None = Field(None, description="where that version was read")
    env_tag: str | None = None        # suffix of generated env package names, unique per run
    # Where the run is
    status: Status = "running"
    # every phase loop.py routes between: the loop's own, and one per control arm
    # (driver.arms.table); checked against that table where run.json is opened
    phase: str = "introspect"
    iteration: int = 0
    loop_end: Literal["budget_exhausted", "max_iters_reached", "cost_exhausted"] | None = None
    # every limit the loop's end reached, loop_end first (a run can reach its budget and its
    # iteration cap at one gate); empty in a run.json written before the field: [loop_end] then
    loop_limits: list[Literal["budget_exhausted", "max_iters_reached", "cost_exhausted"]] = \
        Field(default_factory=list)
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
    # current dialect: the name of iter_0's one train source (a canonical config's own), which
    # every arm forking iter_0's checkpoint keeps (prime-rl refuses a renamed source)
    iter_0_train_source: str | None = None
    limit_changes: list[LimitChange] = Field(default_factory=list)   # `driver resume --budget ...`
    end_ts: float | None = None
    total_duration_s: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _written_before_draws(cls, values: Any) -> Any:
        # a run.json written before --eval-draws existed measured greedy only: resuming it keeps
        # that, so its later arms stay comparable with its earlier ones
        if isinstance(values, dict) and "format_version" in values and "eval_draws" not in values:
            values = {**values, "eval_draws": 0}
        return values

    def knobs(self) -> Knobs:
        """The run's knobs (the dialects render every arm from these, or an arm's copy)."""
        return Knobs.model_validate(self.model_dump(include=set(Knobs.model_fields)))

    def limits_reached(self) -> list[str]:
        """Every limit the loop's end reached, the one it is recorded under (loop_end) first; a
        run.json from before loop_limits names loop_end alone; [] while the loop is open."""
        return list(self.loop_limits) or ([self.loop_end] if self.loop_end else [])


# --------------------------------------------------------------------------------------------
# metrics.json

class ArmMetrics(BaseModel):
    """One metrics.json entry: an iteration (`iter`) or a control run (`run`). Numbers only, and
    the names of the files they came from; eval rollout text never reaches this file."""
    model_config = ConfigDict(extra="forbid")

    iter: int | None = Field(None, ge=0, description="iteration index (the iters section)")
    run: str | None = Field(None, description="control arm name (the controls section; "
                                              "driver.arms.table)")
    skipped: bool | None = Field(None, description="the iteration's datasets were all rejected")
    reason: str | None = None                 # why it was skipped
    failures: list[str] | None = None         # the rejection lines, at most ten
    source: str | None = None                 # iter_0: trained, or init-from
    eval_acc: float | None = Field(None, ge=0, le=1, description="eval split accuracy")
    eval_reward_mean: float | None = None
    eval_lenient_acc: float | None = Field(None, ge=0, le=1)
    n_eval: int | None = Field(None, ge=0, description="scored eval examples")
    n_errored: int | None = Field(None, ge=0, description="eval episodes that errored (a model or "
                                  "env-server error): counted apart, never as wrong answers")
    selection_acc: float | None = Field(None, ge=0, le=1,
                                        description="selection split accuracy, when the hub has one")
    n_selection: int | None = Field(None, ge=0)
    draws_acc: float | None = Field(None, ge=0, le=1, description="eval split: the per-draw "
                                    "success rate over --eval-draws stochastic draws per example")
    n_draws: int | None = Field(None, ge=0, description="scored draws behind draws_acc")
    selection_draws_acc: float | None = Field(None, ge=0, le=1,
                                              description="the selection split's per-draw success rate")
    rows_from: dict[str, int] | None = Field(None, description="where `rows` came from, by source, "
                                             "when an arm trains on rows of several (run B)")
    train_reward_mean: float | None = None
    train_diagnose: dict | None = None        # driver.analysis.diagnose's figures for the last step
    checkpoint: str | None = None
    rows: int | None = Field(None, ge=0, description="training rows behind the arm")
    final_step: int | None = Field(None, ge=0)
    delta_vs_prev: float | None = None
    verdict: str | None = None                # evaluation.verdict against the previous iteration
    probe: dict | None = None                 # the gradient probe's figures
    hparams: dict | None = None               # the teacher's hparams.json, as applied
    teacher_usage: dict | None = None         # LLM teacher tokens and cost
    cost_usd: float | None = Field(None, ge=0, description="what the arm's hosted runs cost "
                                   "(`prime train usage`: training, its eval run, failed attempts)")
    env_hub_ref: str | None = Field(None, description="the arm's generated env as published to "
                                    "the Environments Hub (owner/name@version), for hosted runs")
    best_iter: int | None = Field(None, ge=1, description="the iteration a control replays")
    rows_made: str | None = Field(None, description="how a control's rows were made (its row source)")
    gate_differs: list[str] | None = Field(None, description="the gate lines not about aim that a "
                                           "control's untargeted rows fail where the teacher's passed")
    eval_config: dict | None = None           # the eval configuration it was measured with

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
        name = field if flags is None else flags.get(field, "--" + field.replace("_", "-").replace(".", "-"))
        clauses.append(f"{name} {err.get('input')!r}: {msg}" if "input" in err else f"{name}: {msg}")
    return "; ".join(clauses)
