"""What a hosted launch submits: an arm's effective prime-rl config as the platform takes it (its
output dir the platform's, a forked checkpoint and tasksets named where the run sees them), the
final-weights eval as a one-step run, and the checks the CLI and platform would refuse on."""
from __future__ import annotations

import os
from pathlib import Path

from driver.backends.hosted.records import say, volume_path
from driver.errors import DriverError
from driver.run.files import read_json
from driver.run.model import RunState
from rl_contract.current import RUN_NAME

EVAL_INTERVAL = 1_000_000               # an eval run's only eval is the startup one



def hub_refs(run_dir: Path, state: RunState) -> dict[str, str]:
    """Local taskset id -> the Hub id the platform installs it by: the hub env's --hub-id, and
    each generated env's pushed `owner/name@version` (its env_installed.json)."""
    refs = {}
    hub_env = run_dir / "hub_env.json"
    if hub_env.exists() and state.hub_id:
        refs[read_json(hub_env)["env_id"]] = state.hub_id
    for marker in run_dir.glob("*/env_installed.json"):
        rec = read_json(marker)
        if isinstance(rec.get("hub"), dict) and rec.get("package"):
            refs[rec["package"]] = rec["hub"]["ref"]
    return refs


def _sources(cfg: dict) -> list[dict]:
    orch = cfg.get("orchestrator") or {}
    return [b for part in ("train", "eval") for b in (orch.get(part) or {}).get("source") or []
            if isinstance(b, dict)]


def _to_hub_ids(cfg: dict, refs: dict[str, str]) -> None:
    for b in _sources(cfg):
        taskset = (b.get("env") or {}).get("taskset") or {}
        tid = taskset.get("id")
        if not isinstance(tid, str) or "/" in tid:
            continue
        if tid not in refs:
            raise DriverError(
                f"taskset {tid!r} has no Environments Hub id: a hosted run installs its tasksets "
                "from the Hub. Set --hub-id to the hub env's owner/name (a generated env is pushed "
                "before its arm trains), then `driver resume`.")
        taskset["id"] = refs[tid]


def train_config(args: list[str], run_dir: Path, state: RunState, log: Path) -> dict:
    """An arm's effective config (the files and flags the preflight checked, composed as prime-rl
    composes them) as the platform takes it: the output dir is the platform's (runs/<runId>/ on
    the volume), a forked checkpoint is named where the run sees it on the volume, tasksets by
    their Hub ids."""
    from rl_contract import composition

    try:
        cfg = composition.compose(args)
    except composition.CompositionError as e:
        raise DriverError(str(e)) from None
    cfg.pop("output_dir", None)
    fork = (cfg.get("resume") or {}).get("dir")
    if fork:
        cfg["resume"]["dir"] = volume_path(run_dir, Path(fork))
    _to_hub_ids(cfg, hub_refs(run_dir, state))
    declare_hub_env(cfg, state)
    if "wandb" in (cfg.get("monitors") or {}) and not os.environ.get("WANDB_API_KEY"):
        # the run would log to W&B with no key (a hosted run sees only the secrets passed to it)
        del cfg["monitors"]["wandb"]
        if not cfg["monitors"]:
            del cfg["monitors"]
        say(log, "[monitors.wandb] left out: WANDB_API_KEY is not set here")
    return cfg


HUB_INSTALL_SOURCE = "hub_env_installed"


def declare_hub_env(cfg: dict, state: RunState) -> None:
    """The hub env named by its Hub id (--hub-id) among the run's tasksets, which the platform
    installs from the Environments Hub: a generated env loads it by id and declares no
    requirement for it (a bare distribution name resolves from the public index, where it is
    missing or someone else's: the CLI's installer reads PyPI plus the env's own index only,
    commands/env.py:2968-2981,3044-3060@0.18.0). Where no source names it, it is an eval source
    that never runs (the eval's interval past the run's steps, no startup eval); an eval the
    config already has gets it as one more source, of one example."""
    if not state.hub_id:
        return
    orch = cfg.setdefault("orchestrator", {})
    named = [((b.get("env") or {}).get("taskset") or {}).get("id") for part in ("train", "eval")
             for b in (orch.get(part) or {}).get("source") or [] if isinstance(b, dict)]
    if any(isinstance(t, str) and t.split("@")[0] == state.hub_id for t in named):
        return
    from driver.dialects.current import NULL_AGENT

    block = {"name": HUB_INSTALL_SOURCE, "num_examples": 1, "group_size": 1,
             "env": {"taskset": {"id": state.hub_id}, "agent": NULL_AGENT}}
    ev = orch.get("eval")
    if isinstance(ev, dict) and ev.get("source"):
        ev["source"].append(block)
    else:
        orch["eval"] = {"source": [block], "interval": EVAL_INTERVAL, "skip_first_step": True}


def eval_config(args: list[str], run_dir: Path, state: RunState) -> dict:
    """The final-weights eval as a hosted run: `--tokenizer MODEL @ evals.toml --output-dir D`
    becomes a one-step run that starts from the weights the evals config names and evaluates
    them at startup (policy v0, step 1) with the evals config's sources and sampling."""
    from driver.dialects import knob_keys
    from driver.dialects.current import KNOB_KEYS, CurrentDialect
    from rl_contract import composition

    tokenizer = args[1] if args[:1] == ["--tokenizer"] else state.model
    try:
        ev = composition.compose(args[2:] if args[:1] == ["--tokenizer"] else args)
    except composition.CompositionError as e:
        raise DriverError(str(e)) from None
    evals = {k: v for k, v in (ev.get("eval") or {}).items()
             if k not in ("client", "env_server_base_port", "concurrency")}
    evals.update({"interval": EVAL_INTERVAL, "skip_first_step": False})
    hub = read_json(run_dir / "hub_env.json")
    cfg: dict = {"max_steps": 1, "run": {"name": RUN_NAME}, "tokenizer": {"name": tokenizer},
                 "weight_broadcast": {"type": "filesystem"}}
    knob_keys.apply(cfg, KNOB_KEYS, state.knobs(), "train")   # the run's knobs, as every arm's
    cfg["model"] = {"name": volume_path(run_dir, _final_weights(ev))}   # starts from the weights
    cfg["orchestrator"]["train"]["source"] = [CurrentDialect().hub_train_block(hub)]
    cfg["orchestrator"]["eval"] = evals
    cfg.setdefault("trainer", {})
    cfg["inference"] = {}
    _to_hub_ids(cfg, hub_refs(run_dir, state))
    return cfg


def _final_weights(ev: dict) -> Path:
    """The weights an evals config measures: the broadcast its [online] block loads into the
    base model, or (a standalone config) the model it serves."""
    online = ev.get("online") or {}
    if online.get("broadcasts_dir") is not None and online.get("resume_step") is not None:
        return Path(online["broadcasts_dir"]) / f"step_{int(online['resume_step'])}"
    return Path(ev["model"])


def check_submission(cfg: dict) -> None:
    """What the CLI and the platform refuse, refused here first: the shared-LoRA shape (the
    CLI's own refusal), and every check of the current dialect on the config minus `name`
    (which the CLI, like its own validator, takes off as the run's name)."""
    from driver.dialects import current_schema
    from driver.dialects.current import CurrentDialect

    if isinstance(cfg.get("model"), str) or isinstance(cfg.get("env"), list):
        raise DriverError("a top-level `model = \"...\"` or `[[env]]` is the retired shared-LoRA "
                          "config, which `prime train` refuses")
    body = {k: v for k, v in cfg.items() if k != "name"}
    try:
        CurrentDialect().check_effective(body, complete=False)
    except DriverError as e:
        raise DriverError(f"the hosted config would be refused: {e}") from None
    if "trainer" not in body or not (body.get("orchestrator") or {}).get("train", {}).get("source"):
        raise DriverError("the hosted config has no [trainer] or no train source")
    if (body.get("run") or {}).get("name") != RUN_NAME:
        raise DriverError(f"the hosted config's run.name must be {RUN_NAME!r}")
    model = (body.get("tokenizer") or {}).get("name") or (body.get("model") or {}).get("name")
    if not (body.get("orchestrator") or {}).get("renderer") and not current_schema.has_renderer(str(model)):
        raise DriverError(f"{model!r} is not in prime-rl's renderer map: set [orchestrator.renderer]")
