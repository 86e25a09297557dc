"""`driver run`: create a run directory and drive every phase.

Everything `driver resume` cannot fix is refused here, before the run directory exists: a bad
flag, an unknown backend or a missing trainer, a base config prime-rl would reject, an
--init-from directory that lacks what iter_0 is reused from (or whose iter_0 is of another
dialect, hub env or model), a built-in student the embedded trainer cannot build for the env
(or not within --startup-timeout), an env whose kind of episodes the backend cannot play (a
tool-using env on the embedded trainer), a --student-solver that answers too few of the env's train rows at full reward, a hub env that
does not load, or whose reward reads the env's own state with no scorer a generated env could
call instead (the run's env is fixed for its life).
"""
from __future__ import annotations

import argparse
import sys

from driver.commands.flags import EXIT_CODES, add_model_flags, given_values
from driver.run.model import RunConfig

NAME = "run"
_FLAGS: dict[str, str] = {}


def add(sub) -> None:
    r = sub.add_parser(NAME, help="start a new run", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=(
                           "Create a run directory and drive every phase: introspect, iter_0\n"
                           "baseline, the teacher/student loop, controls, finalize.\n\n"
                           "What `driver resume` could not fix is refused first, with exit 2 and\n"
                           "nothing created: a hub env that does not load, or whose reward cannot\n"
                           "score a generated row; an env whose kind of episodes the backend\n"
                           "cannot play (--backend local plays single-turn and multi-turn envs, not\n"
                           "tool-using ones); a built-in student the embedded trainer cannot build\n"
                           "for the env, or not within --startup-timeout; a base config or\n"
                           "--init-from the trainer would reject; on --backend hosted, no logged-in\n"
                           "`prime` 0.15.0 .. 0.18.x, a --model neither your reserved clusters\n"
                           "nor the on-demand pool can place, or an account with no on-demand\n"
                           "capacity (every final-weights eval run goes there); on --backend\n"
                           "prime_rl, no NVIDIA GPU visible, or no canonical config closest to\n"
                           "the env's (--settings-from picks one)."))
    _FLAGS.update(add_model_flags(r, RunConfig))
    _FLAGS["llm"] = "--llm-model"
    r.add_argument("--runs-dir", default="runs", help="where run directories go (default: %(default)s)")
    r.add_argument("--dry-run", action="store_true",
                   help="introspect the hub env, render and check every config of iter_0, an "
                        "iteration and each control into the run directory, print their paths "
                        "and stop (`driver resume RUN_DIR` then trains)")


def main(a) -> int:
    from pathlib import Path

    from pydantic import ValidationError

    from driver import backends, loop, teachers
    from driver.backends import local_student
    from driver.context import Ctx
    from driver.envs.describe import context_lines, interaction_line
    from driver.errors import UsageError
    from driver.run.model import RunState, validation_message
    from driver.run.rundir import RunDir, RunLock, now

    values = given_values(a, RunConfig)
    why_local = None
    if "backend" not in values:
        values["backend"], why_local = backends.choose(values.get("prime_rl_dir"))
    if values.get("teacher", "builtin") != "llm":
        values.pop("llm", None)
    if values.get("init_from"):
        values["init_from"] = str(Path(values["init_from"]).resolve())
    try:   # the run model fills the backend's defaults and checks every knob, once
        state = RunState(start_ts=now(), **values)
    except ValidationError as e:
        raise UsageError(validation_message(e, _FLAGS)) from None
    backend = backends.resolve(state.backend, state.prime_rl_dir)  # refuse before creating anything
    backend_note = backends.preflight(backend, state)   # e.g. a hosted model the platform trains
    _check_init_from(state, backend.dialect)
    if not state.base_config:
        from driver.backends.prime_rl import canonical_config

        found = canonical_config(state.prime_rl_dir, state.dataset)
        if found:
            print(f"canonical config: {found} (iter_0 trains on it; run B copies its train env; "
                  "pass --base-config to choose another)", flush=True)
            state.base_config = found
    if state.base_config:
        state.base_config = str(Path(state.base_config).resolve())
        _check_base_config(Path(state.base_config), backend.dialect, state.knobs())
    settings_note = _settings_source(state, backend)
    launch_notes = (_one_eval_setting(state, set(values)) + _check_launch_prerequisites(state, backend)
                    + [note for note in (settings_note, teachers.header_line(state)) if note])
    introspected = _introspect_first(state, backend)
    refusal = backends.episode_refusal(backend, introspected[0])   # never run as another kind
    if refusal:
        raise UsageError(refusal)
    positions = local_student.check(state, backend, introspected[0])   # resume cannot change --model
    context, context_warning = context_lines(introspected[0], positions or _positions(state.model),
                                             state.seq_len, state.max_completion_tokens,
                                             chars=state.model.startswith("builtin:"))
    rd = RunDir.create(a.runs_dir, state.dataset)
    _record_backend(state, rd, backend)
    with RunLock(rd.path):
        if why_local:
            print(f"using the embedded default ({why_local}): the {state.dataset} env, the embedded "
                  f"trainer, the {state.model} student, the {state.teacher} teacher, "
                  f"{state.max_iters} iterations including iter_0 (a {state.budget_seconds / 3600:g}-hour "
                  "budget as a ceiling: the machine's speed does not change the result). Pass --backend prime_rl "
                  "--prime-rl-dir DIR for the real trainer.", flush=True)
        print(f"run directory: {rd.path}", flush=True)
        rd.save(state)
        version = (f", prime-rl {backend.prime_rl_version} from {backend.version_source}"
                   if backend.prime_rl_version else "")
        print(f"backend: {backend.name} ({backend.describe()}); dialect: {backend.dialect}"
              f"{version}; teacher: {state.teacher}", file=sys.stderr, flush=True)
        print(f"env: {state.dataset} ({introspected[0]['env_class']}); "
              f"{interaction_line(introspected[0])}", file=sys.stderr, flush=True)
        for said in (context, context_warning):
            if said:
                print(said, file=sys.stderr, flush=True)
        print(budget_line(state), file=sys.stderr, flush=True)
        print(eval_line(state, backend), file=sys.stderr, flush=True)
        if state.iter0_lr is not None:   # never beside --init-from (RunConfig refuses it)
            later = f"{state.lr:g} (--lr)" if state.lr is not None else "the trainer's own lr"
            print(f"learning rate: iter_0 at {state.iter0_lr:g} (--iter0-lr), every later arm, "
                  f"controls included, at {later}", file=sys.stderr, flush=True)
        if backend.stand_in:
            print(f"trainer: a stand-in ({backend.stand_in}, from DRIVER_RL_COMMAND), not prime-rl; "
                  f"the {state.model} name is only passed to it", file=sys.stderr, flush=True)
        for note in ([backend_note] if backend_note else []) + launch_notes:
            print(note, file=sys.stderr, flush=True)
        ctx = Ctx.open(rd, state)
        ctx.introspected = introspected   # hub_env.json is written from it by the introspect phase
        if a.dry_run:
            from driver.phases import dry_run

            for path in dry_run.render(ctx):
                print(f"rendered: {path}", flush=True)
            print(f"dry run: nothing trained. `driver resume {rd.path}` trains.", flush=True)
            return 0
        return loop.run(ctx)


def budget_line(state) -> str:
    """The run header's account of how the budget is split between the loop and the controls
    (driver/loop.py's gate; driver/arms/budget.py's estimates)."""
    from driver.arms import table
    from driver.commands.flags import duration

    controls = len(table.CONTROLS)
    line = (f"budget: {duration(state.budget_seconds)} for the whole run, the {controls} controls "
            f"included: the loop starts another iteration only while the time left covers it and "
            f"the {controls} controls at their measured time (an iteration at the slowest so far, or "
            "at iter_0's training and evaluation before the first; a control at the slowest arm, "
            "as it trains and evaluates as an iteration does), and stops starting iterations once it would not.")
    if state.max_cost_usd is not None:
        line += (f" --max-cost ${state.max_cost_usd:g} is a ceiling on every submission, the "
                 "controls' included: no launch is submitted where what the run has spent plus its "
                 "estimated cost would pass it (a control that would is recorded as skipped), and "
                 "the loop starts an iteration only while what is spent plus that iteration's and "
                 "the controls' estimated cost fits.")
    return line


def _introspect_first(state, backend) -> tuple[dict, dict | None]:
    """Load the hub env once, before anything is created: an env that does not load, or whose
    reward reads the env's own state with no scorer to call instead, is refused here, as no
    resume could change the run's env. The introspect phase writes hub_env.json from the result
    (a resume that finds no hub_env.json loads the env again)."""
    from driver import dialects
    from driver.envs.describe import refuse_unscorable
    from driver.envs.introspect import introspect_with_fingerprints
    from driver.errors import DriverError

    print(f"introspect: loading {state.dataset} in {backend.python} (nothing is created until "
          "it loads)", file=sys.stderr, flush=True)
    try:
        info, fingerprints = introspect_with_fingerprints(
            backend.python, state.dataset, state.env_args, hub_id=state.hub_id,
            kind=dialects.get(backend.dialect).env_kind)
        refuse_unscorable(info)
    except DriverError as e:
        raise DriverError(f"{e}\nNothing was created.", exit_code=e.exit_code) from None
    return info, fingerprints


def _positions(model: str) -> int | None:
    """A model directory's max_position_embeddings (its config.json), or None (a hub name, a
    directory without one)."""
    import json
    from pathlib import Path

    try:
        got = json.loads((Path(model).expanduser() / "config.json").read_text()).get("max_position_embeddings")
    except (OSError, ValueError):
        return None
    return got if isinstance(got, int) else None


def _record_backend(state, rd, backend) -> None:
    import hashlib

    # suffix of generated env package names: two runs sharing one interpreter never install
    # over each other's environments
    state.env_tag = hashlib.sha256(str(rd.path).encode()).hexdigest()[:6]
    state.trainer_stand_in = backend.stand_in
    state.dialect = backend.dialect
    state.prime_rl_version, state.prime_rl_version_source = backend.prime_rl_version, backend.version_source


def _check_init_from(state, dialect: str) -> None:
    from pathlib import Path

    from driver import dialects
    from driver.errors import UsageError
    from driver.phases.setup import init_from_source

    if not state.init_from:
        return
    if not Path(state.init_from).is_dir():
        raise UsageError(f"--init-from {state.init_from} is not a directory")
    # before anything is created: a driver run (or its iter_0) or a prime-rl output, whose
    # iter_0 is finished, of this dialect, hub env and model, with every file a resume reads
    init_from_source(state, dialects.get(dialect))


# what a canonical config's [orchestrator.eval.sampling] may set: the eval settings every arm is
# rendered with (the completion limit is --max-completion-tokens, the temperature the one below)
EVAL_SAMPLING_CARRIED = ("temperature", "max_completion_tokens", "max_tokens")


def _one_eval_setting(state, given: set[str]) -> list[str]:
    """Every arm, iter_0 included, is evaluated under one setting from one place, the run's
    knobs: a canonical config's eval temperature becomes --eval-temperature (unless that flag
    was given) and reaches every arm; any other eval sampling key it sets would reach iter_0
    alone, so it is refused before anything is created. Returns lines for the run header."""
    import tomllib
    from pathlib import Path

    from driver.errors import UsageError

    if not state.base_config:
        return []
    cfg = tomllib.loads(Path(state.base_config).read_text())
    sampling = ((cfg.get("orchestrator") or {}).get("eval") or {}).get("sampling") or {}
    other = sorted(k for k in sampling if k not in EVAL_SAMPLING_CARRIED)
    if other:
        raise UsageError(
            f"--base-config {state.base_config} sets [orchestrator.eval.sampling] "
            f"{', '.join(other)}: every arm is evaluated under one setting, which the driver renders "
            "(--eval-temperature, --max-completion-tokens), and these would reach iter_0 alone. "
            "Remove them from the config; nothing was created.")
    if "temperature" in sampling and "eval_temperature" not in given:
        state.eval_temperature = float(sampling["temperature"])
        return [f"eval: temperature {state.eval_temperature:g} for every arm (the base config's)"]
    return []


def _check_launch_prerequisites(state, backend) -> list[str]:
    """What a prime-rl launch would refuse only once it starts, refused before anything exists
    (an arm after iter_0 would otherwise fail after iter_0's hours): fewer GPUs than the
    deployment asks for (prime-rl's launcher counts CUDA_VISIBLE_DEVICES, else NVML:
    rl_contract/launch.py), W&B turned on with no credentials, and (current dialect) a canonical
    config whose train sources a fork cannot keep. Resolves --wandb auto to on or off; returns
    lines for the run header."""
    import tomllib
    from pathlib import Path

    from driver.errors import UsageError
    from rl_contract import launch

    notes = []
    base = tomllib.loads(Path(state.base_config).read_text()) if state.base_config else {}
    creds = launch.wandb_credentials(generation=backend.dialect)
    asked = state.wandb
    if asked == "on" and not creds:
        raise UsageError("--wandb on, but no W&B credentials are set here: a detached trainer's "
                         "`wandb.init` fails without them. Set WANDB_API_KEY (or run `wandb "
                         "login`), or pass --wandb off; nothing was created.")
    state.wandb = "on" if asked == "on" or (asked == "auto" and creds) else "off"
    if state.backend in ("prime_rl", "hosted"):
        if state.wandb == "on":
            notes.append(f"W&B: on (credentials: {creds})")
        else:
            notes.append("W&B: off " + ("(--wandb off)" if asked == "off" else
                                        "(no credentials found: set WANDB_API_KEY or run `wandb login`)")
                         + "; arms log to files only"
                         + ("; the base config's W&B section is left out of iter_0"
                            if launch.wandb_enabled(base) else ""))
    if state.backend != "prime_rl":
        return notes
    requested = launch.gpus_requested(base or {"inference": {}})
    visible = launch.visible_gpus()
    if visible is None and not backend.stand_in:
        raise UsageError(f"no NVIDIA GPU is visible here (CUDA_VISIBLE_DEVICES is unset and "
                         f"nvidia-smi is not found), and prime-rl's launcher asks for {requested} "
                         "(its deployment's inference + trainer GPUs). Run on the GPU node, or "
                         "use --backend hosted (no GPU here) or --backend local (CPU); nothing "
                         "was created.")
    if visible is not None and visible < requested:
        raise UsageError(f"prime-rl's launcher would refuse this node: its deployment asks for "
                         f"{requested} GPUs (inference + trainer) and {visible} are visible "
                         "(CUDA_VISIBLE_DEVICES, else nvidia-smi). Free or expose more GPUs, or "
                         "give a --base-config whose [deployment] fits; nothing was created.")
    notes.append(f"GPUs: {requested} asked for, "
                 + (f"{visible} visible" if visible is not None else "not visible here (the stand-in decides)"))
    if backend.dialect == "current" and base:
        from driver.dialects import get

        blocks = get("current").train_blocks(base)
        names = [b.get("name") or ((b.get("env") or {}).get("taskset") or {}).get("id") for b in blocks]
        if len(names) != 1:
            raise UsageError(f"--base-config {state.base_config} trains iter_0 on {len(names)} train "
                             f"sources ({', '.join(map(str, names))}); every later arm forks iter_0's "
                             "checkpoint with one source, and prime-rl refuses a fork whose "
                             "train-source names differ from the checkpoint's. Give a base config "
                             "with one [[orchestrator.train.source]]; nothing was created.")
        state.iter_0_train_source = names[0]
    return notes


def _settings_source(state, backend) -> str | None:
    """Where the hub env has no canonical config of its own (prime_rl backend, no
    --base-config), the settings every arm trains with: --settings-from's file, prime-rl's
    defaults (`none`), or the closest canonical config of the checkout, chosen here and named in
    the header. Several equally close, or none close, is refused, listing them, before anything
    is created: the procedure starts from the closest canonical config, never silently from
    defaults. Returns the header line."""
    from pathlib import Path

    from driver.backends.prime_rl import (canonical_candidates, closest_canonical,
                                          describe_candidates)
    from driver.errors import UsageError

    if state.base_config:
        if state.settings_from:
            raise UsageError("--settings-from is for an env without a canonical config; "
                             f"--base-config {state.base_config} is iter_0's whole config already. "
                             "Pass one of them; nothing was created.")
        return None
    if state.backend != "prime_rl":
        return None
    what = "its trainer, optimizer, inference, sampling and batch settings, not its envs"
    if state.settings_from == "none":
        return ("settings: prime-rl's defaults (--settings-from none): no canonical config's "
                "trainer, optimizer or inference settings")
    if state.settings_from:
        path = Path(state.settings_from).resolve()
        state.settings_from = str(path)
        _check_settings(path, backend.dialect)
        return f"settings: {path} (--settings-from): {what}"
    candidates = canonical_candidates(state.prime_rl_dir)
    if not candidates:
        return (f"settings: prime-rl's defaults: no canonical config for {state.dataset}, and no "
                "prime-rl checkout to choose the closest from (--settings-from PATH names one)")
    closest, why = closest_canonical(candidates, state.model)
    if len(closest) == 1:
        state.settings_from = str(closest[0])
        _check_settings(closest[0], backend.dialect)
        return (f"settings: {closest[0]}, the closest canonical config ({state.dataset} has none; "
                f"{why}): {what}. --settings-from PATH picks another, --settings-from none "
                "trains on prime-rl's defaults")
    shown = closest or candidates
    raise UsageError(
        f"{state.dataset} has no canonical config in {state.prime_rl_dir or 'the prime-rl checkout'}, "
        + (f"and {len(closest)} are equally close ({why}): " if closest else
           f"and none trains {state.model} or a model of its size. The candidates: ")
        + describe_candidates(shown)
        + ". Pass --settings-from PATH (one of them: every arm trains with its settings, never its "
        "envs), --settings-from none (prime-rl's defaults) or --base-config PATH (iter_0's whole "
        "config); nothing was created.")


def _check_settings(path, dialect: str) -> None:
    """A --settings-from file must be TOML whose keys prime-rl's configs of this dialect know."""
    import tomllib

    from driver.arms.arm import shared_settings
    from driver.dialects import classic_schema, current_schema
    from driver.errors import UsageError

    if not path.is_file():
        raise UsageError(f"--settings-from {path} is not a file; nothing was created.")
    try:
        cfg = shared_settings(tomllib.loads(path.read_text()))
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"--settings-from {path} is not valid TOML: {e}; nothing was created.") from None
    unknown = (current_schema if dialect == "current" else classic_schema).unknown_keys(cfg)
    if unknown:
        raise UsageError(f"--settings-from {path}: prime-rl ({dialect}) would reject its key(s) "
                         f"{', '.join(unknown)}; is it a config of the other generation? Nothing "
                         "was created.")


def _check_base_config(path, dialect: str, knobs) -> None:
    """Refuse, before anything is created, a base config prime-rl would reject on its own:
    unreadable TOML, unknown keys, bad batch arithmetic, no train env, checked against the
    dialect the trainer speaks, with iter_0's flags. The launch checks the full composition
    (with the eval overlay) again before iter_0 trains."""
    from pathlib import Path

    from driver import dialects
    from driver.errors import DriverError, UsageError
    from rl_contract import composition

    if not path.is_file():
        raise UsageError(f"--base-config {path} is not a file")
    try:
        d = dialects.get(dialect)
        # as iter_0 launches it: with its flags (run name, length, the knobs) and, on the
        # current generation, under the eval overlay's filesystem broadcast (a canonical config
        # leaves both to prime-rl's defaults, as configs/basic/*/rl.toml@559b447 all do)
        cfg = composition.compose(["@", str(path), *d.iter0_overrides(knobs.for_iter0(), Path("OUT"))])
        if dialect == "current":
            cfg = composition.deep_merge(cfg, {"weight_broadcast": {"type": "filesystem"}})
        d.check_effective(cfg)
    except (composition.CompositionError, DriverError) as e:
        raise UsageError(f"base config {path} does not compose for prime-rl's {dialect} "
                         f"configs: {e}") from None


def eval_line(state, backend) -> str:
    """How every arm is measured: the examples, greedy pass@1, and the stochastic draws where
    the backend can sample them (else why not)."""
    from driver import dialects

    line = (f"eval: every arm on the same {state.eval_examples} examples of each split, greedy "
            "pass@1")
    if not state.eval_draws:
        return line + " only (--eval-draws 0)"
    seeds = backend.eval_draw_seeds(dialects.get(backend.dialect).per_source_eval_sampling)
    if seeds is None:
        return (line + f" only: --eval-draws {state.eval_draws} asked for draws, but this "
                "backend's eval samples every eval env alike (one eval sampling), so the summary "
                "decides on greedy pass@1")
    return (line + f", and {state.eval_draws} stochastic draws per example at temperature 1.0 "
            f"(seeds: {seeds}); the summary decides on the per-draw success rate")
