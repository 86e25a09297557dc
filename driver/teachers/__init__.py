"""Teachers: who writes the weakness report and the generator.

One contract. For iteration N a teacher gets a `Brief` (the run directory, the iteration
directory, hub_env.json, up to 200 lowest-reward *train* rollout rows, every rollout of the last
train steps cut to its id, info and reward, prior reports, from iteration 2 the last trained
iteration's buckets' train failure rates before and after its training, accuracies as numbers,
the gate's last verdict) and leaves in the iteration directory:
`weakness_report.md`, `weakness.json`, `gen_dataset.py` and `scratchpad_entry.md`.
Nothing a teacher receives comes from an eval rollout row.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from driver.run.arm_files import ArmFiles
from driver.run.model import TEACHER_NAMES

OUTPUTS = ArmFiles.TEACHER_OUTPUTS
# what a rejected attempt leaves that is set aside as NAME.rejected-<attempt> (the teacher's
# files and what the driver made of them), so all are written again; TEACHER.md lists them
SET_ASIDE = ArmFiles.ATTEMPT


@dataclass
class Brief:
    run_dir: Path
    iter_dir: Path
    iteration: int
    hub: dict
    failures_path: Path           # JSONL of train rollout rows, lowest reward first
    failures_step: str            # the train steps read: "train_step_<A>..train_step_<B> of iter_<K>"
    eval_accs: dict               # {"iter_0": 0.41, ...}: numbers only
    accs_split: str = "eval"      # the split eval_accs were measured on ("selection" where one exists)
    train_sample_path: Path | None = None  # JSONL: every rollout of the last train steps, cut
    prior_reports: list[Path] = field(default_factory=list)
    last_gate: list[str] = field(default_factory=list)
    last_probe: dict | None = None  # probe.json of the last attempt, when the probe rejected it
    seed: int = 0
    attempt: int = 0              # earlier gate rejections in this iteration
    # iteration >= 2: did the last trained iteration's buckets shrink? (teacher_input/
    # weakness_diff.json, driver/analysis/weakness_diff.py: train rollouts only)
    weakness_diff_path: Path | None = None
    retries: int = 3              # attempts before the iteration is skipped (--teacher-retries)
    # this iteration's rejected attempts: [{"attempt", "failures", "tried"}]
    attempt_history: list[dict] = field(default_factory=list)
    # iterations skipped since the rollouts read: [{"iteration", "reason", "dir", "attempts"}]
    skipped: list[dict] = field(default_factory=list)

    @property
    def episodes(self) -> dict | None:
        """The hub env's interaction where its episodes have several turns (hub_env.json)."""
        it = self.hub.get("interaction") or {}
        return it if it.get("kind") in ("multi_turn", "tools") else None

    @property
    def episodes_line(self) -> str:
        from driver.envs.describe import interaction_line

        return interaction_line(self.hub)

    def failures(self) -> list[dict]:
        with open(self.failures_path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def train_sample(self) -> list[dict]:
        """Every rollout of the last train steps (id, info, reward): pass rates, not only the
        failures. A brief built without one (by hand, in a test) has only the failures."""
        if self.train_sample_path is None:
            return self.failures()
        with open(self.train_sample_path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def weakness_diff(self) -> dict | None:
        """Per bucket of the last trained iteration's weakness.json, its train failure rate
        before and after that iteration's training (None in iteration 1)."""
        if self.weakness_diff_path is None or not Path(self.weakness_diff_path).exists():
            return None
        return json.loads(Path(self.weakness_diff_path).read_text(encoding="utf-8"))

    def weakness_diff_table(self) -> str | None:
        """That diff as the markdown table TEACHER.md, the LLM prompt and the report show."""
        from driver.analysis import weakness_diff

        diff = self.weakness_diff()
        return weakness_diff.table_markdown(diff) if diff else None


def outputs_present(iter_dir: Path) -> bool:
    return all((Path(iter_dir) / name).exists() for name in OUTPUTS)


NAMES = TEACHER_NAMES


def builtin_refusal(hub: dict) -> str | None:
    """Why the built-in teacher cannot teach this env (no family generator), or None."""
    from generators import FAMILIES, family_of

    family = family_of(hub)
    if family in FAMILIES:
        return None
    return (f"the built-in teacher has no family generator for '{family}' (it has: "
            f"{', '.join(FAMILIES)}), so it cannot write rows for this env: replaying the hardest "
            "train rows would carry no domains or structural features. Switch teacher with "
            "`driver resume RUN_DIR --teacher agent` (a coding agent writes the generator from "
            "TEACHER.md) or `--teacher llm --llm-model NAME` (an API).")


class Teacher(Protocol):
    """What the iteration asks of a teacher: given the brief, leave OUTPUTS in brief.iter_dir
    (or raise WaitingForTeacher, as the agent teacher does, to stop until someone writes them)."""
    name: str

    def teach(self, brief: Brief) -> None: ...


@dataclass(frozen=True)
class TeacherKind:
    """One entry of the registry: how to build the teacher a run asked for, why it cannot
    teach on an env (checked before anything trains, and on `driver resume --teacher`), and
    what `driver run`'s header says of it before iter_0 trains (a warning resume can fix)."""
    build: Callable[[Any], Teacher]                 # RunState -> Teacher
    refusal: Callable[[Any, dict], str | None] = lambda state, hub: None
    header: Callable[[Any], str | None] = lambda state: None


def _agent(state) -> Teacher:
    from driver.teachers.agent import AgentTeacher
    return AgentTeacher()


def _builtin(state) -> Teacher:
    from driver.teachers.builtin import BuiltinTeacher
    return BuiltinTeacher()


def _llm(state) -> Teacher:
    from driver.errors import UsageError
    if state.llm is None:
        raise UsageError("run.json asks for the LLM teacher but has no llm settings")
    from driver.teachers.llm import LLMTeacher
    return LLMTeacher(state.llm)


def _llm_refusal(state, hub: dict) -> str | None:
    import os
    if state.llm is not None and not os.environ.get(state.llm.key_env):
        return (f"the LLM teacher reads its API key from ${state.llm.key_env}, which is not set. "
                f"Export it (the key is never written to disk), or pass --llm-key-env NAME, then "
                "`driver resume RUN_DIR`; or switch with `driver resume RUN_DIR --teacher agent`.")
    return None


def _llm_header(state) -> str | None:
    """The endpoint, asked once before iter_0 trains: the teacher's first call comes only after."""
    from driver.teachers.llm import LLMTeacher
    return LLMTeacher(state.llm).check_endpoint() if state.llm is not None else None


# every teacher the run model names (TEACHER_NAMES, its --teacher choices), and nothing else:
# a new teacher is a module with a class satisfying Teacher, its name there and an entry here
REGISTRY: dict[str, TeacherKind] = {
    "agent": TeacherKind(_agent),
    "builtin": TeacherKind(_builtin, lambda state, hub: builtin_refusal(hub)),
    "llm": TeacherKind(_llm, _llm_refusal, _llm_header),
}
if set(REGISTRY) != set(TEACHER_NAMES):
    raise TypeError(f"the teacher registry ({sorted(REGISTRY)}) and --teacher's choices "
                    f"({sorted(TEACHER_NAMES)}) must name the same teachers")


def _kind(state) -> TeacherKind:
    from driver.errors import UsageError
    if state.teacher not in REGISTRY:
        raise UsageError(f"unknown teacher {state.teacher!r}; choose one of {', '.join(NAMES)}")
    return REGISTRY[state.teacher]


def preflight(state, hub: dict) -> None:
    """Refuse, before anything trains, a teacher that cannot teach on this env: the built-in
    teacher without a family generator for it, the LLM teacher without its key variable set."""
    from driver.errors import UsageError

    refusal = _kind(state).refusal(state, hub)
    if refusal:
        raise UsageError(refusal)


def header_line(state) -> str | None:
    """What `driver run`'s header says of the run's teacher before iter_0 trains, if anything."""
    return _kind(state).header(state)


def get(state) -> Teacher:
    """The teacher a run asked for (`state` is its RunState)."""
    return _kind(state).build(state)
