"""What the rest of a run needs, estimated from what the run has measured so far.

A run's budget (--budget, and --max-cost where launches are billed) is the whole run's, the
controls included: the loop's gate starts another iteration only while what is left covers that
iteration and the controls still to run, and no launch is submitted once its estimated cost
would take the run past --max-cost. This module is that arithmetic on plain numbers (phase
records, billed launches); driver/arms/budget.py reads them from the run, and driver/loop.py's
gate decides with them.

The estimates lean towards the budget: each is the slowest (costliest) of its kind measured, and
a control's scaling overstates it (control_scale). A first estimate knows only iter_0, and says so.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

BASELINE = "baseline"                                    # iter_0 trained and evaluated
PREPARE = ("weakness", "dataset", "environment", "probe")   # an iteration before its arm trains
ARM = ("train", "evaluate")                              # its arm: the launches, then its numbers
INSTALL = "environment"                                  # its env's install (a control has one)
ITERATION_KINDS = ("probe", "train", "eval")             # the launches an iteration bills
CONTROL_KINDS = ("train", "eval")                        # and a control


# --------------------------------------------------------------------------------------------
# time, from run.json's phase history

@dataclass(frozen=True)
class Measured:
    """One arm's time as the phase history measured it, in seconds."""
    iteration: int
    arm_s: float        # its training and evaluation (the train and evaluate phases; iter_0's baseline)
    prepare_s: float    # before its training: the teacher, the dataset, the env, the probe (iter_0: 0)
    install_s: float    # of which its env's install

    @property
    def total_s(self) -> float:
        return self.prepare_s + self.arm_s


def measured(history: Iterable, iter_0_trained: bool) -> list[Measured]:
    """Each arm the phase history (run.json's PhaseRecords) measures: iter_0 where it was trained
    in this run (its baseline phase; a reused iter_0 took no training time), and each iteration
    whose evaluate phase ended (a skipped or aborted one has no arm to measure). Every ended
    record of a phase counts: a phase run twice (the teacher retried, a torn eval retrained)
    took both times."""
    spans: dict[int, dict[str, float]] = {}
    for rec in history:
        n = 0 if rec.phase == BASELINE else rec.iteration
        if rec.end_ts is None or n is None:
            continue
        phases = spans.setdefault(n, {})
        phases[rec.phase] = phases.get(rec.phase, 0.0) + max(0.0, rec.end_ts - rec.start_ts)
    out = []
    for n, p in sorted(spans.items()):
        if n == 0 and iter_0_trained and BASELINE in p:
            out.append(Measured(0, p[BASELINE], 0.0, 0.0))
        elif n >= 1 and "evaluate" in p:
            out.append(Measured(n, sum(p.get(k, 0.0) for k in ARM),
                                sum(p.get(k, 0.0) for k in PREPARE), p.get(INSTALL, 0.0)))
    return out


def control_seconds(history: Iterable, names: Iterable[str]) -> list[float]:
    """Each ended control phase's time: controls measured before the loop was re-opened
    (`driver resume --budget`), which then run again."""
    names = set(names)
    return [max(0.0, rec.end_ts - rec.start_ts) for rec in history
            if rec.phase in names and rec.end_ts is not None]


def control_scale(train_rollouts: int, iteration_eval_rows: int, control_eval_rows: int) -> float:
    """How many times an iteration's arm a control is. A control trains the steps an iteration
    trains (from iter_0's checkpoint or the base model, as iter_0 did) and is evaluated on the
    examples an iteration is (its eval rows are given apart all the same). The phase history does
    not part an arm's training from its evaluation (both run in its train phase), so the arm's
    whole time is scaled by the rollouts each samples: its train rollouts (steps x batch size)
    plus its eval rows. That takes an eval rollout to cost no more than a train rollout (it is
    sampled alike, with no update after it), and scales the arm's fixed start-up too: the
    estimate overstates a control, which errs on the side of the budget. Never below 1."""
    base = train_rollouts + iteration_eval_rows
    return max(1.0, (train_rollouts + control_eval_rows) / base) if base > 0 else 1.0


@dataclass(frozen=True)
class Reserve:
    """What one more iteration and the controls still to run are estimated to need (seconds, or
    USD), and where the figures come from, in words."""
    iteration: float
    control: float
    controls: int
    basis: str

    @property
    def needed(self) -> float:
        return self.iteration + self.controls * self.control

    def covered_by(self, left: float) -> bool:
        return left >= self.needed


def time_reserve(arms: list[Measured], controls: int, scale: float,
                 measured_controls: Iterable[float] = ()) -> Reserve | None:
    """One more iteration at the slowest measured iteration's whole time (its teacher and probe
    included), and each control at the slowest measured arm scaled by `scale` (control_scale),
    plus the slowest env install, or at the slowest control measured, whichever is larger.
    Before any iteration is measured only iter_0 is known: an iteration is taken to need iter_0's
    training and evaluation, the teacher's, the dataset's and the probe's time unknown. None:
    nothing is measured (iter_0 was reused)."""
    if not arms:
        return None
    iterations = [a for a in arms if a.iteration >= 1]
    slowest_arm = max(a.arm_s for a in arms)
    control = max(max((a.install_s for a in iterations), default=0.0) + slowest_arm * scale,
                  *measured_controls, 0.0)
    if iterations:
        slowest = max(iterations, key=lambda a: a.total_s)
        return Reserve(slowest.total_s, control, controls,
                       f"the slowest iteration so far, iter_{slowest.iteration}")
    return Reserve(slowest_arm, control, controls,
                   "iter_0's training and evaluation; the teacher's, the dataset's and the "
                   "probe's time are not known before the first iteration")


# --------------------------------------------------------------------------------------------
# money, from the run's cost ledger

@dataclass(frozen=True)
class Billed:
    """One billed launch: its kind (train, eval, probe), its cost, and whether a control made it."""
    kind: str
    cost: float
    control: bool


def launch_cost(billed: list[Billed], kind: str, *, control: bool, scale: float = 1.0) -> float | None:
    """One launch of `kind`'s estimated cost: the costliest billed launch of that kind (failed
    attempts count: they were billed too). A control's launch samples `scale` times an
    iteration's rows (its rows over an iteration's, start-up scaled too: an overestimate), so for
    a control an iteration's launch counts scaled and a control's as it was. None: no launch of
    that kind billed yet."""
    same = [b.cost * (scale if control and not b.control else 1.0) for b in billed if b.kind == kind]
    return max(same) if same else None


def arm_cost(billed: list[Billed], kinds: tuple[str, ...], *, control: bool,
             scales: dict[str, float] | None = None) -> float | None:
    """An arm's estimated cost: one launch of each kind it makes, at launch_cost (a kind never
    billed yet counts nothing). None: no training launch billed yet."""
    if launch_cost(billed, "train", control=control) is None:
        return None
    return sum(launch_cost(billed, k, control=control, scale=(scales or {}).get(k, 1.0)) or 0.0
               for k in kinds)


def cost_reserve(billed: list[Billed], controls: int, scales: dict[str, float]) -> Reserve | None:
    """One more iteration at one launch of each kind it makes, and each control the same way,
    its launches scaled by `scales` (kind -> the control's rows over an iteration's). None:
    nothing billed yet."""
    iteration = arm_cost(billed, ITERATION_KINDS, control=False)
    control = arm_cost(billed, CONTROL_KINDS, control=True, scales=scales)
    if iteration is None or control is None:
        return None
    known = [k for k in ITERATION_KINDS if any(b.kind == k for b in billed)]
    basis = f"the costliest billed launch of each kind ({', '.join(known)})"
    if "probe" not in known:
        basis += "; no probe billed yet"
    return Reserve(iteration, control, controls, basis)


def launch_refusal(spent: float, cap: float, estimate: float | None, what: str) -> str | None:
    """Why `what` (a launch, or a control's launches) is not submitted under --max-cost `cap`, or
    None: the run has spent the cap, or what it has spent plus `what`'s estimate would take it
    past the cap (without an estimate, before anything of its kind is billed, only the first)."""
    if spent >= cap:
        return f"the run has spent ${spent:.2f} of its --max-cost ${cap:.2f}"
    if estimate is not None and spent + estimate > cap:
        return (f"the run has spent ${spent:.2f}, and {what} (estimated at ${estimate:.2f}) would "
                f"take it past its --max-cost ${cap:.2f}")
    return None
