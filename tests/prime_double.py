"""A test double of the `prime` CLI (PyPI `prime` 0.18.0) and of the Hosted Training platform
behind it, built from the installed CLI's source (prime_cli/commands/rl.py, api/training.py,
api/rl.py, commands/env.py, commands/volumes.py, volume_objects.py) and the contract read from it.
tests/prime_bin/prime runs it; a test puts that directory first on PATH.

The CLI half speaks the same arguments, JSON shapes, messages and exit codes as 0.18.0 for the
commands the hosted backend uses: `--version`, `whoami`; `train CONFIG` (the DefaultGroup's
hidden `run`) with -o/--yes/--volume/--volume-size/-e/--env-file/--gpu-type/--image-tag/
--resume-from; `train models|list|get|progress|rollouts|checkpoints|usage|stop`; `env push`,
`env status`; `volumes ls|get|list`. Its refusals are the CLI's, in the CLI's order: an invalid
-o, a blank --resume-from, a missing or invalid TOML, the shared-LoRA shape (a top-level
`model = "..."` string or `[[env]]` array), a non-string image_tag/gpu_type/volume/volume_size,
a --volume-size without a volume, an unsupported secret (only WANDB_API_KEY and HF_TOKEN), then
the missing API key (`PRIME_API_KEY` or ~/.prime/config.json's api_key), then no --yes on a
closed stdin ("Aborted.", rc 1). Errors go to stdout as `Error: ...` with rc 1 (volumes ls and
usage -o json: stderr); a click usage error is rc 2. `--plain` is accepted anywhere.

The platform half is what the CLI leaves to the server, modelled where the driver depends on it:
- a submission is checked against prime-rl's current config schema (the CLI says the platform
  validates it), minus `name`, which names the run; `--resume-from` needs a PAUSED run and runs
  on its volume;
- a run goes QUEUED -> RUNNING -> COMPLETED (or FAILED, with the trainer's last error line as
  error_message and failure_analysis; or STOPPED by `train stop`; or PAUSED, see below). It
  "trains" by running the trainer double's current generation (tests/trainer_double.py) as a
  subprocess with output_dir = <volume>/runs/<runId>, so the layout under runs/<runId>/ is
  prime-rl's; the volume is mounted at /volume (paths in the config starting /volume/ are the
  volume's); tasksets are installed from the Hub by `owner/name@version` (a pushed env, or a
  public one under PRIME_DOUBLE_PUBLIC_OWNERS), a bare id fails the run;
- prime-rl evaluates the weights it starts from at startup (policy v0, step_1): the trainer
  double scores v0 at its base skill, so for a `[model] name` that is a double broadcast (its
  skill in config.json) the platform double writes that eval itself, with the trainer double's
  own write_eval at the weights' skill, and runs the rest with skip_first_step;
- a run's files show in `volumes ls/get` once it has ended (volumes.py: "A live ... run's
  changes appear once it ends"); `train progress` sees its steps while it runs;
- `usage` bills tokens: TOKENS_PER_ROLLOUT per rollout trained, at TRAIN_PRICE_PER_MTOK;
- `env push` keeps each env's content hashes (the CLI's compute_content_hash) and answers a
  second push of the same content with the CLI's "content hash ... already exists" failure.

Knobs (environment): PRIME_DOUBLE_HOME (required: the platform's state, volumes and Hub);
PRIME_DOUBLE_VERSION (0.18.0); PRIME_DOUBLE_MODELS (comma list for `train models`);
PRIME_DOUBLE_USER (alice); PRIME_DOUBLE_QUEUE_S (0.2 s queued); PRIME_DOUBLE_PAUSE=NAME_PART:K
pauses, at step K, each run whose name contains NAME_PART and that was not itself resumed (a
checkpoint is saved at K, as `train pause` does); PRIME_DOUBLE_FAIL=NAME_PART:MESSAGE fails
such a run with that error message before it trains. Every call is logged to HOME/calls.jsonl.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAINER_DOUBLE = HERE / "trainer_double.py"
TERMINAL = {"STOPPED", "FAILED", "COMPLETED", "PAUSED"}
SECRET_KEYS = {"WANDB_API_KEY", "HF_TOKEN"}
CLI_ONLY_KEYS = {"env_file", "env_files", "image_tag", "gpu_type", "volume", "volume_size",
                 "source_ref", "type"}
TOKENS_PER_ROLLOUT = 100
TRAIN_PRICE_PER_MTOK = 10.0
RUN_KEYS = ["id", "name", "user_id", "team_id", "cluster_id", "prime_cluster_id", "status", "kind",
            "rollouts_per_example", "seq_len", "max_steps", "max_tokens", "batch_size", "loss",
            "teacher", "base_model", "environments", "run_config", "eval_config", "val_config",
            "buffer_config", "learning_rate", "lora_alpha", "max_inflight_rollouts",
            "oversampling_factor", "max_async_level", "volume_name", "gpu_count", "wandb_entity",
            "wandb_project", "wandb_run_name", "runs_ahead", "queue_reason", "notice", "started_at",
            "completed_at", "error_message", "created_at", "updated_at", "failure_analysis",
            "source_commit"]
NO_KEY = "Error: No API key configured. Use command 'prime login' to configure your API key."


def cost_of(rollouts: int) -> float:
    """What the double bills for a run that trained `rollouts` rollouts (steps x batch size)."""
    return round(rollouts * TOKENS_PER_ROLLOUT / 1e6 * TRAIN_PRICE_PER_MTOK, 6)


class Exit(Exception):
    def __init__(self, code: int):
        self.code = code


def out(text: str = "") -> None:
    print(text, flush=True)


def err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def fail(text: str, code: int = 1, stderr: bool = False) -> None:
    (err if stderr else out)(text)
    raise Exit(code)


def dump(data) -> None:
    out(json.dumps(data, indent=2, default=str))


def stamp(t: float | None = None) -> str:
    return str(datetime.fromtimestamp(t or time.time(), tz=timezone.utc))


# --------------------------------------------------------------------------------------------
# the platform's state

def home() -> Path:
    h = os.environ.get("PRIME_DOUBLE_HOME")
    if not h:
        err("prime double: set PRIME_DOUBLE_HOME")
        raise Exit(3)
    p = Path(h)
    for d in ("runs", "volumes", "hub", "work"):
        (p / d).mkdir(parents=True, exist_ok=True)
    return p


class Locked:
    def __enter__(self):
        self.f = open(home() / "lock", "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def write_json(path: Path, data) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def load_run(run_id: str) -> dict | None:
    p = home() / "runs" / f"{run_id}.json"
    return json.loads(p.read_text()) if p.exists() else None


def save_run(rec: dict) -> None:
    rec["updated_at"] = time.time()
    write_json(home() / "runs" / f"{rec['id']}.json", rec)


def update_run(run_id: str, **changes) -> dict:
    with Locked():
        rec = load_run(run_id)
        rec.update(changes)
        save_run(rec)
        return rec


def volume_root(name: str) -> Path:
    return home() / "volumes" / name


def run_out(rec: dict) -> Path:
    return volume_root(rec["volume_name"]) / "runs" / rec["id"]


def rollout_steps(rec: dict) -> list[int]:
    steps = set()
    for p in run_out(rec).glob("*/rollouts/step_*/train/all/traces.jsonl"):
        steps.add(int(p.parents[2].name.split("_")[1]))
    return sorted(steps)


def api_key() -> str | None:
    key = os.environ.get("PRIME_API_KEY")
    if key:
        return key
    cfg = Path.home() / ".prime" / "config.json"
    try:
        return json.loads(cfg.read_text()).get("api_key") or None
    except (OSError, ValueError):
        return None


def require_auth() -> None:
    if not api_key():
        fail(NO_KEY)


def user() -> str:
    return os.environ.get("PRIME_DOUBLE_USER", "alice")


def check_output(output: str) -> None:
    if output not in ("table", "json"):
        fail(f"Error: Invalid output format '{output}'. Supported formats: table, json")


def rl_run(rec: dict) -> dict:
    """RLRun.model_dump(): every field, in the model's order."""
    cfg = rec["config"]
    orch = cfg.get("orchestrator") or {}
    view = {
        "id": rec["id"], "name": rec.get("name"), "user_id": "u_" + user(), "team_id": None,
        "cluster_id": None, "prime_cluster_id": "pc_double", "status": rec["status"],
        "kind": "DEDICATED_FULL_FT", "rollouts_per_example": orch.get("group_size"),
        "seq_len": cfg.get("seq_len"), "max_steps": cfg.get("max_steps"), "max_tokens": None,
        "batch_size": orch.get("batch_size"), "loss": "rl", "teacher": None,
        "base_model": (cfg.get("model") or {}).get("name"),
        "environments": [{"id": (s.get("env") or {}).get("taskset", {}).get("id"), "slug": s.get("name")}
                         for s in (orch.get("train") or {}).get("source") or []],
        "run_config": {"max_steps": cfg.get("max_steps")}, "eval_config": None, "val_config": None,
        "buffer_config": None, "learning_rate": None, "lora_alpha": None,
        "max_inflight_rollouts": None, "oversampling_factor": None, "max_async_level": None,
        "volume_name": rec["volume_name"], "gpu_count": 2, "wandb_entity": None,
        "wandb_project": None, "wandb_run_name": None,
        "runs_ahead": 0 if rec["status"] == "QUEUED" else None,
        "queue_reason": "waiting for capacity" if rec["status"] == "QUEUED" else None, "notice": None,
        "started_at": stamp(rec["started_at"]) if rec.get("started_at") else None,
        "completed_at": stamp(rec["completed_at"]) if rec.get("completed_at") else None,
        "error_message": rec.get("error_message"), "created_at": stamp(rec["created_at"]),
        "updated_at": stamp(rec["updated_at"]), "failure_analysis": rec.get("failure_analysis"),
        "source_commit": None}
    return {k: view[k] for k in RUN_KEYS}


# --------------------------------------------------------------------------------------------
# commands

def cmd_whoami(a) -> None:
    require_auth()
    out(f"Logged in as {user()} ({user()}@example.com)")


def cmd_models(a) -> None:
    check_output(a.output)
    require_auth()
    names = os.environ.get("PRIME_DOUBLE_MODELS",
                           "Qwen/Qwen3-4B-Instruct-2507,Qwen/Qwen3-30B-A3B-Instruct-2507").split(",")
    data = {"available_fft_models": [{"name": n, "clusters": [{"cluster_id": "c1", "cluster_name": "double",
                                                                 "gpu_type": "H200_141GB"}]}
                                     for n in names if n],
            "on_demand": [{"gpu_type": "H200_141GB", "price_per_gpu_hour": 3.5, "discount_label": None,
                           "available_now": True, "is_beta": True}],
            "on_demand_beta_access": True}
    if a.output == "json":
        dump(data)
    else:
        for m in data["available_fft_models"]:
            out(m["name"])


def cmd_list(a) -> None:
    check_output(a.output)
    if a.num < 1 or a.page < 1:
        fail("Error: --num and --page must be at least 1")
    require_auth()
    recs = [json.loads(p.read_text()) for p in (home() / "runs").glob("*.json")]
    recs.sort(key=lambda r: r["created_at"], reverse=True)
    page = recs[(a.page - 1) * a.num: a.page * a.num]
    if a.output == "json":
        dump({"runs": [rl_run(r) for r in page], "total": len(recs), "page": a.page, "per_page": a.num})
    else:
        for r in page:
            out(f"{r['id']}  {r['status']}  {r.get('name') or ''}")


def _run_or_404(run_id: str, stderr: bool = False) -> dict:
    rec = load_run(run_id)
    if rec is None:
        fail("Error: HTTP 404: Run not found", stderr=stderr)
    return rec


def cmd_get(a) -> None:
    check_output(a.output)
    require_auth()
    rec = _run_or_404(a.run_id)
    if a.output == "json":
        dump({"run": rl_run(rec)})
    else:
        out(f"Run {rec['id']}\nStatus: {rec['status']}")
        if rec.get("error_message"):
            out(f"Error: {rec['error_message']}")


def cmd_progress(a) -> None:
    require_auth()
    rec = _run_or_404(a.run_id)
    steps = rollout_steps(rec)
    dump({"latest_step": steps[-1] if steps else None, "steps_with_samples": steps,
          "steps_with_distributions": [], "last_updated_at": datetime.now(timezone.utc).isoformat()})


def cmd_rollouts(a) -> None:
    require_auth()
    rec = _run_or_404(a.run_id)
    samples = []
    for p in run_out(rec).glob(f"*/rollouts/step_{a.step}/train/all/traces.jsonl"):
        samples += [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
    total = len(samples)
    chunk = samples[(a.page - 1) * a.num: a.page * a.num]
    dump({"run_id": a.run_id, "samples": chunk, "total": total, "page": a.page, "limit": a.num,
          "total_pages": (total + a.num - 1) // a.num})


def cmd_checkpoints(a) -> None:
    check_output(a.output)
    require_auth()
    rec = _run_or_404(a.run_id)
    cks = []
    for d in sorted(run_out(rec).glob("*/checkpoints/step_*")):
        step = int(d.name.split("_")[1])
        cks.append({"id": f"ck_{rec['id']}_{step}", "rft_run_id": rec["id"], "step": step,
                    "storage_url": f"volume://{rec['volume_name']}/{d.relative_to(volume_root(rec['volume_name']))}",
                    "status": "READY", "size_bytes": sum(f.stat().st_size for f in d.rglob("*") if f.is_file()),
                    "created_at": stamp(d.stat().st_mtime), "uploaded_at": None})
    dump({"checkpoints": cks})


def cmd_usage(a) -> None:
    check_output(a.output)
    if not api_key():
        fail(NO_KEY, stderr=a.output == "json")
    rec = load_run(a.run_id)
    if rec is None:
        fail("Error: HTTP 404: Run not found", stderr=a.output == "json")
    rollouts = rec.get("rollouts_trained", 0)
    tokens = rollouts * TOKENS_PER_ROLLOUT
    cost = cost_of(rollouts)
    data = {"run_id": rec["id"], "run_name": rec.get("name"), "base_model": rl_run(rec)["base_model"],
            "status": rec["status"],
            "training": {"tokens": tokens, "input_tokens": 0, "output_tokens": 0, "cost_usd": cost},
            "inference": {"tokens": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0},
            "total_tokens": tokens, "total_cost_usd": cost,
            "pricing": {"training_per_mtok": TRAIN_PRICE_PER_MTOK, "inference_input_per_mtok": None,
                        "inference_output_per_mtok": None},
            "record_count": len(rollout_steps(rec))}
    if a.output == "json":
        dump(data)
    else:
        out(f"Run {rec['id']}: ${cost:.4f}")


def cmd_stop(a) -> None:
    require_auth()
    if not a.force:
        out("Are you sure you want to stop run " + a.run_id + "? [y/N]: Aborted.")
        raise Exit(1)
    rec = _run_or_404(a.run_id)
    if rec["status"] not in TERMINAL:
        with Locked():
            rec = load_run(a.run_id)
            if rec["status"] not in TERMINAL:
                pgid = rec.get("worker_pgid")
                if pgid:
                    try:
                        os.killpg(pgid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                rec.update(status="STOPPED", completed_at=time.time(),
                           rollouts_trained=len(rollout_steps(rec)) * int(rl_run(rec)["batch_size"] or 0))
                save_run(rec)
    rec = load_run(a.run_id)
    if rec["status"] == "STOPPED":
        out(f"✓ Run {a.run_id} stopped successfully")
        out("Status: STOPPED")
    else:
        out(f"Run {a.run_id} reached a terminal state before the stop completed")
        out(f"Status: {rec['status']}")


def _collect_secrets(env_args: list[str], env_files: list[str]) -> dict:
    secrets: dict = {}
    for path in env_files:
        try:
            for line in Path(path).read_text().splitlines():
                if "=" in line and not line.lstrip().startswith("#"):
                    k, v = line.split("=", 1)
                    secrets[k.strip()] = os.path.expandvars(v.strip())
        except OSError:
            fail(f"Error: Env file not found: {path}")
    for item in env_args:
        if item.endswith(".env") and Path(item).exists():
            secrets.update(_collect_secrets([], [item]))
        elif "=" in item:
            k, v = item.split("=", 1)
            secrets[k] = v
        else:
            if item not in os.environ:
                fail(f"Error: Environment variable {item} is not set")
            secrets[item] = os.environ[item]
    unsupported = sorted(k for k in secrets if k not in SECRET_KEYS)
    if unsupported:
        out("Error: full-FT runs only forward "
            f"{', '.join(sorted(SECRET_KEYS))} today; got unsupported secret(s): {', '.join(unsupported)}.")
        out("Drop these from --env-var/--env-file, or wait for generic secret forwarding on the "
            "dedicated training endpoint.")
        raise Exit(1)
    return secrets


def _validate_on_platform(config: dict) -> list[str]:
    """The platform validates the prime-rl config (minus `name`) on submission."""
    sys.path.insert(0, str(HERE.parent))
    from driver.dialects import current_schema

    body = {k: v for k, v in config.items() if k != "name"}
    problems = [f"config.{k}: Extra inputs are not permitted" for k in current_schema.unknown_keys(body)]
    for required in ("trainer", "orchestrator"):
        if required not in body:
            problems.append(f"config.{required}: Field required")
    return problems


def cmd_train_run(a) -> None:
    check_output(a.output)
    if a.resume_from is not None and not a.resume_from.strip():
        fail("Error: --resume-from needs the ID of a PAUSED run.")
    path = Path(a.config_path)
    if not path.exists():
        fail(f"Error: Config file not found: {a.config_path}")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        fail(f"Error: Invalid TOML in {a.config_path}: {e}")
    if isinstance(raw.get("model"), str) or isinstance(raw.get("env"), list):
        fail(f"Error: {a.config_path} is a shared LoRA training config (a top-level `model = \"...\"` "
             "or `[[env]]`). Shared LoRA training no longer accepts new runs; Hosted Training runs "
             "prime-rl configs on dedicated clusters. See prime-rl's examples/ for starter configs.")
    if a.sft or ("data" in raw and "trainer" not in raw and "orchestrator" not in raw):
        fail("Error: the prime double models RL runs only (no SFT)")
    name = raw.get("name")
    env_files = [str(path.parent / p) for k in ("env_file", "env_files")
                 for p in ([raw[k]] if isinstance(raw.get(k), str) else raw.get(k) or [])]
    secrets = _collect_secrets(a.env_var or [], env_files + (a.env_file or []))
    for key in ("image_tag", "gpu_type", "volume", "volume_size"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            fail(f"Error: {key} in {a.config_path} must be a string, got {type(raw[key]).__name__}.")
    volume = a.volume or raw.get("volume")
    if (a.volume_size or raw.get("volume_size")) and not volume:
        fail("Error: --volume-size (and top-level `volume_size`) needs --volume (or top-level `volume`).")
    config = {k: v for k, v in raw.items() if k not in CLI_ONLY_KEYS}
    if "type" in raw:
        out(f'Warning: `type = "{raw["type"]}"` in {a.config_path} is no longer used. Remove it from the config.')
    require_auth()
    if a.output != "json":
        out("Local validation is unavailable for this run; Platform validates it on submission.")
    if not a.yes:   # confirm_or_skip: a prompt on stdout; a closed stdin aborts
        out("Launch this Hosted Training run? [Y/n]: ")
        answer = sys.stdin.readline() if sys.stdin else ""
        if not answer:
            out("Aborted.")
            raise Exit(1)
        if answer.strip().lower().startswith("n"):
            out("\nRun cancelled")
            raise Exit(0)
    with Locked():
        source = None
        if a.resume_from:
            source = load_run(a.resume_from)
            if source is None or source["status"] != "PAUSED":
                out(f"Error: Run {a.resume_from} is not PAUSED" if source else "Error: HTTP 404: Run not found")
                out(f"Tip: a run resumes once `prime train get {a.resume_from}` shows PAUSED")
                raise Exit(1)
            if volume and volume != source["volume_name"]:
                out(f"Error: --volume must name the paused run's volume ({source['volume_name']})")
                out(f"Tip: a run resumes once `prime train get {a.resume_from}` shows PAUSED")
                raise Exit(1)
            volume = source["volume_name"]
        problems = _validate_on_platform(config)
        if problems:
            out("Error: Validation failed:")
            for p in problems:
                out(f"  - {p}")
            raise Exit(1)
        if not volume:
            volume = "_pvc"   # a per-run PVC: its outputs are not readable with `prime volumes`
        elif not volume_root(volume).exists():
            (err if a.output == "json" else out)(f"Volume '{volume}' doesn't exist, creating it ({a.volume_size or '5Ti'})...")
            volume_root(volume).mkdir(parents=True)
        n = len(list((home() / "runs").glob("*.json"))) + 1
        run_id = f"run_{n:04d}{hashlib.sha256(str(time.time()).encode()).hexdigest()[:6]}"
        rec = {"id": run_id, "name": name, "status": "QUEUED", "config": config, "volume_name": volume,
               "created_at": time.time(), "resume_from": a.resume_from, "secrets": sorted(secrets),
               "config_path": str(path.resolve())}
        save_run(rec)
    work = home() / "work" / run_id
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "worker.log", "w") as log:
        subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "_worker", run_id],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
    if a.output == "json":
        dump({"run": {"runId": run_id}})
    else:
        out(f"Dispatched hosted run {run_id}")
        out("")
        out("Monitor run at:")
        out(f"  https://app.primeintellect.ai/dashboard/training/{run_id}")


# ---- env ----------------------------------------------------------------------------------

def content_hash(env_path: Path) -> str:
    """commands/env.py compute_content_hash (no .gitignore in the packages tested)."""
    skip = {"dist", "__pycache__", "build", "outputs"}
    files = {}

    def add(p: Path):
        if p.is_file() and not p.is_symlink() and not p.name.startswith(".") \
                and "__pycache__" not in p.relative_to(env_path).parts:
            files[p.relative_to(env_path).as_posix()] = p

    for pattern in ("README.md", "pyproject.toml", "*.py"):
        for p in sorted(env_path.glob(pattern)):
            add(p)
    for sub in sorted(env_path.iterdir()):
        if not sub.is_dir() or sub.name.startswith(".") or sub.name in skip or sub.name.endswith(".egg-info"):
            continue
        for root, dirs, names in os.walk(sub):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in skip and not d.endswith(".egg-info"))
            for f in sorted(names):
                add(Path(root) / f)
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(f"file:{rel}".encode())
        h.update(files[rel].read_bytes())
    return h.hexdigest()


def hub_record(owner: str, name: str) -> Path:
    return home() / "hub" / owner / f"{name}.json"


def cmd_env_push(a) -> None:
    if a.runtime is not None and a.runtime not in ("v0", "v1"):
        fail(f"Error: --runtime must be v0 or v1, got {a.runtime!r}")
    env_path = (Path(a.path) / a.env_id.split("/")[-1].replace("-", "_") if a.env_id
                else Path(a.path or ".")).resolve()
    if not (env_path / "pyproject.toml").exists():
        fail("Error: pyproject.toml not found")
    project = tomllib.loads((env_path / "pyproject.toml").read_text()).get("project", {})
    env_name = a.name or project.get("name")
    if not env_name:
        fail("Error: No name found in pyproject.toml and no --name provided")
    version = project.get("version", "0.0.0")
    out(f"Environment name: {env_name}")
    if not list(env_path.glob("*.py")) and not any((d / "__init__.py").exists() for d in env_path.iterdir() if d.is_dir()):
        fail("Error: No environment Python file found")
    out(f"Building environment package at {env_path}...")
    wheel = f"{env_name.replace('-', '_')}-{version}-py3-none-any.whl"
    out(f"✓ Built {wheel} (1,024 bytes)")
    out("")
    out("Uploading to Prime Intellect Hub...")
    if not api_key():
        out(f"Unexpected error: {NO_KEY.removeprefix('Error: ')}")
        raise Exit(1)
    out("Resolving environment...")
    owner = a.owner or a.team or user()
    rec_path = hub_record(owner, env_name)
    with Locked():
        existed = rec_path.exists()
        rec = json.loads(rec_path.read_text()) if existed else {
            "environment_id": "envid_" + hashlib.sha256(f"{owner}/{env_name}".encode()).hexdigest()[:8],
            "visibility": (a.visibility or "PUBLIC").upper(), "versions": []}
        out(f"✓ {'Found existing' if existed else 'Created'} environment: {owner}/{env_name}")
        digest = content_hash(env_path)
        if any(v["content_hash"] == digest for v in rec["versions"]):
            out("Failed to prepare wheel upload: HTTP 409: Wheel with this content hash already "
                "exists for this environment")
            out("Tip: If you've made changes to your environment, ensure the content has actually changed.")
            out("The content hash is based on your source files (*.py, pyproject.toml, README.md).")
            out("Alternatively, use the --auto-bump flag to push a new version without content changes")
            out("Upload failed: 1")
            out("Unexpected error: 1")
            raise Exit(1)
        out("Uploading wheel ...")
        runtime = a.runtime or "v0"
        out(f"Publishing as {'verifiers v1' if runtime == 'v1' else 'legacy verifiers v0'} "
            f"({'from --runtime' if a.runtime else 'from the verifiers requirement'})")
        rec["versions"].append({"semantic_version": version, "content_hash": digest,
                                "created_at": datetime.now(timezone.utc).isoformat(), "runtime": runtime,
                                "dependencies": project.get("dependencies", [])})
        if a.visibility:
            rec["visibility"] = a.visibility.upper()
        rec_path.parent.mkdir(parents=True, exist_ok=True)
        write_json(rec_path, rec)
    wheel_sha = hashlib.sha256(f"{digest}{time.time()}".encode()).hexdigest()
    out("")
    out(f"✓ Successfully pushed {owner}/{env_name}")
    out(f"Wheel: {wheel}")
    out(f"SHA256: {wheel_sha}")
    meta = env_path / ".prime" / ".env-metadata.json"
    meta.parent.mkdir(exist_ok=True)
    meta.write_text(json.dumps({"environment_id": rec["environment_id"], "owner": owner, "name": env_name,
                                "pushed_at": datetime.now().isoformat(), "wheel_sha256": wheel_sha,
                                "version": version}, indent=2))
    out(f"Saved environment metadata to {meta}")
    out("")
    out("Install with:")
    out(f"  prime env install {owner}/{env_name}")


def cmd_env_status(a) -> None:
    check_output(a.output)
    if "/" not in a.env_id:
        fail(f"Error: Invalid environment ID format: {a.env_id}. Expected owner/name")
    owner, name = a.env_id.split("/", 1)
    p = hub_record(owner, name)
    if not p.exists():
        fail("Error: HTTP 404: Environment not found")
    rec = json.loads(p.read_text())
    latest = rec["versions"][-1] if rec["versions"] else None
    data = {"name": name, "visibility": rec["visibility"],
            "latest_version": latest and {k: latest[k] for k in ("semantic_version", "content_hash", "created_at")}}
    if a.output == "json":
        dump(data)
    else:
        out(f"Environment: {owner}/{name}\nVisibility: {rec['visibility']}")


# ---- volumes ------------------------------------------------------------------------------

_SEGMENT = re.compile(r"^[A-Za-z0-9._@%+=,:-]+$")


def _rel(path: str) -> str:
    rel = path.removeprefix("/volume/").lstrip("/")
    for seg in [s for s in rel.split("/") if s]:
        if not _SEGMENT.match(seg) or seg in (".", ".."):
            err(f"Error: invalid path segment {seg!r}")
            raise Exit(2)
    return rel


def _hidden(volume: str, rel: str) -> bool:
    """A live run's files show once it ends."""
    parts = rel.split("/")
    if len(parts) >= 2 and parts[0] == "runs" and parts[1]:
        if parts[1] == ".sessions":
            return True
        rec = load_run(parts[1])
        return rec is not None and rec["status"] not in TERMINAL
    return False


def _entries(volume: str, rel: str, recursive: bool) -> list[dict]:
    root = volume_root(volume)
    base = rel.rstrip("/")
    target = root / base if base else root
    if base and (_hidden(volume, base) or not target.exists()):
        err(f"Error: No such file or directory on the volume: /{base}")
        raise Exit(1)
    if target.is_file():
        return [{"path": base, "size": target.stat().st_size,
                 "modified": datetime.fromtimestamp(target.stat().st_mtime, tz=timezone.utc).isoformat(),
                 "type": "file"}]
    found = []
    walker = target.rglob("*") if recursive else target.iterdir()
    for p in walker:
        r = p.relative_to(root).as_posix()
        if _hidden(volume, r) or p.name.endswith(".part"):
            continue
        if p.is_dir():
            found.append({"path": r + "/", "size": None, "modified": None, "type": "directory"})
        else:
            found.append({"path": r, "size": p.stat().st_size,
                          "modified": datetime.fromtimestamp(p.stat().st_mtime, tz=timezone.utc).isoformat(),
                          "type": "file"})
    return sorted(found, key=lambda e: e["path"])


def cmd_volumes_ls(a) -> None:
    check_output(a.output)
    if not api_key():
        fail(NO_KEY, stderr=True)
    if not volume_root(a.name).exists():
        fail(f"Error: Volume '{a.name}' not found", stderr=True)
    entries = _entries(a.name, _rel(a.path), a.recursive)
    if a.output == "json":
        dump(entries)
    else:
        for e in entries:
            out(e["path"])


def cmd_volumes_get(a) -> None:
    require_auth()
    if not volume_root(a.name).exists():
        fail(f"Error: Volume '{a.name}' not found")
    rel = _rel(a.remote_path)
    base = rel.rstrip("/")
    src = volume_root(a.name) / base if base else volume_root(a.name)
    if (base and _hidden(a.name, base)) or not src.exists():
        fail(f"No such file or directory on the volume: /{base}")
    local = a.local_dest
    if src.is_file():
        dest = Path(local) / src.name if (os.path.isdir(local) or local.endswith("/")) else Path(local)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        out(f"Downloaded /{base} -> {dest}")
        return
    into = Path(local) if (not base or rel.endswith("/")) else Path(local) / src.name
    for p in src.rglob("*"):
        if p.is_file() and not _hidden(a.name, p.relative_to(volume_root(a.name)).as_posix()):
            d = into / p.relative_to(src)
            d.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, d)
    out(f"Downloaded /{base} -> {into}")


def cmd_volumes_list(a) -> None:
    check_output(a.output)
    require_auth()
    vols = [{"name": p.name, "size": "5Ti", "status": "RUNNING", "clusterId": "c1", "cluster": None,
             "pvcName": f"pvc-{p.name}", "createdBy": None, "createdByName": None, "createdByEmail": None,
             "createdAt": None} for p in sorted((home() / "volumes").iterdir()) if not p.name.startswith("_")]
    if a.output == "json":
        dump(vols)
    else:
        for v in vols:
            out(v["name"])


# --------------------------------------------------------------------------------------------
# the platform: one worker per run

def _knob(var: str, name: str | None) -> str | None:
    """PRIME_DOUBLE_<X>=NAME_PART:VALUE for a run whose name contains NAME_PART."""
    spec = os.environ.get(var, "")
    part, _, value = spec.partition(":")
    return value if spec and name and part in name else None


def _mounted(value: str, volume: str) -> str:
    return str(volume_root(volume) / value.removeprefix("/volume/")) if value.startswith("/volume/") else value


def _installable(tid: str) -> str | None:
    """Why the platform could not install taskset `tid` from the Hub, or None."""
    if "/" not in tid:
        return f"taskset {tid!r} is not an Environments Hub id (owner/name[@version])"
    owner, rest = tid.split("/", 1)
    name, _, version = rest.partition("@")
    if owner in os.environ.get("PRIME_DOUBLE_PUBLIC_OWNERS", "primeintellect").split(","):
        return None
    p = hub_record(owner, name)
    if not p.exists():
        return f"environment {owner}/{name} not found on the Environments Hub"
    if version and not any(v["semantic_version"] == version for v in json.loads(p.read_text())["versions"]):
        return f"environment {owner}/{name} has no version {version}"
    return None


def worker(run_id: str) -> int:
    import tomli_w

    rec = load_run(run_id)
    time.sleep(float(os.environ.get("PRIME_DOUBLE_QUEUE_S", "0.2")))
    rec = update_run(run_id, status="RUNNING", started_at=time.time(), worker_pgid=os.getpgid(0))
    cfg = json.loads(json.dumps(rec["config"]))
    volume = rec["volume_name"]
    cfg.pop("name", None)
    cfg["output_dir"] = str(run_out(rec))
    run_out(rec).mkdir(parents=True, exist_ok=True)
    if (cfg.get("resume") or {}).get("dir"):
        cfg["resume"]["dir"] = _mounted(cfg["resume"]["dir"], volume)
    model = (cfg.get("model") or {}).get("name")
    if isinstance(model, str) and model.startswith("/volume/"):
        cfg["model"]["name"] = _mounted(model, volume)
    if rec.get("resume_from"):   # continue the paused run from its checkpoint
        src = load_run(rec["resume_from"])
        ckpts = sorted(run_out(src).glob("*/checkpoints/step_*"), key=lambda p: int(p.name.split("_")[1]))
        cfg["resume"] = {"dir": str(ckpts[-1])}
    failing = _knob("PRIME_DOUBLE_FAIL", rec.get("name"))
    problems = [p for s in ((cfg.get("orchestrator") or {}).get("train") or {}).get("source", []) +
                ((cfg.get("orchestrator") or {}).get("eval") or {}).get("source", [])
                if (p := _installable(str(((s.get("env") or {}).get("taskset") or {}).get("id"))))]
    if failing or problems:
        msg = failing or problems[0]
        update_run(run_id, status="FAILED", completed_at=time.time(), error_message=msg,
                   failure_analysis={"rootCause": msg, "evidence": [msg], "confidence": 0.9},
                   rollouts_trained=0)
        return 0
    pause = _knob("PRIME_DOUBLE_PAUSE", rec.get("name"))
    full_steps = int(cfg["max_steps"])
    if pause and not rec.get("resume_from"):
        cfg["max_steps"] = int(pause)
    # prime-rl evaluates the weights it starts from at startup (policy v0, as step_1)
    ev = (cfg.get("orchestrator") or {}).get("eval")
    weights = Path(str((cfg.get("model") or {}).get("name")))
    base_eval = None
    if ev and not ev.get("skip_first_step") and not cfg.get("resume") and (weights / "config.json").exists():
        base_eval = json.loads((weights / "config.json").read_text()).get("skill")
        if base_eval is not None:
            ev["skip_first_step"] = True
    work = home() / "work" / run_id
    (work / "rl.toml").write_text(tomli_w.dumps(cfg))
    with open(work / "trainer.log", "w") as log:
        rc = subprocess.run([sys.executable, str(TRAINER_DOUBLE), "@", str(work / "rl.toml")],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT).returncode
    batch = int((cfg.get("orchestrator") or {}).get("batch_size", 128))
    start = int(Path(cfg["resume"]["dir"]).name.split("_")[1]) if (cfg.get("resume") or {}).get("dir") else 0
    trained = max(0, len([s for s in rollout_steps(rec) if s > start])) * batch
    if rc == 0 and base_eval is not None:
        sys.path.insert(0, str(HERE))
        from trainer_double_current import write_eval

        write_eval(run_out(rec) / "run" / "rollouts" / "step_1" / "eval" / "all" / "traces.jsonl",
                   ev["source"], int(ev.get("num_examples", -1)), float(base_eval), step=1)
    if load_run(run_id)["status"] in TERMINAL:   # stopped meanwhile
        return 0
    if rc != 0:
        lines = [x for x in (work / "trainer.log").read_text(errors="replace").splitlines() if x.strip()]
        msg = lines[-1] if lines else f"trainer exited {rc}"
        update_run(run_id, status="FAILED", completed_at=time.time(), error_message=msg,
                   failure_analysis={"rootCause": msg, "evidence": lines[-3:], "confidence": 0.9},
                   rollouts_trained=trained)
    elif pause and not rec.get("resume_from") and int(pause) < full_steps:
        update_run(run_id, status="PAUSED", completed_at=time.time(), rollouts_trained=trained)
    else:
        update_run(run_id, status="COMPLETED", completed_at=time.time(), rollouts_trained=trained)
    return 0


# --------------------------------------------------------------------------------------------
# argument parsing (click's shape: usage errors exit 2)

class Parser(argparse.ArgumentParser):
    def error(self, message):
        err(f"Usage: {self.prog} [OPTIONS]\nTry '{self.prog} -h' for help.\n\nError: {message}")
        raise Exit(2)


TRAIN_SUBCOMMANDS = {"models", "list", "ls", "get", "progress", "rollouts", "checkpoints", "usage",
                     "stop", "run", "validate", "gpus", "request", "pause", "resume", "delete",
                     "restart", "logs", "components", "metrics", "distributions"}


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="prime", add_help=False)
    sub = p.add_subparsers(dest="cmd", parser_class=Parser)
    sub.add_parser("whoami").set_defaults(fn=cmd_whoami)
    train = sub.add_parser("train").add_subparsers(dest="sub", parser_class=Parser)
    m = train.add_parser("models")
    m.add_argument("-o", "--output", default="table")
    m.set_defaults(fn=cmd_models)
    for name in ("list", "ls"):
        ls = train.add_parser(name)
        ls.add_argument("-t", "--team")
        ls.add_argument("--mine", action="store_true")
        ls.add_argument("-n", "--num", type=int, default=20)
        ls.add_argument("-p", "--page", type=int, default=1)
        ls.add_argument("-o", "--output", default="table")
        ls.set_defaults(fn=cmd_list)
    g = train.add_parser("get")
    g.add_argument("run_id")
    g.add_argument("-o", "--output", default="table")
    g.set_defaults(fn=cmd_get)
    pr = train.add_parser("progress")
    pr.add_argument("run_id")
    pr.set_defaults(fn=cmd_progress)
    ro = train.add_parser("rollouts")
    ro.add_argument("run_id")
    ro.add_argument("-s", "--step", type=int, required=True)
    ro.add_argument("-p", "--page", type=int, default=1)
    ro.add_argument("-n", "--num", type=int, default=100)
    ro.set_defaults(fn=cmd_rollouts)
    ck = train.add_parser("checkpoints")
    ck.add_argument("run_id")
    ck.add_argument("-s", "--status")
    ck.add_argument("-o", "--output", default="table")
    ck.set_defaults(fn=cmd_checkpoints)
    us = train.add_parser("usage")
    us.add_argument("run_id")
    us.add_argument("-o", "--output", default="table")
    us.add_argument("-w", "--watch", action="store_true")
    us.add_argument("-n", "--interval", type=int, default=30)
    us.set_defaults(fn=cmd_usage)
    st = train.add_parser("stop")
    st.add_argument("run_id")
    st.add_argument("-f", "--force", action="store_true")
    st.set_defaults(fn=cmd_stop)
    run = train.add_parser("run")
    run.add_argument("config_path")
    run.add_argument("-e", "--env-var", action="append")
    run.add_argument("--env-file", action="append")
    run.add_argument("-o", "--output", default="table")
    run.add_argument("-y", "--yes", action="store_true")
    run.add_argument("--image-tag")
    run.add_argument("--gpu-type")
    run.add_argument("--volume")
    run.add_argument("--volume-size")
    run.add_argument("--sft", action="store_true")
    run.add_argument("--resume-from")
    run.set_defaults(fn=cmd_train_run)
    env = sub.add_parser("env").add_subparsers(dest="sub", parser_class=Parser)
    push = env.add_parser("push")
    push.add_argument("env_id", nargs="?")
    push.add_argument("-p", "--path")
    push.add_argument("-n", "--name")
    push.add_argument("-o", "--owner")
    push.add_argument("-t", "--team")
    push.add_argument("-v", "--visibility")
    push.add_argument("--runtime")
    push.add_argument("--auto-bump", action="store_true")
    push.add_argument("--rc", action="store_true")
    push.add_argument("--post", action="store_true")
    push.set_defaults(fn=cmd_env_push)
    es = env.add_parser("status")
    es.add_argument("env_id")
    es.add_argument("--output", default="table")   # no -o short form in 0.18.0
    es.set_defaults(fn=cmd_env_status)
    vol = sub.add_parser("volumes").add_subparsers(dest="sub", parser_class=Parser)
    vls = vol.add_parser("ls", add_help=False)
    vls.add_argument("name")
    vls.add_argument("path", nargs="?", default="/")
    vls.add_argument("-l", "--long", action="store_true")
    vls.add_argument("-R", "--recursive", action="store_true")
    vls.add_argument("-h", "--human-readable", action="store_true")
    vls.add_argument("-o", "--output", default="table")
    vls.set_defaults(fn=cmd_volumes_ls)
    vg = vol.add_parser("get")
    vg.add_argument("name")
    vg.add_argument("remote_path")
    vg.add_argument("local_dest", nargs="?", default=".")
    vg.add_argument("--direct", action="store_true")
    vg.set_defaults(fn=cmd_volumes_get)
    vl = vol.add_parser("list")
    vl.add_argument("-o", "--output", default="table")
    vl.set_defaults(fn=cmd_volumes_list)
    return p


def main(argv: list[str]) -> int:
    argv = [a for a in argv if a != "--plain"]
    if argv[:1] == ["_worker"]:
        return worker(argv[1])
    try:
        h = home()
        with open(h / "calls.jsonl", "a") as f:
            f.write(json.dumps({"argv": argv, "ts": time.time(), "pid": os.getpid()}) + "\n")
        if argv[:1] in (["--version"], ["-v"]):
            out(f"Prime CLI version: {os.environ.get('PRIME_DOUBLE_VERSION', '0.18.0')}")
            return 0
        if argv[:1] == ["train"] and (len(argv) < 2 or argv[1] not in TRAIN_SUBCOMMANDS):
            argv = ["train", "run", *argv[1:]]   # the DefaultGroup's hidden `run`
        a = parser().parse_args(argv)
        if not getattr(a, "fn", None):
            err("Usage: prime [OPTIONS] COMMAND [ARGS]...\n\nError: Missing command.")
            return 2
        a.fn(a)
        return 0
    except Exit as e:
        return e.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
