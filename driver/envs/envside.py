"""The driver's client for the env-side jobs (driver/envside): a typed request in, a typed
response out.

Every job that loads an environment (introspection, row counts, train resamples, the gate's
scoring, eval fingerprints) runs in the interpreter that trains, so what it sees is what the
trainer will see; the driver itself never imports verifiers. `call` writes the request as JSON,
runs `driver/envside/call.py ACTION REQUEST.json RESPONSE.json` there (forked from the warm
worker, driver/envs/worker.py, where it can), and reads the response back into its model. A job
that raises comes back as an EnvsideError carrying the exception's type, message and traceback.

Each action says which module runs it (classic.py for verifiers' classic environments,
taskset.py for v1 tasksets) and whether it needs the verifiers v1 worker. The interpreter's own
facts (interpreter.py: which modules it finds, where it installs) run in a fresh process of it
instead: they come before an env is installed, where verifiers may be missing, and must see the
interpreter as it starts now (a .pth file an install just wrote included).
"""
from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, NamedTuple, TypeVar

from pydantic import BaseModel, ConfigDict

from driver.envs import worker

CALL = worker.ENVSIDE / "call.py"
CLASSIC, TASKSET = "environment", "taskset"   # hub_env.json `kind`: a classic env, a v1 taskset


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------------------------
# Requests

class EnvRequest(_Model):
    """Which environment: its id, and the loader arguments (a taskset's config fields)."""
    env_id: str
    env_args: dict[str, Any] = {}


class IntrospectRequest(EnvRequest):
    module: str | None = None   # a classic env's module: does its loader take an eval_split?


class CountRequest(_Model):
    env_id: str                 # an installed generated env, loaded with no arguments


class SampleRequest(EnvRequest):
    n: int
    seed: str
    dest: str                   # the JSONL file the rows are written to
    # a classic env whose reward reads its own state: the attribute holding its scorer, whose
    # entry for each row goes into the row's info.entry, as a generated row carries it
    scorer_attr: str | None = None


class ScoreRequest(EnvRequest):
    dataset: str                # the generated rows (JSONL)
    system_prompt: str = ""     # a taskset's (a classic env scores with its own)
    # a classic env: hub_env.json's reward_reads_env_state; None: the job looks itself
    reward_reads_env_state: dict[str, Any] | None = None


class StudentRequest(EnvRequest):
    model: str                  # the run's --model: a built-in recipe (builtin:tiny-char-qwen2?...)
    estimate: bool = False      # measure what building it would cost here (a few SFT steps)


class SolverRequest(EnvRequest):
    solver: str                 # the user's solver file: solve(question, info) -> str | None
    min_rows: int               # the corpus is written only with at least min(min_rows, split)
    min_share: float            # ... and min_share of the split passing


class ModelFilesRequest(_Model):
    model: str                  # the base model's name (or directory), as training loaded it
    dest: str                   # where its config, generation config and tokenizer go


class ModulesRequest(_Model):
    modules: list[str]          # module names, as `import` takes them


class ModuleRequest(_Model):
    module: str


class NoArguments(_Model):
    """A job that needs nothing but the interpreter it runs in."""


class AuxRequest(_Model):
    aux_file: str               # the teacher's aux_rewards.py, loaded by path
    dataset: str                # the generated rows (JSONL)
    call_timeout: float = 5.0   # seconds per call of one function on one row


# --------------------------------------------------------------------------------------------
# Responses

class RubricFunc(_Model):
    name: str
    weight: float
    rubric_class: str


class HubInfo(_Model):
    """hub_env.json's content, as the env-side job reads it from the loaded environment."""
    kind: str | None = None           # set by a taskset only
    env_class: str
    env_module: str
    # the installed distribution that provides env_module ({"name", "version"}): what a generated
    # env that loads the hub env by id declares as its requirement
    distribution: dict[str, str | None] | None = None
    parser_class: str | None
    parser_module: str | None
    rubric_class: str
    rubric_funcs: list[RubricFunc]
    system_prompt: str
    train_size: int
    eval_size: int
    train_columns: list[str]
    sample_train_rows: list[dict[str, Any]]
    selection: dict[str, Any] | None
    info_keys_read: list[str] | None
    split_field: str | None = None    # the taskset's split config field
    train_args: dict[str, Any] | None = None
    eval_args: dict[str, Any] | None = None
    # a classic env: the class a generated env is built on, and why ({"class", "module", "why"})
    generated_env_class: dict[str, str | None] | None = None
    # a classic env: whether a reward scores against the env's own state, not the row
    # ({"verdict": "yes" | "no" | "undetermined", "funcs", "evidence", "scorer"}; row_truth.py)
    reward_reads_env_state: dict[str, Any] | None = None
    # a classic env: how its episodes go ({"kind": "single_turn" | "multi_turn" | "tools",
    # "max_turns", "settings", "stop_conditions", "env_response", "tools",
    # "env_info_keys_read"}; envside/episodes.py)
    interaction: dict[str, Any] | None = None

    def as_dict(self) -> dict:
        """The fields the job set (a classic env's has no taskset fields)."""
        return self.model_dump(exclude_unset=True)


class Fingerprints(_Model):
    """The eval split's rare word n-gram hashes (driver/envside/fingerprint.py); no eval text."""
    n: int
    eval_rows: int
    rows: list[list[str]]


class Introspected(_Model):
    hub: HubInfo
    fingerprints: Fingerprints | None = None


class RowCount(_Model):
    rows: int


class ScoredRow(_Model):
    line: int
    template: list[Any]               # [domain, sub_domain]
    reward: float
    errors: list[str]


class Scored(_Model):
    ceiling: float                    # the full reward: the sum of the positive weights
    rows: list[ScoredRow]


class AuxFault(_Model):
    name: str                         # the aux function
    kind: str                         # value (not a number in [0, 1]), error, timeout, missing
    detail: str                       # the first offending value's repr, or the exception's text
    count: int                        # rows with this fault
    lines: list[int]                  # up to five of their line numbers


class AuxChecked(_Model):
    rows: int                         # rows the functions were called on
    functions: list[str]
    load_error: str | None            # aux_rewards.py did not load: why
    faults: list[AuxFault]


class StudentCheck(_Model):
    """Can the embedded trainer build its built-in student for this env (envside/student.py)?
    The facts; the driver draws the verdict (backends/local_student.py)."""
    recipe: bool                      # the model names the built-in recipe
    known: str                        # the recipe's name
    problem: str | None               # a recipe setting the trainer refuses
    corpus: str | None                # stream or train
    cached: str | None                # a built student for this env, when one exists
    init: str | None                  # init=: the student the build starts from
    init_found: bool
    module: str | None                # the env's package, asked for warm_start_corpus
    module_found: bool | None
    warm_start_corpus: bool | None
    train_rows: int | None            # (read for corpus=train, or a stream without a corpus)
    reference_completions: int | None  # train rows with an info.reference_completion
    load_error: str | None            # the env did not load to count them: why
    solver_corpus: str | None = None  # corpus=solver: its file ("" when it is not there)
    # with estimate, where it must be built: {"examples", "params", "sft_steps", "sft_batch",
    # "seconds_per_step", "estimate_s"} (embedded_trainer/recipe.py's estimate)
    build: dict[str, Any] | None = None
    # the bare recipe name on an env whose package names its own student (STUDENT_RECIPE): that one
    env_recipe: str | None = None
    # the student's context: its max_position_embeddings (a built one's, else the recipe's)
    context: int | None = None


class SolverMiss(_Model):
    question: str
    completion: str
    reward: float
    errors: list[str]


class SolverCorpus(_Model):
    """The warm-start corpus a user's solver made of the env's train rows (envside/student.py)."""
    train_rows: int                   # the env's train rows, each given to solve()
    returned: int                     # rows solve() returned a completion for
    raised: int                       # rows solve() raised on
    first_raise: str | None
    kept: int                         # completions the env's rubric scored at full reward
    floor: int                        # the fewest kept rows the corpus is written with
    ceiling: float                    # that full reward
    misses: list[SolverMiss]          # up to three completions scored below it
    solver_error: str | None          # the file did not load, or defines no solve(): why
    multi_turn: bool = False          # the env plays episodes: next_move(messages, info) per turn
    digest: str | None                # the corpus file's content hash (None: under the floor)
    path: str | None


class ModelFiles(_Model):
    written: list[str]                # which of config, tokenizer, generation_config


class MissingModules(_Model):
    missing: list[str]                # the requested modules importlib finds no spec for


class InstallPaths(_Model):
    paths: dict[str, str]             # sysconfig.get_paths(): purelib, platlib, scripts, data, ...


class ModuleLocations(_Model):
    # where the interpreter finds the module: a package's directories, else a module's file;
    # empty when it finds none
    locations: list[str]


class ErrorInfo(_Model):
    type: str
    message: str
    traceback: str = ""


# --------------------------------------------------------------------------------------------
# Actions

Req = TypeVar("Req", bound=BaseModel)
Resp = TypeVar("Resp", bound=BaseModel)


@dataclass(frozen=True)
class Action(Generic[Req, Resp]):
    name: str                 # MODULE.JOB of driver/envside
    request: type[Req]
    response: type[Resp]
    v1: bool                  # it imports verifiers v1: the v1 worker runs it
    timeout: float | None = 600   # seconds; None: no limit
    fresh: bool = False       # a new interpreter runs it, never one forked from the warm worker


class Jobs(NamedTuple):
    """The five jobs of one kind of environment."""
    introspect: Action[IntrospectRequest, Introspected]
    count: Action[CountRequest, RowCount]
    sample_train: Action[SampleRequest, RowCount]
    score_rows: Action[ScoreRequest, Scored]
    eval_fingerprints: Action[EnvRequest, Fingerprints]


def _jobs(module: str, v1: bool) -> Jobs:
    return Jobs(introspect=Action(f"{module}.introspect", IntrospectRequest, Introspected, v1),
                count=Action(f"{module}.count", CountRequest, RowCount, v1),
                sample_train=Action(f"{module}.sample_train", SampleRequest, RowCount, v1),
                score_rows=Action(f"{module}.score_rows", ScoreRequest, Scored, v1, timeout=1800),
                eval_fingerprints=Action(f"{module}.eval_fingerprints", EnvRequest, Fingerprints, v1))


JOBS: dict[str, Jobs] = {CLASSIC: _jobs("classic", v1=False), TASKSET: _jobs("taskset", v1=True)}
# the teacher's auxiliary rewards on the generated rows (standard library only: any env kind)
AUX_CHECK = Action("aux.check_rows", AuxRequest, AuxChecked, v1=False, timeout=600)
# can the embedded trainer build its built-in student for the hub env (before a run exists)
STUDENT_CHECK = Action("student.check", StudentRequest, StudentCheck, v1=False, timeout=600)
# `driver export-model`: the base model's config and tokenizer beside an arm's weight shards
MODEL_FILES = Action("model.base_files", ModelFilesRequest, ModelFiles, v1=False, timeout=1800)
# `driver run --student-solver`: the solver on the env's train rows, scored, kept as a corpus
STUDENT_SOLVER = Action("student.solver_corpus", SolverRequest, SolverCorpus, v1=False, timeout=1800)
# the training interpreter's own facts (interpreter.py, standard library only), each in a fresh
# process, as the `python -c` one-liners they replace ran: which modules it finds (no limit, as
# an import probe always had), its install paths, where it finds one module
MISSING_MODULES = Action("interpreter.missing_modules", ModulesRequest, MissingModules, v1=False,
                         timeout=None, fresh=True)
INSTALL_PATHS = Action("interpreter.install_paths", NoArguments, InstallPaths, v1=False, timeout=60,
                       fresh=True)
MODULE_LOCATIONS = Action("interpreter.module_locations", ModuleRequest, ModuleLocations, v1=False,
                          timeout=60, fresh=True)


# --------------------------------------------------------------------------------------------
# The call

class EnvsideError(RuntimeError):
    """An env-side job that failed: the exception it raised (type, message, traceback), or,
    where it wrote no response (killed, crashed), its exit status and stderr's tail."""

    def __init__(self, action: str, error: ErrorInfo):
        super().__init__(f"{error.type}: {error.message}")
        self.action, self.error = action, error

    def tail(self, lines: int = 8) -> str:
        """The traceback's last lines (they end with the exception), else the message."""
        text = self.error.traceback.strip() or str(self)
        return "\n".join(text.splitlines()[-lines:])

    def first_error(self, prefer: str | None = None) -> str:
        """The exception the job raised first: the root of its chain (verifiers' loader wraps
        what a load_environment raised in a RuntimeError), as 'TYPE: MESSAGE (File "F", line
        N)', F and N where it was raised; with `prefer` (a path fragment), also the innermost
        frame in a file whose path holds it (in the first exception of the chain that has one),
        when that is another. Read from the traceback; the job's own type and message where
        there is none."""
        blocks = _CHAINED.split(self.error.traceback)
        block = blocks[0]
        frames = list(_FRAME.finditer(block))
        if not frames:
            return str(self)
        last = frames[-1]
        after = block[last.end():].splitlines()[1:]
        start = next((i for i, line in enumerate(after) if line and not line[0].isspace()), None)
        what = ("\n".join(after[start:]).strip() if start is not None else str(self))[:1500]
        where = f'File "{last["file"]}", line {last["line"]}'
        mine: list[re.Match[str]] = []
        for b in blocks if prefer else []:
            mine = [f for f in _FRAME.finditer(b) if prefer in f["file"]]
            if mine:
                break
        if mine and (mine[-1]["file"], mine[-1]["line"]) != (last["file"], last["line"]):
            where += f'; from File "{mine[-1]["file"]}", line {mine[-1]["line"]}'
        return f"{what} ({where})"


# a traceback's chained exceptions (the first printed is the first raised) and its frames
_CHAINED = re.compile(r"\n(?:The above exception was the direct cause of the following exception:|"
                      r"During handling of the above exception, another exception occurred:)\n")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.MULTILINE)


def call(python: str, action: Action[Req, Resp], request: Req, timeout: float | None = None) -> Resp:
    """Run `action` on `request` in `python` and return its response. Raises EnvsideError when
    the job fails, subprocess.TimeoutExpired past its time limit (the action's by default)."""
    if not isinstance(request, action.request):
        raise TypeError(f"{action.name} takes a {action.request.__name__}, not {type(request).__name__}")
    with tempfile.TemporaryDirectory(prefix="driver-envside-") as tmp:
        req_path, resp_path = Path(tmp) / "request.json", Path(tmp) / "response.json"
        req_path.write_text(request.model_dump_json())
        r = worker.run_py(python, CALL, [action.name, str(req_path), str(resp_path)],
                          timeout=action.timeout if timeout is None else timeout, v1=action.v1,
                          fresh=action.fresh)
        got = json.loads(resp_path.read_text()) if resp_path.exists() else None
    if got is None:
        tail = "\n".join((r.stderr or "").strip().splitlines()[-8:]) or "no output"
        raise EnvsideError(action.name, ErrorInfo(
            type="NoResponse", message=f"the job ended (exit {r.returncode}) without a response",
            traceback=tail))
    if not got.get("ok"):
        raise EnvsideError(action.name, ErrorInfo.model_validate(got["error"]))
    return action.response.model_validate(got["result"])
