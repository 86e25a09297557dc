"""Phase 1 (introspect the hub env) and Phase 2 (iter_0 baseline, or --init-from)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from driver.envs.describe import refuse_unscorable
from driver.envs.install import install_generated, is_importable
from driver.envs.introspect import introspect_with_fingerprints
from driver.envs.packages import package_name, write_selection_package
from driver.analysis import evaluation
from driver import faults
from driver.reporting import scratchpad
from driver import teachers
from driver.context import Ctx
from driver.errors import ArmAborted, DriverError, UsageError
from driver.arms.arm import Arm, eval_knobs, shared_settings
from driver.arms.evaluate import evaluate, metrics_entry
from driver.arms.seal import seal_arm
from driver.arms.train import train
from driver.run.files import atomic_write_json, atomic_write_text
from driver.run.arm_files import ArmFiles


def introspect(ctx: Ctx) -> None:
    if not ctx.rd.metrics_json.exists():
        atomic_write_json(ctx.rd.metrics_json, {"iters": [], "controls": []})
    if not ctx.rd.scratchpad.exists():
        scratchpad.render(ctx)
    if not ctx.rd.hub_env_json.exists():
        _introspect(ctx)
    selection_env(ctx)
    # before anything trains: a teacher that cannot teach on this env stops the run here (exit
    # 2), resumable with another teacher, instead of after hours of iter_0
    teachers.preflight(ctx.state, ctx.hub)
    warning = think_parser_warning(ctx.state.model, ctx.hub)
    if warning:
        ctx.say(f"[introspect] warning: {warning}")


def selection_env(ctx: Ctx) -> None:
    """Install (cleanup, install, count) the env that evaluates the hub's selection split with
    its rows labelled (classic prime-rl's eval rows cannot be told apart otherwise: rl_contract/
    rows.py); checked on every resume, as the training interpreter may have changed."""
    sel = ctx.hub.get("selection")
    if not sel or not sel.get("env_id") or is_importable(ctx.trainer.python, sel["env_id"]):
        return
    pkg = write_selection_package(ctx.rd.path / "selection_env", sel["env_id"], ctx.hub)
    install_generated(ctx.trainer.python, pkg, ctx.hub["train_size"])
    ctx.say(f"[introspect] the selection split is evaluated through {sel['env_id']}, which "
            "labels its rows")


def think_parser_warning(model: str, hub: dict) -> str | None:
    """A Qwen3 student writes <think>...</think> before its answer; a hub parser that strips
    think blocks (ThinkParser and its kin) changes what the rubric sees. The generated env mirrors
    the hub's parser regardless (the hub author's call), so the run says so before iter_0."""
    parser = str(hub.get("parser_class", ""))
    if "qwen3" in model.lower() and "think" in parser.lower():
        return (f"the student {model} emits <think>...</think> blocks and the hub parser "
                f"{parser} strips them before the rubric scores the answer. The generated envs "
                "mirror the hub's parser, as they must; check on iter_0's train rollouts that "
                "answers after the think block earn reward (a think block cut off by the token "
                "limit leaves no answer).")
    return None


def _introspect(ctx: Ctx) -> None:
    env_id = ctx.state.dataset
    if ctx.introspected is not None:   # loaded (and checked) by `driver run` before the run dir
        info, fingerprints = ctx.introspected
    else:
        try:
            info, fingerprints = introspect_with_fingerprints(
                ctx.trainer.python, env_id, ctx.state.env_args, hub_id=ctx.state.hub_id,
                kind=ctx.dialect.env_kind)
        except DriverError:
            ctx.aborted("hub env not found")
            raise
    info["hub_id"] = ctx.state.hub_id
    if info.get("selection") and ctx.dialect.name == "classic":
        # its rows are labelled by an env of the run's own (selection_env)
        info["selection"]["env_id"] = package_name(ctx.state.dataset, "selection",
                                                   ctx.state.env_tag)
    if fingerprints is not None:  # hashes only; the gate's blind decontamination reads them
        atomic_write_json(ctx.rd.path / "eval_fingerprints.json", fingerprints)
    faults.point("introspect:before-write")
    atomic_write_json(ctx.rd.hub_env_json, info)
    ctx._hub = info
    try:   # a reward that reads the env's state, and no scorer to call instead: no resume fixes it
        refuse_unscorable(info)
    except DriverError:
        ctx.aborted("the hub reward reads the env's own state and the env exposes no scorer")
        raise
    ctx.say(f"[introspect] {env_id}: {info['env_class']} / {info['parser_class']} / "
            f"{info['rubric_class']}; train {info['train_size']}, eval {info['eval_size']}")


def iter0_configs(ctx: Ctx) -> list[Path]:
    """iter_0's config files, rendered once (the canonical config when one was given, else the
    base template) with the eval overlay beside it."""
    d = ctx.iter_dir(0)
    d.mkdir(parents=True, exist_ok=True)
    base = Path(ctx.state.base_config) if ctx.state.base_config else d / "base_rl.toml"
    overlay = d / "eval_overlay.toml"
    if ctx.state.base_config and ctx.knobs.wandb != "on":
        base = _without_wandb(base, d / "base_rl.toml")
    if not ctx.state.base_config and not base.exists():
        text = ctx.dialect.render_base(ctx.hub, ctx.knobs.for_iter0())
        ctx.dialect.check_rendered(text)
        atomic_write_text(base, text)
    if not overlay.exists():
        text = ctx.dialect.render_eval_overlay(ctx.hub, eval_knobs(ctx))
        ctx.dialect.check_rendered(text)
        atomic_write_text(overlay, text)
    shared = ctx.rd.path / "canonical_shared.toml"
    source = base if ctx.state.base_config else _settings_file(ctx.state.settings_from)
    if source is not None and not shared.exists():
        import tomllib

        import tomli_w

        # every later arm trains with the canonical config's optimizer, trainer and inference
        # settings, as iter_0 does (driver.arms.arm.config_files)
        settings = shared_settings(tomllib.loads(source.read_text()))
        atomic_write_text(shared, "# The canonical config's settings every arm trains with "
                                  f"(from {source}).\n" + tomli_w.dumps(settings))
    if not ctx.state.base_config and shared.exists():
        # no canonical config of the hub env's own: iter_0 is the rendered base over the
        # closest one's settings (--settings-from), composed as every later arm is
        return [shared, base, overlay]
    return [base, overlay]


def _settings_file(settings_from: str | None) -> Path | None:
    return Path(settings_from) if settings_from and settings_from != "none" else None


def _without_wandb(canonical: Path, copy: Path) -> Path:
    """The canonical config itself, or, where it turns W&B on and the run logs without it (no
    credentials: `driver run` said so), a copy without its W&B section for iter_0 to launch."""
    import tomllib

    import tomli_w

    from rl_contract import launch

    cfg = tomllib.loads(canonical.read_text())
    if not launch.wandb_enabled(cfg):
        return canonical
    cfg.pop("wandb", None)
    if isinstance(cfg.get("monitors"), dict):
        cfg["monitors"].pop("wandb", None)
        if not cfg["monitors"]:
            del cfg["monitors"]
    if not copy.exists():
        atomic_write_text(copy, f"# {canonical} without its W&B section (the run logs without "
                                "W&B: no credentials).\n" + tomli_w.dumps(cfg))
    return copy


def baseline(ctx: Ctx) -> None:
    if ctx.state.init_from:
        return init_from(ctx)
    arm = Arm("iter_0", ctx.iter_dir(0), resume_step=None)
    try:
        train(ctx, arm, iter0_configs(ctx), ctx.dialect.iter0_overrides(ctx.knobs.for_iter0(), arm.out))
    except ArmAborted as e:
        # the hub's own rows left prime-rl nothing to train on: no resume changes that
        ctx.aborted(f"iter_0: prime-rl aborted it: {e.reason}")
        raise DriverError(f"{e}. The hub env's train rows carry no learning signal for "
                          f"{ctx.state.model} (every group scored alike). Start a new run with "
                          "another student or env, or a --base-config that turns the "
                          "zero-advantage filter off.") from None
    summary = evaluate(ctx, arm, rows=ctx.hub["train_size"], extra={"source": "trained"})
    ctx.rd.upsert_metric("iters", "iter", metrics_entry(summary, iter=0,
                                                        source="trained"))
    ended = episode_ends(ctx, arm)
    if ended:
        ctx.say(f"[iter_0] {ended}")
    ctx.anchored("trained", str(arm.out), summary["final_step"])
    scratchpad.render(ctx)


def episode_ends(ctx: Ctx, arm: Arm) -> str | None:
    """How a multi-turn env's train episodes of the arm ended, counted over every train step
    (verifiers' stop conditions), with the episodes the student's context cut (prompt_too_long)
    named apart: they end before the env's turn limit, whatever the student plays. None for a
    single-turn env or an arm without train rows."""
    from collections import Counter

    it = ctx.hub.get("interaction") or {}
    if it.get("kind") in (None, "single_turn"):
        return None
    stops: Counter = Counter()
    for s in ctx.dialect.train_steps(arm.out, arm.resume_step or 0, arm.final_step(ctx.state.steps_per_run)):
        stops.update(str(r.get("stop_condition") or "unknown") for r in ctx.dialect.train_rows(arm.out, s))
    total = sum(stops.values())
    if not total:
        return None
    line = (f"train episodes: {total}, ended by " + ", ".join(f"{k} {v}" for k, v in stops.most_common()))
    cut = stops.get("prompt_too_long", 0)
    if cut:
        line += (f"; {cut} of {total} were cut by the student's context (prompt_too_long) before the "
                 f"env's max_turns {it.get('max_turns')}: the run header states the context; a "
                 "student with a longer one, or shorter replies, lets them finish")
    return line


@dataclass(frozen=True)
class InitSource:
    """What --init-from named, resolved: a run directory this driver made (its iter_0 is reused),
    that run's iter_0, or a prime-rl-style directory (prime_out/ beside run.json and
    metrics.json)."""
    kind: str        # "run", "iter_0" or "prime_out"
    records: Path    # where its run.json and metrics.json are
    arm: Path        # the directory holding the reused prime_out/ (run.json's iter_0_path)

    @property
    def out(self) -> Path:
        return self.arm / ArmFiles.OUT


def resolve_init_from(src: Path) -> InitSource:
    """Which of the three --init-from accepts `src` is; a UsageError naming them when none."""
    src = Path(src)
    if (src / "run.json").is_file() and (src / "iter_0").is_dir() and not (src / ArmFiles.OUT).exists():
        return InitSource("run", src, src / "iter_0")
    if src.name == "iter_0" and (src.parent / "run.json").is_file():
        return InitSource("iter_0", src.parent, src)
    if (src / ArmFiles.OUT).is_dir():
        return InitSource("prime_out", src, src)
    raise UsageError(
        f"--init-from {src} is none of what it reuses: a run directory this driver made "
        "(run.json and iter_0/ inside), that run's iter_0/, or a prime-rl output directory "
        "(prime_out/ beside run.json and metrics.json). Pass one of those, or start without "
        "--init-from to train iter_0.")


def init_from_problems(dialect, source: InitSource) -> tuple[int | None, list[str]]:
    """(final step, what is missing) for a prior run reused as iter_0, read through the
    dialect's layout (rl_contract): its run.json and metrics.json, the newest step whose every
    resume tree is present, that step's weights (classic: the HF directory, sharded or not;
    current: the broadcast a final-weights eval loads), the train rows of its last step (classic
    files them one step below) and, classic, its final eval. Checked by `driver run` before
    anything starts."""
    out = source.out
    f = dialect.resumable_step(out)
    if f is None:
        return None, [f"a checkpoint under {out} with every tree a resume reads "
                      "(" + ", ".join(str(t.relative_to(out)) for t in dialect.resume_trees(out, 0))
                      .replace("step_0", "step_N") + ")"]
    required = [source.records / "run.json", source.records / "metrics.json",
                *dialect.resume_trees(out, f), dialect.train_file(out, dialect.rows_step(f))]
    if not dialect.separate_final_eval:   # the run evaluated its final weights itself
        required.append(dialect.eval_file(out, f))
    return f, [str(p) for p in required if not p.exists()] + dialect.weights_problems(out, f)


def init_from_source(state, dialect) -> tuple[InitSource, int]:
    """Resolve --init-from and refuse, naming what to do, what cannot be iter_0 of this run: a
    driver run whose iter_0 has not finished, one trained in another dialect, on another hub env
    or with another model, or a directory that lacks a file a resuming arm needs. Returns the
    source and its final step. `driver run` calls it before anything exists; the baseline phase
    again before it links anything."""
    from driver.run.files import read_json

    given = Path(str(state.init_from))
    source = resolve_init_from(given)
    if source.kind != "prime_out":
        unfinished = [n for n in (ArmFiles.TRAIN_DONE, ArmFiles.EVAL_SUMMARY)
                      if not (source.arm / n).is_file()]
        if unfinished:
            raise UsageError(
                f"--init-from {given}: iter_0 of the run {source.records} has not finished (no "
                f"{' or '.join(unfinished)} in {source.arm}). `driver resume {source.records}` "
                "until iter_0 is evaluated, then reuse it; or start without --init-from.")
    try:
        prior = read_json(source.records / "run.json")
    except (OSError, ValueError):
        prior = None
    if isinstance(prior, dict):
        theirs = prior.get("dialect") or ("classic" if source.kind != "prime_out" else None)
        if theirs and theirs != dialect.name:
            raise UsageError(
                f"--init-from {given}: its iter_0 was trained in prime-rl's {theirs} dialect "
                f"(configs and output layout), and this run's trainer speaks {dialect.name}; a "
                "checkpoint is reused only within one dialect. Reuse a run made with this "
                "trainer, or start without --init-from.")
        for field, flag, what in (("dataset", "--dataset", "hub env"), ("model", "--model", "model")):
            theirs = prior.get(field)
            if isinstance(theirs, str) and theirs != getattr(state, field):
                raise UsageError(
                    f"--init-from {given}: its iter_0 was trained with {what} {theirs}, and this "
                    f"run asks for {what} {getattr(state, field)}. Pass {flag} {theirs} to "
                    f"build on it, or start without --init-from to train iter_0 on "
                    f"{getattr(state, field)}.")
    f, missing = init_from_problems(dialect, source)
    if missing or f is None:   # iter_0 would be reused without these
        raise UsageError(f"--init-from {given} is missing: " + ", ".join(missing[:6])
                         + (f" (and {len(missing) - 6} more)" if len(missing) > 6 else ""))
    refuse_unmeasurable_setting(state, dialect, source, given)
    return source, f


SETTING_FLAGS = (("max_completion_tokens", "--max-completion-tokens"), ("temperature", "--eval-temperature"))


def prior_eval_setting(dialect, source: InitSource) -> dict | None:
    """The eval setting the reused iter_0's final eval was measured under: the prior driver
    run's as it recorded it, else what the prime-rl output itself recorded (classic: the
    orchestrator's control/orch.toml), else None."""
    from driver.run.files import read_json

    prior = source.arm / ArmFiles.EVAL_SUMMARY
    recorded = read_json(prior).get("eval_config") if prior.is_file() else None
    if isinstance(recorded, dict) and not recorded.get("unknown"):
        return recorded
    own = dialect.recorded_eval_setting(source.out)
    return {**own, "measures": dialect.final_eval_measures} if own else None


def _same_setting(prior: dict | None, own: dict) -> bool:
    return prior is not None and all(prior.get(k) == own.get(k) for k, _ in SETTING_FLAGS)


def refuse_unmeasurable_setting(state, dialect, source: InitSource, given: Path) -> None:
    """A classic iter_0 is measured only inside a training run (its final eval), so a reused
    one keeps the setting it was measured under; where that is not this run's, no lift against
    it could be computed: refused, naming the flags that measure every arm the same way."""
    if dialect.separate_final_eval:
        return   # the current generation measures the inherited weights again instead
    prior = prior_eval_setting(dialect, source)
    own = {"max_completion_tokens": state.max_completion_tokens, "temperature": state.eval_temperature}
    if _same_setting(prior, own):
        return
    if prior is None:
        raise UsageError(
            f"--init-from {given}: nothing records how its final eval was sampled (no "
            "eval_summary.json of a driver run, no run_default/control/orch.toml), so no lift "
            "against it could be computed, and classic prime-rl evaluates weights only inside a "
            "training run. Reuse a run that kept its control/orch.toml, or start without --init-from.")
    unset = [flag for key, flag in SETTING_FLAGS if prior.get(key) is None]
    if unset:
        raise UsageError(
            f"--init-from {given}: its final eval left {' and '.join(unset)} to the inference "
            "server's default, which no flag of this run reproduces, so no lift against it could "
            "be computed. Start without --init-from (iter_0 is trained and measured like every arm).")
    flags = " ".join(f"{flag} {prior[key]}" for key, flag in SETTING_FLAGS)
    raise UsageError(
        f"--init-from {given}: its final eval was sampled with max_completion_tokens "
        f"{prior['max_completion_tokens']} and temperature {prior['temperature']}; this run would "
        f"measure every arm with {own['max_completion_tokens']} and {own['temperature']}, and a "
        f"lift is computed only between arms measured alike. Pass {flags} to build on it, or "
        "start without --init-from. Nothing was created.")


def _reused_eval_config(ctx: Ctx, source: InitSource, arm: Arm, measured: bool) -> dict:
    """The eval setting a reused iter_0 was measured under: this run's own where this run
    measured it, else the one it recorded (prior_eval_setting), else unknown, and the summary
    then compares nothing with it."""
    from driver.arms.evaluate import eval_config

    if measured:
        return eval_config(ctx, arm)
    return prior_eval_setting(ctx.dialect, source) or {"unknown": True}


# what link_files leaves in a tree it made: the tree mirrors another run's, file by file
LINKED = ".linked-from"


def link_files(src: Path, dst: Path) -> None:
    """Make `dst` mirror the tree `src` with real directories and a symbolic link per file, so
    a file of it can be replaced here (an eval file by its sealed copy) while `src`, another
    run's, stays as it is. Re-entrant: what is there already is kept, and a `dst` that is one
    link to the whole of `src` (a run directory made before trees were linked file by file)
    is left so."""
    if dst.is_symlink():
        return
    if not (dst / LINKED).exists():   # first: a mirror cut short is still known as one
        atomic_write_text(dst / LINKED, f"{src}\n")
    for folder, _dirs, files in os.walk(src):
        here = dst / Path(folder).relative_to(src)
        here.mkdir(parents=True, exist_ok=True)
        for name in files:
            link = here / name
            if not link.exists() and not link.is_symlink():
                os.symlink(Path(folder) / name, link)


def init_from(ctx: Ctx) -> None:
    """Phase 2A: reuse a prior run as iter_0, in place (symlinks, no copies of weights). Its
    final eval is aggregated like any arm's (numbers only), so the inherited baseline carries
    per-example results and every later arm gets a paired lift against it; where the run never
    evaluated its final weights (the current generation, when no driver measured them), they
    are measured here by the backend's final-weights eval. run.json's iter_0_path names the
    directory whose prime_out/ was reused (a driver run's iter_0/)."""
    from driver.arms.train import final_eval

    from driver.arms.evaluate import eval_config

    source, f = init_from_source(ctx.state, ctx.dialect)
    out = source.out
    dst = ctx.iter_dir(0) / ArmFiles.OUT
    arm = Arm("iter_0", ctx.iter_dir(0), resume_step=None)
    trees = [*ctx.dialect.resume_trees(out, f), ctx.dialect.weights_dir(out, f)]
    # the trees that hold eval files are linked file by file, so that sealing replaces a link
    # here and leaves the reused run's own files as they are
    with_evals = [ctx.dialect.rollouts_dir(out)]
    # the current generation's final weights are measured again under this run's own eval
    # setting unless the reused eval was measured exactly so (then its eval dir is linked)
    reuse_eval = (ctx.dialect.separate_final_eval and ctx.dialect.eval_file(out, f).exists()
                  and _same_setting(prior_eval_setting(ctx.dialect, source), eval_config(ctx, arm))
                  and not (ctx.dialect.final_eval_dir(dst, f).exists()
                           and not ctx.dialect.final_eval_dir(dst, f).is_symlink()
                           and not (ctx.dialect.final_eval_dir(dst, f) / LINKED).exists()))
    if reuse_eval:
        with_evals.append(ctx.dialect.final_eval_dir(out, f))
    for tree in trees:
        if tree.exists():
            link = dst / tree.relative_to(out)
            link.parent.mkdir(parents=True, exist_ok=True)
            if not link.exists():
                os.symlink(tree, link)
    for tree in with_evals:
        if tree.exists():
            link_files(tree, dst / tree.relative_to(out))
    eval_file = ctx.dialect.eval_file(dst, f)
    measured_here = ctx.dialect.separate_final_eval and not reuse_eval
    if measured_here:   # re-entrant: a finished measurement is not launched again
        final_eval(ctx, arm, f)
    summary = evaluation.aggregate(eval_file, selection_env=ctx.dialect.selection_env,
                                   view=ctx.dialect.eval_view, draws_envs=ctx.dialect.draws_envs)
    summary.update({"source": "init-from", "final_step": f, "rows": None,
                    "checkpoint": str(ctx.dialect.weights_dir(out, f)),
                    "eval_config": _reused_eval_config(ctx, source, arm, measured=measured_here)})
    atomic_write_json(ctx.iter_dir(0) / ArmFiles.EVAL_SUMMARY, summary)
    seal_arm(ctx, arm)   # measured: its eval files (linked ones by sealed copies) hold numbers only
    atomic_write_json(ctx.iter_dir(0) / ArmFiles.TRAIN_DONE, {"final_step": f, "source": "init-from"})
    ctx.rd.upsert_metric("iters", "iter", metrics_entry(summary, iter=0, source="init-from"))
    ctx.anchored("init-from", str(source.arm), f)
    scratchpad.render(ctx)
