"""The embedded backend's built-in student (`--backend local --model builtin:...`), settled before
a run directory exists, as `driver resume` cannot change --model: a recipe the embedded trainer
cannot build for the hub env is refused with the routes that work instead; a --student-solver
builds the student's warm-start corpus first and names the student by it; a build that would
outlast --startup-timeout is refused, naming the limit that fits. The facts come from one job in
the training interpreter (driver/envside/student.py); the verdicts are drawn here."""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from driver.backends.base import Backend
from driver.envs import envside
from driver.errors import UsageError
from driver.run.model import SOLVER_MIN_ROWS, SOLVER_MIN_SHARE, RunState


def check(state: RunState, backend: Backend, hub: dict[str, Any]) -> int | None:
    """--backend local with the built-in student (`builtin:...`): refuse, before anything is
    created, a recipe the embedded trainer cannot build for this env: no built one cached or
    shipped, and no corpus to warm-start it from (the stream's `warm_start_corpus` in the env's
    package, or train rows with `info.reference_completion`). One job in the training
    interpreter (driver/envside/student.py) reads the facts; an env that does not load is left
    to introspection, which reports it. With --student-solver, the solver's corpus is built
    first and the student named by it (_solver_corpus). A student that must be built is timed
    over a few SFT steps here: a build longer than --startup-timeout is refused, naming the
    limit that fits, or, where --model names no sft_steps, sized down to fit it. Returns the
    student's context (its positions) where the job reads it."""
    if backend.name != "local" or not state.model.startswith("builtin:"):
        return None
    sizable = "sft_steps=" not in state.model   # the build's size is the recipe's, not the user's
    # a tool-using env's episodes are multi-turn too: the solver's next_move plays each turn
    multi_turn = (hub.get("interaction") or {}).get("kind") in ("multi_turn", "tools")
    if state.student_solver:
        _solver_corpus(state, backend, state.student_solver, multi_turn)
    try:
        got = envside.call(backend.python, envside.STUDENT_CHECK, envside.StudentRequest(
            env_id=state.dataset, env_args=state.env_args, model=state.model, estimate=True))
    except envside.EnvsideError as e:
        print(f"note: could not check that {state.model} can be built for {state.dataset} "
              f"({e}); iter_0 will tell", file=sys.stderr, flush=True)
        return None
    if got.env_recipe:   # the bare built-in name on an env that names its own student
        print(f"student: {state.dataset}'s package names its own built-in student: --model "
              f"{got.env_recipe}", file=sys.stderr, flush=True)
        state.model = got.env_recipe
    why = refusal(got, state.model, state.dataset)
    if why:
        raise UsageError(why + "\n" + routes(got, state.dataset, multi_turn))
    if got.build:
        _check_build_time(state, got.build, sizable)
    return got.context


def _check_build_time(state: RunState, build: dict[str, Any], sizable: bool = False) -> None:
    """Say what building the student costs before it starts, and refuse a build that cannot
    finish within --startup-timeout (iter_0's trainer writes no step while it builds). Where
    the size is the recipe's own (`sizable`: --model names no sft_steps), a build too long for
    the limit is sized down to the SFT steps that fit here instead, and said so, as long as at
    least a quarter of the recipe's steps fit."""
    minutes = build["estimate_s"] / 60
    said = (f"the student {state.model} is built before iter_0 trains: {build['params']:,} "
            f"parameters, {build['sft_steps']} SFT steps of {build['sft_batch']} on "
            f"{build['examples']}+ warm-start examples, {build['seconds_per_step']:.2f} s a step here "
            f"(measured over a few steps): about {minutes:.0f} min")
    limit = state.startup_timeout_s
    if build["estimate_s"] * 1.2 > limit:   # a fifth more: the machine's load moves the measure
        fits = math.ceil(build["estimate_s"] * 1.5 / 60)
        steps = max(1, int(limit / 1.2 / max(build["seconds_per_step"], 1e-6)))
        if sizable and steps * 4 >= build["sft_steps"]:
            state.model = f"{state.model}{'&' if '?' in state.model else '?'}sft_steps={steps}"
            print(f"student build: {said}, longer than --startup-timeout ({limit / 60:g} min); sized "
                  f"to fit it: --model {state.model} ({steps} of the recipe's {build['sft_steps']} "
                  f"steps, about {steps * build['seconds_per_step'] / 60:.0f} min here: a weaker "
                  f"student). For the recipe's full build: --startup-timeout {fits}m",
                  file=sys.stderr, flush=True)
            return
        raise UsageError(
            f"{said}, longer than --startup-timeout ({limit / 60:g} min), which would stop it. "
            f"Nothing was created. Run again with --startup-timeout {fits}m, or a shorter build "
            f"(--model '{state.model}{'&' if '?' in state.model else '?'}sft_steps={steps}': a "
            "weaker student).")
    print(f"student build: {said}; --startup-timeout {limit / 60:g} min", file=sys.stderr, flush=True)


def _solver_corpus(state: RunState, backend: Backend, solver: str, multi_turn: bool = False) -> None:
    """--student-solver: run the solver on the env's train rows in the training interpreter
    (driver/envside/student.py), refuse when too few pass the env's rubric at full reward
    (run/model.py's floor), else point --model at the corpus (recipe corpus=solver)."""
    shape = (SOLVER_MOVE if multi_turn else SOLVER_SOLVE)
    path = Path(solver).expanduser()
    if not path.is_file():
        raise UsageError(f"--student-solver {solver} is not a file; write a Python "
                         f"file defining {shape}")
    state.student_solver = str(path.resolve())
    base, _, query = state.model.partition("?")
    settings = [kv for kv in query.split("&") if kv]
    corpus = [kv for kv in settings if kv.split("=")[0] == "corpus"]
    if corpus and corpus[-1] != "corpus=solver":
        raise UsageError(f"--student-solver builds the student's warm-start corpus (corpus=solver); "
                         f"--model {state.model} names {corpus[-1]}: drop it")
    print(f"student solver: running {path} on the train rows of {state.dataset} ...",
          file=sys.stderr, flush=True)
    try:
        got = envside.call(backend.python, envside.STUDENT_SOLVER, envside.SolverRequest(
            env_id=state.dataset, env_args=state.env_args, solver=state.student_solver,
            min_rows=SOLVER_MIN_ROWS, min_share=SOLVER_MIN_SHARE))
    except envside.EnvsideError as e:
        raise UsageError(f"--student-solver: the job on {state.dataset}'s train rows failed: "
                         f"{e.first_error(prefer=path.name)}. Fix it, then run again; nothing was "
                         "created.") from None
    if got.solver_error:
        raise UsageError(f"--student-solver {path} does not load: {got.solver_error}. It must "
                         f"define {shape}; nothing was created.")
    said = (f"{got.kept} of the {got.train_rows} train rows of {state.dataset} passed: "
            + (f"next_move() played {got.returned} episodes" if got.multi_turn else
               f"solve() returned a completion for {got.returned}")
            + (f", raised on {got.raised} (first: {got.first_raise})" if got.raised else "")
            + f", and the env's rubric gave {got.kept} of them the full reward ({got.ceiling:g}"
            + (", over the whole episode)" if got.multi_turn else ")"))
    if got.kept < got.floor or not got.digest:
        misses = "".join(f"\n  - question: {m.question!r}\n    completion: {m.completion!r}\n    "
                         f"reward: {m.reward:g}" + (f" ({'; '.join(m.errors)})" if m.errors else "")
                         for m in got.misses)
        raise UsageError(
            f"--student-solver: {said}; the built-in student's warm start needs at least {got.floor} "
            f"({SOLVER_MIN_ROWS} rows, or all of a smaller split, and {SOLVER_MIN_SHARE:.0%} of "
            "the split). Nothing was created."
            + (f"\n{'Episodes' if got.multi_turn else 'Completions'} the rubric scored below "
               f"full reward:{misses}" if misses else "")
            + (f"\nMake {'next_move() win more episodes' if got.multi_turn else 'solve() answer more train rows'}, "
               "in the env's answer format (its system prompt says which), then run again; or use "
               "a model directory (--model PATH), --backend prime_rl or --backend hosted instead."))
    settings = [kv for kv in settings if kv.split("=")[0] not in ("corpus", "solver")]
    state.model = f"{base}?" + "&".join(settings + ["corpus=solver", f"solver={got.digest}"])
    print(f"student solver: {said}; the student warm-starts on them: --model {state.model} "
          f"(corpus {got.path})", file=sys.stderr, flush=True)


def refusal(got: envside.StudentCheck, model: str, dataset: str) -> str | None:
    """Why the embedded trainer cannot build `model` for `dataset` (a StudentCheck's facts), or
    None when it can (or when only introspection can tell: an env that does not load)."""
    head = f"--model {model} cannot be built for {dataset}: "
    if not got.recipe:
        return head + (f"the embedded trainer's only built-in student is {got.known} (with "
                       "optional ?settings); any other model is a model directory on disk.")
    if got.problem:
        return head + got.problem + "."
    if got.cached:
        return None
    if not got.init_found:
        return head + (f"init={got.init} names no built student (neither the cache nor the "
                       "shipped prebuilt ones hold it); build that recipe first, or drop init=.")
    if got.corpus == "solver" and not got.solver_corpus:
        return head + ("its solver corpus (corpus=solver&solver=HASH) is not in the cache; "
                       "`driver run --student-solver PATH` builds it and names the student.")
    if got.corpus == "stream" and got.module_found and not got.warm_start_corpus:
        also = ("; its train rows carry no reference completions either, so corpus=train cannot "
                "build it" if got.reference_completions == 0 else "")
        return head + (f"the built-in student warm-starts by SFT on a stream of fresh rows "
                       f"(corpus=stream), which it asks the env's package for, and "
                       f"{got.module} has no warm_start_corpus(count, seed, **options){also}.")
    if got.corpus == "train" and got.reference_completions == 0:
        return head + (f"the built-in student warm-starts by SFT on reference completions "
                       f"(corpus=train), and none of the {got.train_rows} train rows of "
                       f"{dataset} carries one (info.reference_completion, or "
                       "info.reference_trajectory for an episode).")
    return None


SOLVER_SOLVE = "solve(question: str, info: dict) -> str | None"
SOLVER_MOVE = ("next_move(messages: list[dict], info: dict) -> str | dict | None (the env is "
               "multi-turn: called once per turn with the conversation so far, it returns the next "
               "reply; on a tool-using env a reply may call tools, as a message dict with "
               "tool_calls [{\"name\": ..., \"arguments\": {...}}] or as text with "
               "<tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>)")


def routes(got: envside.StudentCheck, dataset: str, multi_turn: bool = False) -> str:
    """The commands that work instead, for a refused built-in student."""
    run = f"driver run --dataset {dataset}"
    routes = [f"  - a Hugging Face model directory on disk (the embedded trainer loads local "
              f"directories only; download it first): {run} --backend local --model PATH",
              f"  - prime-rl on your own GPUs: {run} --backend prime_rl --prime-rl-dir DIR "
              "(student Qwen/Qwen3-0.6B unless --model)",
              f"  - Prime Intellect's Hosted Training, no GPU here (the env as a verifiers v1 "
              f"taskset on the Environments Hub): {run} --backend hosted --hub-id OWNER/NAME"]
    if got.corpus == "stream" and got.reference_completions:
        routes.insert(0, f"  - the built-in student warm-started on the {got.reference_completions} "
                         f"train rows that carry a reference completion: {run} --backend local "
                         f"--model '{got.known}?corpus=train'")
    if got.recipe and not got.problem and got.init_found:   # the cause is the warm-start corpus
        floor = (f"at least {SOLVER_MIN_ROWS} of them (all of a smaller split) and "
                 f"{SOLVER_MIN_SHARE:.0%} of the split")
        solver = ("  - the built-in student warm-started on your own solver's completions: write "
                  "solve.py defining solve(question: str, info: dict) -> str | None, which returns "
                  "a completion in the env's answer format for one train row (None: cannot); the "
                  "driver runs it on the train rows only, keeps the completions the env's rubric "
                  f"scores at full reward ({floor}) and warm-starts the student on them: {run} "
                  "--backend local --student-solver solve.py") if not multi_turn else (
                  "  - the built-in student warm-started on your own solver's episodes: write "
                  f"solve.py defining {SOLVER_MOVE}; the driver plays every train row (never an "
                  "eval row) as an episode with it, through the env's own turns, keeps the "
                  f"episodes the env's rubric scores at full reward ({floor}) and warm-starts the "
                  f"student on them: {run} --backend local --student-solver solve.py")
        # after the reference completions' route where there is one (it needs no code), before
        # the three routes to another model
        routes.insert(len(routes) - 3, solver)
        routes.append(f"  - or give {got.module or dataset}'s package a warm_start_corpus(count, "
                      "seed, **options) returning rows with info.reference_completion (an "
                      "episode's: info.reference_trajectory), or its train rows one, then run again")
    return ("The student is fixed for a run (`driver resume` cannot change --model), so nothing "
            "was created. What works instead:\n" + "\n".join(routes))
