"""A test double of the `prime` CLI (PyPI `prime` 0.18.0) and of the Hosted Training platform
behind it, built from the installed CLI's source (prime_cli/commands/rl.py, api/training.py,
api/rl.py, commands/env.py, commands/volumes.py, volume_objects.py) and the contract read from it.
tests/prime_bin/prime runs it; a test puts that directory first on PATH.

The CLI half speaks the same arguments, JSON shapes, messages and exit codes as 0.18.0 for the
commands the hosted backend uses: `--version`, `whoami`; `train CONFIG` (the DefaultGroup's
hidden `run`) with -o/--yes/--volume/--volume-size/-e/--env-file/--gpu-type/--image-tag/
--resume-from; `train models|list|get|progress|rollouts|checkpoints|usage|stop|resume` (`resume`
from 0.16.0); `env push`, `env status`; `volumes ls|get|list`. Its refusals are the CLI's, in the
CLI's order: an invalid -o, a blank --resume-from, a missing or invalid TOML, the shared-LoRA
shape, a non-string image_tag/gpu_type/volume/volume_size, a --volume-size without a volume, an
unsupported secret (only WANDB_API_KEY and HF_TOKEN), the missing API key, then the CLI's local
schema check (utils/training_schema_worker.py's normalize: its deferred sources, its hosted
refusals and its `Config validation failed:` text; the check runs prime-rl's own config classes
where PRIME_DOUBLE_PRIME_RL_PYTHON names an interpreter holding them, else the extra-key check
reads the project's snapshot of those classes, which are not on an index), then no --yes on a closed
stdin ("Aborted.", rc 1). Errors go to stdout as `Error: ...` with rc 1 (volumes ls and usage
-o json: stderr); a click usage error is rc 2. `--plain` is accepted anywhere. Each behaviour
cites the 0.18.0 source it copies where it is written.

The platform half is what the CLI leaves to the server, modelled where the driver depends on it,
with a knob wherever the source leaves a fact open (the tests run each reading):
- placement: the backend, not the caller, picks reserved capacity (a cluster caching the model)
  or the on-demand pool (which downloads an uncached model); an on-demand dispatch answers its
  rate (`onDemand`, `gpuType`, `pricePerGpuHour`, `estimatedCostPerHour`, `isBeta`);
- a run goes QUEUED -> RUNNING -> COMPLETED (or FAILED, with the trainer's last error line as
  error_message and failure_analysis; or STOPPED by `train stop`; or PAUSED, see below). It
  "trains" by running the trainer double's current generation (tests/trainer_double.py) as a
  subprocess whose run directory is on the volume under runs/<runId>/ (PRIME_DOUBLE_LAYOUT);
  the volume is mounted at /volume (paths in the config starting /volume/ are the volume's);
- tasksets are installed from the Hub by `owner/name@version` (a pushed env, or a public one
  under PRIME_DOUBLE_PUBLIC_OWNERS) with the requirements the pushed wheel declared and nothing
  else: a module the env imports (or loads by id) that neither the image (the standard library,
  verifiers and what it requires), nor the run's tasksets, nor a declared requirement brings
  fails the run with ModuleNotFoundError; a bare id fails the run;
- prime-rl evaluates the weights it starts from at startup (policy v0, step_1): the trainer
  double scores v0 at its base skill, so for a `[model] name` that is a double broadcast (its
  skill in config.json) the platform double writes that eval itself, with the trainer double's
  own write_eval at the weights' skill, and runs the rest with skip_first_step;
- a run's pod has the GPUs its config asks for (rl_contract.launch.gpus_requested: its
  deployment's inference + trainer (+ teacher) GPUs, what prime-rl's launcher asks the node for):
  the trainer double sees exactly that many (CUDA_VISIBLE_DEVICES), of the type placed (the
  requested --gpu-type, else H200_141GB), written to work/<runId>/pod.json; `train get` prints
  that gpu_count ("Resolved GPU footprint (trainer + inference)", api/rl.py:57-59@0.18.0), and an
  on-demand rate is the GPU-hour price times it;
- a run's files show in `volumes ls/get` once it has ended (volumes.py: "A live ... run's
  changes appear once it ends"); `train progress` sees its steps while it runs;
- billing: an on-demand run is billed its dispatch rate from RUNNING to its end, by the second;
  what `usage` shows is PRIME_DOUBLE_USAGE's reading;
- `env push` keeps each env's content hashes (the CLI's compute_content_hash) and answers a
  second push of the same content with the CLI's "content hash ... already exists" failure.

Knobs (environment): PRIME_DOUBLE_HOME (required: the platform's state, volumes and Hub);
PRIME_DOUBLE_VERSION (0.18.0); PRIME_DOUBLE_ACCOUNT (both | on_demand | reserved);
PRIME_DOUBLE_MODELS (comma list of the models reserved clusters cache); PRIME_DOUBLE_PRICE
(on-demand $/GPU-hour, 3.5); PRIME_DOUBLE_USAGE (tokens | none | gpu_hours: what `train usage`
bills); PRIME_DOUBLE_LAYOUT (flat | run | split: where the run directory, and its checkpoints,
are inside runs/<runId>/); PRIME_DOUBLE_VOLUME_LAG=NAME_PART:S[:partial] (such a run's files
reach the volume S seconds after it ends: none of them meanwhile, or all but its checkpoints);
PRIME_DOUBLE_RESUME_FROM (config | checkpoint: how `--resume-from` combines with the config's
[resume]); PRIME_DOUBLE_USER (alice); PRIME_DOUBLE_QUEUE_S (0.2 s queued);
PRIME_DOUBLE_PAUSE=NAME_PART:K pauses, at step K, each run whose name contains NAME_PART and that
was not itself resumed (a checkpoint is saved at K, as `train pause` does, "at a checkpoint":
commands/rl.py:1818@0.18.0); PRIME_DOUBLE_PAUSE_CHECKPOINT (saved | none: whether that pause
leaves a checkpoint; the platform decides, the CLI only says "at a checkpoint". With `none`,
`train resume` runs the paused run's stored config as it is, "a new run continuing a PAUSED one
from its stored config", api/training.py:306-309@0.18.0: for a forked arm its own [resume], the
checkpoint the arm started from, else step 0 -- the arm's start, dispatched like a continuation);
PRIME_DOUBLE_RESUME_NAME (keep | new: the name `train resume` gives the new run. The CLI sends no
name on resume, only gpuType/imageTag/secrets, commands/rl.py:1882-1891@0.18.0, and the name
"lives on the platform's RFTRun row, not the TOML", api/training.py:659@0.18.0: the platform
decides; `new` is a name of its own, `run-<hex>`);
PRIME_DOUBLE_STOP_UNCONFIRMED=NAME_PART makes `train stop -f` of such a live run go through (the
PUT) without the run reaching a terminal state: the CLI's "did not reach a terminal state after
180s - it's still being torn down in the background." and "Check status with: prime train get
RUN", exit 0, no `Status:` line (commands/rl.py:1761-1796@0.18.0); the run runs (and bills) on
until a later stop that goes through;
PRIME_DOUBLE_UNRESOLVED=DIST[,DIST] makes those declared requirements of a pushed env fail to
install (no index the platform reads has them; which index it reads, the platform decides: the
CLI's own installer uses PyPI plus the env's own index, commands/env.py:2968-2981@0.18.0): the run
FAILS before it trains, pip's two ERROR lines in its failure analysis, the last as error_message;
PRIME_DOUBLE_PRIME_RL_PYTHON=PYTHON validates each submitted config with prime-rl's own config
classes (prime_rl.configs.rl.RLConfig) in that interpreter, as the CLI's schema worker does in
an env holding prime-rl-configs at the schema commit (utils/training_schema_worker.py:142-190@0.18.0);
unset, with the project's snapshot of those classes (each check is logged to
HOME/schema_checks.jsonl);
PRIME_DOUBLE_FAIL=NAME_PART:MESSAGE fails such a run with that error message before it trains;
PRIME_DOUBLE_GET_FAIL=NAME_PART makes `train get` of such a run fail (a 5xx) while it runs on;
PRIME_DOUBLE_LIST_FAIL=NAME_PART makes `train list` fail (a 5xx) once a run whose name contains
NAME_PART exists;
PRIME_DOUBLE_PUSH_UNFINALIZED=NAME_PART: the first `env push` of such an env registers its
content hash and fails at its finalize (then "already exists", never listed);
PRIME_DOUBLE_STEP_SECONDS=NAME_PART:S gives such a run's steps S seconds each (the trainer
double's DOUBLE_STEP_SECONDS, for that run alone);
PRIME_DOUBLE_CREATE_TIMEOUT=NAME_PART:1 makes `prime train` of such a run exit 1 with the CLI's
create timeout after the platform made the run; PRIME_DOUBLE_NO_COMPLETED_AT=1 leaves a run the
platform fails without completed_at (its updated_at is printed as always).
Every call is logged to HOME/calls.jsonl.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
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


def layout() -> str:
    """PRIME_DOUBLE_LAYOUT: where prime-rl's run directory lands inside runs/<runId>/ on the volume,
    which the CLI's source leaves to the platform ("outputs go under runs/<runId>/",
    commands/rl.py:1139-1155@0.18.0, api/training.py:665-670@0.18.0): `flat` puts it at
    runs/<runId>/ itself (checkpoints/step_N/ right under it, as the platform's volume docs list),
    `run` one level down, at runs/<runId>/run/ (the output dir, then the config's run.name),
    `split` R at runs/<runId>/run/ but its checkpoints/ and broadcasts/ at runs/<runId>/ (a
    checkpoint output dir of their own): the volume shows them there, and a config's /volume/
    path names them there."""
    return os.environ.get("PRIME_DOUBLE_LAYOUT", "flat")


def run_root(rec: dict) -> Path:
    """prime-rl's run directory R of a run, on its volume (as the trainer writes it)."""
    return run_out(rec) if layout() == "flat" else run_out(rec) / "run"


_APART = re.compile(r"^(runs/[^/]+)/(checkpoints|broadcasts)(/.*)?$")
_WRITTEN = re.compile(r"^(runs/[^/]+)/run/(checkpoints|broadcasts)(/.*)?$")


def shown(rel: str) -> str:
    """Where the volume shows a file the trainer wrote at `rel` (the split layout's trees apart)."""
    m = _WRITTEN.match(rel) if layout() == "split" else None
    return f"{m[1]}/{m[2]}{m[3] or ''}" if m else rel


def written(rel: str) -> str:
    """Where a path the volume shows was written (shown's inverse)."""
    m = _APART.match(rel) if layout() == "split" else None
    return f"{m[1]}/run/{m[2]}{m[3] or ''}" if m else rel


def rollout_steps(rec: dict) -> list[int]:
    """The steps whose batch shipped to the trainer (the `effective` cohort is logged at ship
    time: orchestrator.py:680-684@559b447): a spilled window after the last step, or a batch
    the zero-advantage filter emptied, trained nothing and is billed nothing."""
    steps = set()
    for p in run_root(rec).glob("rollouts/step_*/train/effective/traces.jsonl"):
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
        "volume_name": rec["volume_name"], "gpu_count": (rec.get("pod") or {}).get("gpu_count"),
        "wandb_entity": None,
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


def account() -> str:
    """PRIME_DOUBLE_ACCOUNT: `both` (reserved clusters caching PRIME_DOUBLE_MODELS, and the
    on-demand pool), `on_demand` (no reserved allocation: the common account) or `reserved` (an
    allocation, not enrolled in the on-demand beta)."""
    return os.environ.get("PRIME_DOUBLE_ACCOUNT", "both")


def price_per_gpu_hour() -> float:
    return float(os.environ.get("PRIME_DOUBLE_PRICE", "3.5"))


def reserved_models() -> list[str]:
    if account() == "on_demand":
        return []
    return [n for n in os.environ.get("PRIME_DOUBLE_MODELS",
                                      "Qwen/Qwen3-4B-Instruct-2507,Qwen/Qwen3-30B-A3B-Instruct-2507").split(",") if n]


def cmd_models(a) -> None:
    check_output(a.output)
    require_auth()
    # api/training.py:138-152@0.18.0: `models` is reserved capacity (models cached on clusters
    # the caller has an allocation on), `on_demand` the shared pool keyed by GPU type, which needs
    # no allocation (api/training.py:110-126); on_demand_beta_access is tri-state (:141-150)
    data: dict = {"available_fft_models": [{"name": n, "clusters": [{"cluster_id": "c1", "cluster_name": "double",
                                                                       "gpu_type": "H200_141GB"}]}
                                           for n in reserved_models()]}
    on_demand = [] if account() == "reserved" else [
        {"gpu_type": "H200_141GB", "price_per_gpu_hour": price_per_gpu_hour(), "discount_label": None,
         "available_now": True, "is_beta": True}]
    if on_demand:   # commands/rl.py:1342-1344@0.18.0: the key only when the list is not empty
        data["on_demand"] = on_demand
    data["on_demand_beta_access"] = account() != "reserved"   # commands/rl.py:1345-1348@0.18.0
    if a.output == "json":
        dump(data)
    elif not data["available_fft_models"] and not on_demand:
        out("No models available for Hosted Training.")   # commands/rl.py:1375@0.18.0
    else:
        for m in data["available_fft_models"]:
            out(m["name"])
        for o in on_demand:
            out(f"{o['gpu_type']}  ${o['price_per_gpu_hour']:.2f}")


def placement(model: str | None, pod: dict) -> dict:
    """Where the platform places a run (the backend derives it; the caller does not choose:
    api/training.py:53-60@0.18.0): a reserved cluster caching the model, else the on-demand pool,
    which downloads an uncached model (api/training.py:113-116@0.18.0). An on-demand run's
    dispatch answer carries its rate (api/training.py:63-69@0.18.0): the GPU-hour price times the
    pod's GPUs."""
    if model in reserved_models():
        return {"onDemand": False}
    if account() == "reserved":
        return {"refused": f"model {model} is not cached on any cluster you can dispatch to"}
    return {"onDemand": True, "gpuType": pod["gpu_type"], "pricePerGpuHour": price_per_gpu_hour(),
            "estimatedCostPerHour": round(price_per_gpu_hour() * pod["gpu_count"], 6), "isBeta": True}


def pod_for(config: dict, gpu_type: str | None) -> dict:
    """The pod a run gets: the GPUs its config's deployment asks prime-rl's launcher for
    (inference + trainer + teacher: rl_contract.launch.gpus_requested, entrypoints/rl.py:130-143
    @559b447), of the requested type, else the pool's."""
    sys.path.insert(0, str(HERE.parent))
    from rl_contract.launch import gpus_requested

    return {"gpu_count": gpus_requested(config), "gpu_type": gpu_type or "H200_141GB"}


def cmd_list(a) -> None:
    check_output(a.output)
    if a.num < 1 or a.page < 1:
        fail("Error: --num and --page must be at least 1")
    require_auth()
    recs = [json.loads(p.read_text()) for p in (home() / "runs").glob("*.json")]
    part = os.environ.get("PRIME_DOUBLE_LIST_FAIL")
    if part and any(part in (r.get("name") or "") for r in recs):
        # a 5xx on the list read (core/client.py:192-198@0.18.0 raises APIError; the command
        # prints it and exits 1): whether the platform answers is its own
        fail("Error: HTTP 503: Service Unavailable")
    recs.sort(key=lambda r: r["created_at"], reverse=True)
    page = recs[(a.page - 1) * a.num: a.page * a.num]
    if a.output == "json":
        # volume_name is "only set on the run-detail read" (api/rl.py:53-56@0.18.0)
        dump({"runs": [{**rl_run(r), "volume_name": None} for r in page], "total": len(recs), "page": a.page,
              "per_page": a.num})
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
    if os.environ.get("PRIME_DOUBLE_GET_FAIL") and os.environ["PRIME_DOUBLE_GET_FAIL"] in (rec.get("name") or ""):
        # the platform loses the run's status (a 5xx) while it runs on: core/client.py:191@0.18.0
        # words it, api/rl.py:236-237@0.18.0 passes it on, commands/rl.py:1739-1741@0.18.0 prints
        # it and exits 1
        fail("Error: HTTP 503: Service Unavailable")
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
    for p in run_root(rec).glob(f"rollouts/step_{a.step}/train/all/traces.jsonl"):
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
    for d in sorted(run_root(rec).glob("checkpoints/step_*")):
        step = int(d.name.split("_")[1])
        cks.append({"id": f"ck_{rec['id']}_{step}", "rft_run_id": rec["id"], "step": step,
                    "storage_url": f"volume://{rec['volume_name']}/{d.relative_to(volume_root(rec['volume_name']))}",
                    "status": "READY", "size_bytes": sum(f.stat().st_size for f in d.rglob("*") if f.is_file()),
                    "created_at": stamp(d.stat().st_mtime), "uploaded_at": None})
    dump({"checkpoints": cks})


def gpu_hour_bill(rec: dict) -> float:
    """What an on-demand run is billed by the hour: its rate, fixed at dispatch, from when its
    pods are ready (RUNNING here) to when it ends, prorated to the second (commands/rl.py:
    1452-1456@0.18.0, 808-811@0.18.0). A reserved run has no rate (commands/rl.py:782-784@0.18.0)."""
    rate = (rec.get("placement") or {}).get("estimatedCostPerHour")
    if not rate or not rec.get("started_at"):
        return 0.0
    end = rec.get("completed_at") or time.time()
    return round(float(rate) * max(0.0, end - rec["started_at"]) / 3600, 6)


def cmd_usage(a) -> None:
    check_output(a.output)
    if not api_key():
        fail(NO_KEY, stderr=a.output == "json")   # commands/usage.py:171-176@0.18.0
    rec = load_run(a.run_id)
    if rec is None:
        fail("Error: HTTP 404: Run not found", stderr=a.output == "json")
    # The usage view is a token view (tokens x a price per million, commands/usage.py:31-38,
    # 57-65@0.18.0; api/billing.py:10-37@0.18.0). Whether a dedicated run's GPU-hours are in it
    # the source leaves to the server: PRIME_DOUBLE_USAGE=tokens bills TOKENS_PER_ROLLOUT per
    # rollout trained, `none` bills no token (the view stays at 0 for a run billed by the hour),
    # `gpu_hours` puts the GPU-hour bill in total_cost_usd.
    mode = os.environ.get("PRIME_DOUBLE_USAGE", "tokens")
    rollouts = rec.get("rollouts_trained", 0) if mode == "tokens" else 0
    tokens = rollouts * TOKENS_PER_ROLLOUT
    cost = cost_of(rollouts)
    total = gpu_hour_bill(rec) if mode == "gpu_hours" else cost
    data = {"run_id": rec["id"], "run_name": rec.get("name"), "base_model": rl_run(rec)["base_model"],
            "status": rec["status"],
            "training": {"tokens": tokens, "input_tokens": 0, "output_tokens": 0, "cost_usd": total},
            "inference": {"tokens": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0},
            "total_tokens": tokens, "total_cost_usd": total,
            "pricing": {"training_per_mtok": TRAIN_PRICE_PER_MTOK if mode == "tokens" else None,
                        "inference_input_per_mtok": None, "inference_output_per_mtok": None},
            "record_count": len(rollout_steps(rec)) if mode == "tokens" else 0}
    if a.output == "json":
        dump(data)
    else:
        out(f"Run {rec['id']}: ${total:.4f}")


def end_workload(pgid: int) -> None:
    """A stopped run's workload ends whole: the platform tears down the run's pod, so nothing it
    started survives, not even a trainer rank that torchrun put in a session of its own
    (tests/double_launcher.py). The CLI's source says nothing of the pod (the stop is a PUT,
    commands/rl.py:1761@0.18.0), but the other reading has nothing to test: the driver never
    sees a pod's processes, only the run's status, so a survivor would be a process of this
    machine that the double ran in the pod's place, not a behaviour of the platform."""
    import psutil

    procs = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid:
                procs += [p, *p.children(recursive=True)]
        except (ProcessLookupError, psutil.Error):
            pass
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def cmd_stop(a) -> None:
    require_auth()
    if not a.force:
        out("Are you sure you want to stop run " + a.run_id + "? [y/N]: Aborted.")
        raise Exit(1)
    rec = _run_or_404(a.run_id)
    if rec["status"] not in TERMINAL and _named(os.environ.get("PRIME_DOUBLE_STOP_UNCONFIRMED"), rec.get("name")):
        _stop_unconfirmed(rec)
        return
    # commands/rl.py:1761@0.18.0: PUT /rft/runs/{id}/stop answers the run; its follow-up reads
    # (:1769-1787) give up quietly when `get` fails, so the answer to the PUT is what is printed
    if rec["status"] not in TERMINAL:
        with Locked():
            rec = load_run(a.run_id)
            if rec["status"] not in TERMINAL:
                pgid = rec.get("worker_pgid")
                if pgid:
                    end_workload(pgid)
                rec.update(status="STOPPED", completed_at=time.time(),
                           rollouts_trained=len(rollout_steps(rec)) * int(rl_run(rec)["batch_size"] or 0))
                save_run(rec)
    rec = load_run(a.run_id)
    if rec["status"] == "STOPPED":   # commands/rl.py:1798-1806@0.18.0
        out(f"✓ Run {a.run_id} stopped successfully")
        out("Status: STOPPED")
    else:
        out(f"Run {a.run_id} reached a terminal state before the stop completed - it was not actively stopped.")
        out(f"Status: {rec['status']}")


def _named(part: str | None, name: str | None) -> bool:
    """A NAME_PART knob that names this run."""
    return bool(part and name and part in name)


def _stop_unconfirmed(rec: dict) -> None:
    """PRIME_DOUBLE_STOP_UNCONFIRMED: the stop's PUT went through, but the run had not reached a
    terminal state when the CLI's follow-up reads ended (its 180 s, or the first that failed:
    commands/rl.py:1761-1786@0.18.0). The CLI says so and exits 0 with no `Status:` line
    (:1788-1796). How long the teardown takes the platform decides: here the run runs, and bills,
    on until a stop goes through."""
    update_run(rec["id"], stop_requested_at=time.time())
    out(f"Run {rec['id']} did not reach a terminal state after 180s - it's still being torn down in the background.")
    out(f"Check status with: prime train get {rec['id']}")


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


def local_check(config: dict) -> str | None:
    """The CLI's local schema check of a dedicated RL config (utils/training_schema_worker.py
    normalize, :142-190@0.18.0), run by `prime train` before it asks to launch
    (commands/rl.py:679-699@0.18.0): its message, or None. The CLI runs it with prime-rl's own
    config classes, in an env holding prime-rl-configs at the schema commit; the double does the
    same where PRIME_DOUBLE_PRIME_RL_PYTHON names an interpreter that imports them (prime-rl's
    test env at 559b447: tools/prime_rl_testenv.py), and reads the project's snapshot of them
    where none is named or it cannot import them (prime-rl-configs is not on an index). Each
    check is logged to HOME/schema_checks.jsonl with what it ran on."""
    python = os.environ.get("PRIME_DOUBLE_PRIME_RL_PYTHON")
    answer = prime_rl_check(config, python) if python else {"by": "snapshot", "why": "no interpreter named"}
    if answer["by"] == "snapshot":
        answer["error"] = snapshot_check(config)
    with open(home() / "schema_checks.jsonl", "a") as f:
        f.write(json.dumps({"name": config.get("name"), **answer}) + "\n")
    return answer["error"]


def prime_rl_check(config: dict, python: str) -> dict:
    """The check run by prime-rl's own classes in `python` (this file's _prime_rl_check), as
    {"by": "prime-rl", "error": message or None}; {"by": "snapshot", "why": ...} where that
    interpreter cannot import them."""
    data = {k: v for k, v in config.items() if k != "name"}   # commands/rl.py:519-520@0.18.0
    try:
        r = subprocess.run([python, str(Path(__file__).resolve()), "_prime_rl_check"], input=json.dumps(data),
                           capture_output=True, text=True, timeout=120)
        answer = json.loads(r.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        return {"by": "snapshot", "why": f"{python}: {e}"}
    if r.returncode != 0 or "error" not in answer:
        return {"by": "snapshot", "why": f"{python}: {answer.get('unavailable') or r.stderr[-300:]}"}
    return {"by": "prime-rl", "error": answer["error"], "configs": answer.get("configs")}


def _prime_rl_check() -> int:
    """Run in prime-rl's interpreter: the schema worker's normalize on the config read from
    stdin (utils/training_schema_worker.py:142-190@0.18.0), printed as {"error": ...}: [k8s]
    refused (:144-148); the sources and the eval block deferred (:9-16); RLConfig's own
    validation, its errors as format_errors words them (:101-104); the hosted refusals, read off
    the validated config (:107-127); then the eval block without its sources, only its own
    errors counted (:53-98)."""
    try:
        from prime_rl.configs.rl import RLConfig
        from pydantic import ValidationError
    except ImportError as e:
        print(json.dumps({"unavailable": f"cannot import prime-rl's config classes: {e}"}))
        return 1
    import prime_rl.configs

    data = json.load(sys.stdin)

    def said(error: str | None) -> int:
        print(json.dumps({"error": error, "configs": prime_rl.configs.__file__}))
        return 0

    def worded(errors: list[dict]) -> str:
        return "Config validation failed:\n" + "\n".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                                         for e in errors)

    if data.pop("k8s", None):
        return said("[k8s] is not supported for hosted runs: Platform manages deployment settings. "
                    "Remove the [k8s] table.")
    orch = data.get("orchestrator") or {}
    deferred = {}
    if isinstance(orch.get("train"), dict) and "source" in orch["train"]:
        deferred["train_source"] = orch["train"].pop("source")
    if "eval" in orch:
        deferred["eval"] = orch.pop("eval")
    if (data.get("deployment") or {}).get("type") == "multi_node" and "slurm" not in data:
        data["slurm"] = {}   # :158-160: schema launchers provide SLURM settings
    try:
        cfg = RLConfig.model_validate(data)
    except ValidationError as e:
        return said(worded(e.errors(include_input=False)))
    except Exception as e:   # main's handler (:204-210): any other failure is its own words
        return said(str(e))
    if cfg.clean:
        return said("clean = true is unsupported for hosted runs: start a new run instead.")
    if getattr(getattr(cfg.inference, "deployment", None), "type", None) == "disaggregated":
        return said('inference.deployment type = "disaggregated" is unsupported for hosted runs.')
    trainer_only = cfg.deployment.type == "single_node" and (cfg.inference is None or cfg.deployment.num_infer_gpus == 0)
    if trainer_only and getattr(getattr(cfg.trainer, "data", None), "fake", None) is None:
        return said("Hosted RL runs need inference GPUs: set deployment.num_infer_gpus and an "
                    "[inference] table, or use fake trainer data (trainer.data.fake) for a "
                    "trainer-only run.")
    if "eval" in deferred:
        probe = json.loads(json.dumps(data))
        probe.setdefault("orchestrator", {})["eval"] = {k: v for k, v in deferred["eval"].items() if k != "source"}
        try:
            RLConfig.model_validate(probe)
        except ValidationError as e:
            def own(loc: tuple) -> bool:   # deferred_block_error (:92-98)
                return loc[:2] == ("orchestrator", "eval") and len(loc) > 2 and loc[2] != "source"
            mine = [x for x in e.errors(include_input=False)
                    if own(tuple(x["loc"])) or (tuple(x["loc"]) == ("orchestrator", "eval")
                                                and x["type"] not in ("value_error", "assertion_error"))]
            if mine:
                return said(worded(mine))
        except Exception:
            pass   # :78-79: a validator that needs the sources says nothing here
    return said(None)


def snapshot_check(config: dict) -> str | None:
    """local_check on the project's snapshot of prime-rl's config classes: the order, what is
    deferred and every message are the schema worker's; its validators (resume.dir naming a
    step_N, the deployment's GPU total) are not in it."""
    sys.path.insert(0, str(HERE.parent))
    from driver.dialects import current_schema

    data = json.loads(json.dumps({k: v for k, v in config.items() if k != "name"}))   # rl.py:519-520
    if data.pop("k8s", None):   # training_schema_worker.py:144-148
        return ("[k8s] is not supported for hosted runs: Platform manages deployment settings. "
                "Remove the [k8s] table.")
    orch = data.get("orchestrator") or {}
    deferred = {}   # defer_environments (:9-16): the sources need env plugins, checked on submission
    if isinstance(orch.get("train"), dict) and "source" in orch["train"]:
        deferred["train_source"] = orch["train"].pop("source")
    if "eval" in orch:
        deferred["eval"] = orch.pop("eval")
    errors = [(k.split(" (")[0], "Extra inputs are not permitted") for k in current_schema.unknown_keys(data)]
    errors += [(k, "Field required") for k in ("trainer", "orchestrator") if k not in data]   # rl.py:230-232@559b447
    if errors:   # format_errors (:101-104)
        return "Config validation failed:\n" + "\n".join(f"{loc}: {msg}" for loc, msg in errors)
    # reject_unsupported_hosted_settings (:107-127)
    if data.get("clean"):
        return "clean = true is unsupported for hosted runs: start a new run instead."
    deployment = data.get("deployment") or {}
    inference = data.get("inference")
    if ((inference or {}).get("deployment") or {}).get("type") == "disaggregated":
        return 'inference.deployment type = "disaggregated" is unsupported for hosted runs.'
    single = deployment.get("type", "single_node") == "single_node"   # rl.py:294@559b447
    if single and (inference is None or deployment.get("num_infer_gpus", 1) == 0) \
            and ((data.get("trainer") or {}).get("data") or {}).get("fake") is None:
        return ("Hosted RL runs need inference GPUs: set deployment.num_infer_gpus and an "
                "[inference] table, or use fake trainer data (trainer.data.fake) for a "
                "trainer-only run.")
    if "eval" in deferred:   # check_deferred_settings (:53-98): the eval block minus its sources
        ev = {k: v for k, v in deferred["eval"].items() if k != "source"}
        bad = current_schema.unknown_keys({"orchestrator": {"eval": ev}})
        if bad:
            return "Config validation failed:\n" + "\n".join(f"{k.split(' (')[0]}: Extra inputs are not permitted"
                                                             for k in bad)
    return None


def _confirm(prompt: str, yes: bool) -> None:
    """utils/prompt.py confirm_or_skip: a prompt on stdout; a closed stdin aborts."""
    if yes:
        return
    out(f"{prompt} [Y/n]: ")
    answer = sys.stdin.readline() if sys.stdin else ""
    if not answer:
        out("Aborted.")
        raise Exit(1)
    if answer.strip().lower().startswith("n"):
        out("\nRun cancelled")   # commands/rl.py:740-742@0.18.0
        raise Exit(0)


def _dispatch(rec: dict, output: str) -> None:
    """Create the run's record, start its worker, print the dispatch answer as
    commands/rl.py _report_dispatch (:772-816@0.18.0) does."""
    run_id = rec["id"]
    save_run(rec)
    work = home() / "work" / run_id
    work.mkdir(parents=True, exist_ok=True)
    with open(work / "worker.log", "w") as log:
        subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "_worker", run_id],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                         start_new_session=True)
    placed = rec["placement"]
    if _knob("PRIME_DOUBLE_CREATE_TIMEOUT", rec.get("name")):
        # the create POST outlived its 120-s read timeout after the platform made the run
        # (prime_cli/api/training.py:28, core/client.py:192-198, commands/rl.py:757-768@0.18.0)
        fail("Error: Request timed out: ReadTimeout")
    if output == "json":
        run_json: dict = {"runId": run_id}
        if placed.get("onDemand"):   # :783-791: the rate only on the billed path
            run_json.update({k: placed[k] for k in ("onDemand", "gpuType", "pricePerGpuHour",
                                                    "estimatedCostPerHour", "isBeta")})
        dump({"run": run_json})
        return
    out(f"Dispatched hosted run {run_id}")
    if placed.get("onDemand"):   # :797-811
        out(f"On-demand (beta) {placed['gpuType']} · ${placed['pricePerGpuHour']:.2f}/GPU-hr"
            f" · ~${placed['estimatedCostPerHour']:.2f}/hr")
        out("Billing starts when the pods are ready, not now, and stops when the run ends.")
    out("")
    out("Monitor run at:")
    out(f"  https://app.primeintellect.ai/dashboard/training/{run_id}")


def _new_id() -> str:
    n = len(list((home() / "runs").glob("*.json"))) + 1
    return f"run_{n:04d}{hashlib.sha256(str(time.time()).encode()).hexdigest()[:6]}"


def cmd_train_run(a) -> None:
    check_output(a.output)
    if a.resume_from is not None and not a.resume_from.strip():
        fail("Error: --resume-from needs the ID of a PAUSED run.")   # commands/rl.py:1254-1256@0.18.0
    path = Path(a.config_path)
    if not path.exists():
        fail(f"Error: Config file not found: {a.config_path}")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        fail(f"Error: Invalid TOML in {a.config_path}: {e}")
    if isinstance(raw.get("model"), str) or isinstance(raw.get("env"), list):   # :1260-1267
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
    require_auth()   # APIClient() (:663) before the check
    problem = local_check(config)   # :679-699: the local check, then "Error: <message>", exit 1
    if problem:
        fail(f"Error: {problem}")
    if a.output != "json":
        out("✓ Run config validation succeeded")   # :702-703
    _confirm("Launch this Hosted Training run?", a.yes)
    with Locked():
        if a.resume_from:
            # the platform attaches the paused run's volume and checks a given one against it
            # (commands/rl.py:748-750@0.18.0, api/training.py:702-703@0.18.0); its refusal is an
            # APIError printed with the tip of :760-766
            source = load_run(a.resume_from)
            if source is None or source["status"] != "PAUSED" or (volume and volume != source["volume_name"]):
                out("Error: HTTP 404: Run not found" if source is None else
                    f"Error: HTTP 409: Run {a.resume_from} is not PAUSED" if source["status"] != "PAUSED" else
                    f"Error: HTTP 400: --volume must name the paused run's volume ({source['volume_name']})")
                out(f"Tip: a run resumes once `prime train get {a.resume_from}` shows PAUSED")
                raise Exit(1)
            volume = source["volume_name"]
        pod = pod_for(config, a.gpu_type or raw.get("gpu_type"))
        placed = placement(((config.get("model") or {}).get("name")), pod)
        if placed.get("refused"):
            fail(f"Error: HTTP 409: {placed['refused']}")   # create_run's APIError, :760-762
        if not volume:
            volume = "_pvc"   # a per-run PVC: its outputs are not readable with `prime volumes`
        elif not volume_root(volume).exists():
            # _ensure_volume (:819-890): progress on stderr for -o json
            (err if a.output == "json" else out)(f"Volume '{volume}' doesn't exist, creating it ({a.volume_size or '5Ti'})...")
            volume_root(volume).mkdir(parents=True)
        rec = {"id": _new_id(), "name": name, "status": "QUEUED", "config": config, "volume_name": volume,
               "created_at": time.time(), "resume_from": a.resume_from, "secrets": sorted(secrets),
               "config_path": str(path.resolve()), "placement": placed, "pod": pod}
        _dispatch(rec, a.output)


def cmd_train_resume(a) -> None:
    """`prime train resume RUN` (commands/rl.py:1841-1909@0.18.0; absent before 0.16.0): a new
    run continuing a PAUSED one from its checkpoint, with the paused run's config, volume, image
    and GPU type (:1872); secrets passed again. POST /training/runs/{id}/resume
    (api/training.py:306-314@0.18.0)."""
    check_output(a.output)
    secrets = _collect_secrets(a.env_var or [], a.env_file or [])
    require_auth()
    _confirm(f"Resume run {a.run_id} as a new Hosted Training run?", a.yes)
    with Locked():
        source = load_run(a.run_id)
        if source is None:
            fail("Error: HTTP 404: Run not found")   # :1905-1907
        if source["status"] != "PAUSED":
            fail(f"Error: HTTP 409: Run {a.run_id} is not PAUSED")
        rec = {"id": _new_id(), "name": resumed_name(source), "status": "QUEUED", "config": source["config"],
               "volume_name": source["volume_name"], "created_at": time.time(),
               "resume_from": a.run_id, "resumed_by": "resume", "secrets": sorted(secrets),
               "config_path": source.get("config_path"), "placement": source["placement"],
               "pod": source.get("pod")}
        _dispatch(rec, a.output)


def resumed_name(source: dict) -> str | None:
    """The name the platform gives a paused run's continuation (PRIME_DOUBLE_RESUME_NAME). The
    resume request carries none (commands/rl.py:1882-1891@0.18.0) and a run's name is the
    platform's row, not its config (api/training.py:659@0.18.0): `keep` copies the paused run's,
    `new` is one of the platform's own."""
    if os.environ.get("PRIME_DOUBLE_RESUME_NAME", "keep") == "new":
        return "run-" + hashlib.sha256(f"{source['id']}{time.time()}".encode()).hexdigest()[:8]
    return source.get("name")


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


def hub_files(owner: str, name: str, version: str) -> Path:
    """A pushed version's wheel content (its package's files), as the Hub keeps it."""
    return home() / "hub" / owner / f"{name}@{version}"


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
    if a.auto_bump or a.post:
        # commands/env.py:877-907@0.18.0: the bumped version is written into pyproject.toml
        # before the build (bump_version: patch + 1; bump_post_version: .postN -> .postN+1, else .post0)
        old = project.get("version")
        m = re.match(r"^(?P<base>.*?)(?:\.post|post)(?P<num>\d+)$", old or "")
        new = ((f"{m['base']}.post{int(m['num']) + 1}" if m else re.sub(r"([+-].*)$", "", old) + ".post0")
               if a.post else ".".join([*old.split(".")[:2], str(int(old.split(".")[2]) + 1)]))
        out(f"Auto-bumping version: {old} → {new}")
        text = (env_path / "pyproject.toml").read_text()
        (env_path / "pyproject.toml").write_text(
            re.sub(r'(\s*)version\s*=\s*["\'][^"\']*["\']', rf'\1version = "{new}"', text, flags=re.M))
        out("✓ Updated version in pyproject.toml")
        project["version"] = new
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
        if any(v["content_hash"] == digest for v in rec["versions"]) or digest in rec.get("unfinalized", []):
            out("Failed to prepare wheel upload: HTTP 409: Wheel with this content hash already "
                "exists for this environment")
            out("Tip: If you've made changes to your environment, ensure the content has actually changed.")
            out("The content hash is based on your source files (*.py, pyproject.toml, README.md).")
            out("Alternatively, use the --auto-bump flag to push a new version without content changes")
            out("Upload failed: 1")
            out("Unexpected error: 1")
            raise Exit(1)
        out("Uploading wheel ...")
        if _knob("PRIME_DOUBLE_PUSH_UNFINALIZED", env_name) is not None and not rec.get("unfinalized"):
            # the wheel is registered under its content hash (POST .../wheels), then its
            # finalize fails (commands/env.py:1150-1195@0.18.0): the version is never listed nor
            # installable, and a retry of the same content is refused as "already exists"
            rec.setdefault("unfinalized", []).append(digest)
            rec_path.parent.mkdir(parents=True, exist_ok=True)
            write_json(rec_path, rec)
            out("Failed to finalize wheel upload: HTTP 500: Internal Server Error")
            raise Exit(1)
        runtime = a.runtime or "v0"
        out(f"Publishing as {'verifiers v1' if runtime == 'v1' else 'legacy verifiers v0'} "
            f"({'from --runtime' if a.runtime else 'from the verifiers requirement'})")
        rec["versions"].append({"semantic_version": version, "content_hash": digest,
                                "created_at": datetime.now(timezone.utc).isoformat(), "runtime": runtime,
                                "dependencies": project.get("dependencies", []),
                                # commands/env.py:1112-1113@0.18.0: the wheel's Requires-Dist,
                                # which hatchling writes from a static [project] dependencies
                                "requires_dist": list(project.get("dependencies", []))})
        files = hub_files(owner, env_name, version)
        shutil.rmtree(files, ignore_errors=True)
        for src in env_path.rglob("*.py"):   # the wheel's modules
            rel = src.relative_to(env_path)
            if not any(part.startswith(".") or part in ("dist", "build", "__pycache__") for part in rel.parts):
                (files / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, files / rel)
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
    """A live run's files show once it ends (and, with PRIME_DOUBLE_VOLUME_LAG, some time after)."""
    parts = rel.split("/")
    if len(parts) >= 2 and parts[0] == "runs" and parts[1]:
        if parts[1] == ".sessions":
            return True
        rec = load_run(parts[1])
        return rec is not None and (rec["status"] not in TERMINAL or _lagging(rec, rel))
    return False


def _lagging(rec: dict, rel: str) -> bool:
    """PRIME_DOUBLE_VOLUME_LAG=NAME_PART:S[:partial]: an ended run's files reach the volume S
    seconds after its end, all of them (its prefix is then "No such file or directory", exit 1)
    or, with `partial`, all but its checkpoints and broadcasts. The CLI promises a run's changes
    only "once it ends" (commands/volumes.py:1297@0.18.0); how long the sync trails the status
    flip is the platform's."""
    spec = _knob("PRIME_DOUBLE_VOLUME_LAG", rec.get("name"))
    if not spec:
        return False
    seconds, _, how = spec.partition(":")
    ended = rec.get("completed_at") or rec.get("updated_at") or 0
    if time.time() >= float(ended) + float(seconds):
        return False
    return how != "partial" or bool(re.search(r"/(checkpoints|broadcasts)(/|$)", rel))


def _entries(volume: str, rel: str, recursive: bool) -> list[dict]:
    root = volume_root(volume)
    base = rel.rstrip("/")
    target = root / written(base) if base else root
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
        r = shown(p.relative_to(root).as_posix())
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
    src = volume_root(a.name) / written(base) if base else volume_root(a.name)
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
        if p.is_file() and not _hidden(a.name, shown(p.relative_to(volume_root(a.name)).as_posix())):
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
    return str(volume_root(volume) / written(value.removeprefix("/volume/"))) if value.startswith("/volume/") else value


def _hub_id(tid: str) -> tuple[str, str, str] | None:
    if "/" not in tid:
        return None
    owner, rest = tid.split("/", 1)
    name, _, version = rest.partition("@")
    return owner, name, version


def _public(owner: str) -> bool:
    return owner in os.environ.get("PRIME_DOUBLE_PUBLIC_OWNERS", "primeintellect").split(",")


def _module_of(dist: str) -> str:
    return re.sub(r"[-_.]+", "_", dist).lower()


def _image_modules() -> set[str]:
    """What the run's image brings: the standard library, verifiers and everything it requires
    (prime-rl installs its envs beside them)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    seen: set[str] = set()
    todo = ["verifiers"]
    while todo:
        name = _module_of(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [Requirement(r).name for r in reqs if "extra ==" not in r]
    # each of those distributions' top-level modules, as packages_distributions() maps them (its
    # top_level.txt, else the first part of each .py file it lists), read from those alone
    mods = set(sys.stdlib_module_names) | seen
    for name in seen:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        declared = (dist.read_text("top_level.txt") or "").split()
        mods.update(declared or {f.parts[0] if len(f.parts) > 1 else f.with_suffix("").name
                                 for f in dist.files or () if f.suffix == ".py"})
    return mods


def _imports(src: Path) -> set[str]:
    """The top-level modules a package's files import when it loads: its import statements, and
    the env ids its module-level code hands to verifiers' loaders (a generated env loads the hub
    env it mirrors by id: taskset_class(ID), load_environment(ID)), which import that module."""
    import ast

    found: set[str] = set()
    for f in src.rglob("*.py"):
        tree = ast.parse(f.read_text())
        consts = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                  and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
                  for t in n.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
            elif isinstance(node, ast.Call) and node.args:
                fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                arg = node.args[0]
                value = arg.value if isinstance(arg, ast.Constant) else consts.get(getattr(arg, "id", ""))
                if fn in ("taskset_class", "taskset_config_type", "load_environment") and isinstance(value, str):
                    found.add(_module_of(value.split("/")[-1].split("@")[0]))
    return found


def unresolved_problem(sources: list[dict]) -> list[str] | None:
    """PRIME_DOUBLE_UNRESOLVED: pip's answer when a requirement a pushed taskset declared is on
    no index the platform installs from (its two ERROR lines), or None. Which index that is the
    platform decides; the CLI's own installer reads PyPI plus the env's own index
    (commands/env.py:2968-2981@0.18.0), and a bare distribution name resolves only where one of
    them has it."""
    from packaging.requirements import Requirement

    missing = {_module_of(n) for n in os.environ.get("PRIME_DOUBLE_UNRESOLVED", "").split(",") if n.strip()}
    if not missing:
        return None
    for s in sources:
        parts = _hub_id(str(((s.get("env") or {}).get("taskset") or {}).get("id")))
        if parts is None or _public(parts[0]) or not hub_record(parts[0], parts[1]).exists():
            continue   # install_problem says why such a taskset cannot be installed
        versions = [v for v in json.loads(hub_record(parts[0], parts[1]).read_text())["versions"]
                    if not parts[2] or v["semantic_version"] == parts[2]]
        for req in (versions[-1].get("requires_dist") or []) if versions else []:
            if _module_of(Requirement(req).name) in missing:
                return [f"ERROR: Could not find a version that satisfies the requirement {req} (from versions: none)",
                        f"ERROR: No matching distribution found for {req}"]
    return None


def install_problem(sources: list[dict]) -> str | None:
    """Why the platform could not install and load a run's tasksets, or None. Each taskset is
    installed from the Environments Hub by its id, with the requirements its wheel declared
    (`env push` sends the wheel's Requires-Dist as the env's dependencies: commands/env.py:
    1112-1113, 1141@0.18.0) and nothing else; then prime-rl imports it. A module it imports
    that neither the image, nor it, nor a declared requirement brings fails the run as the
    import does."""
    tids = [str(((s.get("env") or {}).get("taskset") or {}).get("id")) for s in sources]
    provided: set[str] = set()
    pushed: list[tuple[str, Path]] = []
    for tid in tids:
        parts = _hub_id(tid)
        if parts is None:
            return f"taskset {tid!r} is not an Environments Hub id (owner/name[@version])"
        owner, name, version = parts
        provided.add(_module_of(name))
        if _public(owner):
            continue
        p = hub_record(owner, name)
        if not p.exists():
            return f"environment {owner}/{name} not found on the Environments Hub"
        versions = [v for v in json.loads(p.read_text())["versions"] if not version or v["semantic_version"] == version]
        if not versions:
            return f"environment {owner}/{name} has no version {version}"
        from packaging.requirements import Requirement

        provided |= {_module_of(Requirement(r).name) for r in versions[-1].get("requires_dist") or []}
        pushed.append((name, hub_files(owner, name, versions[-1]["semantic_version"])))
    image = _image_modules()
    for name, src in pushed:
        for mod in sorted(_imports(src)):
            if mod not in image and mod not in provided:
                return f"ModuleNotFoundError: No module named '{mod}' (loading taskset {name})"
    return None


def pod_env(rec: dict, work: Path) -> dict:
    """What the run's pod shows the trainer: exactly its GPUs (CUDA_VISIBLE_DEVICES, which
    prime-rl's launcher counts: utils/process.py:36-43@559b447), never the host's; the pod is
    written to work/<runId>/pod.json."""
    pod = rec.get("pod") or {"gpu_count": 2, "gpu_type": "H200_141GB"}
    visible = ",".join(str(i) for i in range(int(pod["gpu_count"])))
    write_json(work / "pod.json", {**pod, "CUDA_VISIBLE_DEVICES": visible})
    return {"CUDA_VISIBLE_DEVICES": visible}


def worker(run_id: str) -> int:
    import tomli_w

    rec = load_run(run_id)
    time.sleep(float(os.environ.get("PRIME_DOUBLE_QUEUE_S", "0.2")))
    rec = update_run(run_id, status="RUNNING", started_at=time.time(), worker_pgid=os.getpgid(0))
    cfg = json.loads(json.dumps(rec["config"]))
    volume = rec["volume_name"]
    cfg.pop("name", None)
    R = run_root(rec)
    cfg["output_dir"], cfg.setdefault("run", {})["name"] = str(R.parent), R.name
    R.mkdir(parents=True, exist_ok=True)
    if (cfg.get("resume") or {}).get("dir"):
        cfg["resume"]["dir"] = _mounted(cfg["resume"]["dir"], volume)
    model = (cfg.get("model") or {}).get("name")
    if isinstance(model, str) and model.startswith("/volume/"):
        cfg["model"]["name"] = _mounted(model, volume)
    if rec.get("resume_from"):
        src = load_run(rec["resume_from"])
        ckpts = sorted(run_root(src).glob("checkpoints/step_*"), key=lambda p: int(p.name.split("_")[1]))
        # `prime train resume` continues the paused run from its checkpoint with its stored
        # config (commands/rl.py:1868-1872@0.18.0). How the platform combines `--resume-from`
        # with the submitted config's own [resume] the source leaves open (api/training.py:
        # 702-703@0.18.0: "a PAUSED run to continue from"): PRIME_DOUBLE_RESUME_FROM=checkpoint
        # continues from the paused run's last checkpoint whatever the config says, `config`
        # runs the submitted config as it is (its [resume], or none) on the paused run's volume.
        # A paused run that left no checkpoint (PRIME_DOUBLE_PAUSE_CHECKPOINT=none) has nothing to
        # continue from: its stored config runs as it is ("from its stored config",
        # api/training.py:306-309@0.18.0), from wherever that config starts.
        if ckpts and (rec.get("resumed_by") == "resume"
                      or os.environ.get("PRIME_DOUBLE_RESUME_FROM", "config") == "checkpoint"):
            cfg["resume"] = {"dir": str(ckpts[-1])}
    failing = _knob("PRIME_DOUBLE_FAIL", rec.get("name"))
    orch = cfg.get("orchestrator") or {}
    problem = unresolved_problem((orch.get("train") or {}).get("source", []) + (orch.get("eval") or {}).get("source", []))
    if problem:   # pip's own two lines: the last is the error message, both are the evidence
        update_run(run_id, status="FAILED", error_message=problem[-1], completed_at=time.time(),
                   failure_analysis={"rootCause": problem[-1], "evidence": problem, "confidence": 0.9},
                   rollouts_trained=0)
        return 0
    problem = install_problem((orch.get("train") or {}).get("source", []) + (orch.get("eval") or {}).get("source", []))
    if failing or problem:
        msg = failing or problem
        # whether the platform stamps completed_at on a run it fails is not settled by the CLI
        # (RLRun.completed_at is Optional, prime_cli/api/rl.py:70-75@0.18.0; `train get` always prints
        # updated_at, :75): PRIME_DOUBLE_NO_COMPLETED_AT=1 leaves it unset, as a ledger must survive
        update_run(run_id, status="FAILED", error_message=msg,
                   completed_at=None if os.environ.get("PRIME_DOUBLE_NO_COMPLETED_AT") == "1" else time.time(),
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
    env = {**os.environ, **pod_env(rec, work)}
    step_s = _knob("PRIME_DOUBLE_STEP_SECONDS", rec.get("name"))
    if step_s is not None:
        env["DOUBLE_STEP_SECONDS"] = step_s
    if os.environ.get("PRIME_DOUBLE_GET_FAIL") and os.environ["PRIME_DOUBLE_GET_FAIL"] in (rec.get("name") or ""):
        # a lost run runs on (and bills) until it is stopped: it hangs at its first step, the one
        # after the checkpoint it resumes from (a forked arm's first step is not step 1)
        first = int(Path(cfg["resume"]["dir"]).name.split("_")[1]) + 1 if (cfg.get("resume") or {}).get("dir") else 1
        env["DOUBLE_HANG_AT_STEP"] = str(first)
    with open(work / "trainer.log", "w") as log:
        rc = subprocess.run([sys.executable, str(TRAINER_DOUBLE), "@", str(work / "rl.toml")], env=env,
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT).returncode
    batch = int((cfg.get("orchestrator") or {}).get("batch_size", 128))
    start = int(Path(cfg["resume"]["dir"]).name.split("_")[1]) if (cfg.get("resume") or {}).get("dir") else 0
    trained = max(0, len([s for s in rollout_steps(rec) if s > start])) * batch
    if rc == 0 and base_eval is not None:
        sys.path.insert(0, str(HERE))
        from trainer_double_current import write_eval

        write_eval(R / "rollouts" / "step_1" / "eval" / "all" / "traces.jsonl",
                   ev["source"], int(ev.get("num_examples", -1)), float(base_eval), step=1)
    if load_run(run_id)["status"] in TERMINAL:   # stopped meanwhile
        return 0
    done = {"completed_at": time.time(), "rollouts_trained": trained, "start_step": start}
    if rc != 0:
        lines = [x for x in (work / "trainer.log").read_text(errors="replace").splitlines() if x.strip()]
        msg = lines[-1] if lines else f"trainer exited {rc}"
        update_run(run_id, status="FAILED", error_message=msg,
                   failure_analysis={"rootCause": msg, "evidence": lines[-3:], "confidence": 0.9}, **done)
    elif pause and not rec.get("resume_from") and int(pause) < full_steps:
        if os.environ.get("PRIME_DOUBLE_PAUSE_CHECKPOINT", "saved") == "none":
            shutil.rmtree(R / "checkpoints", ignore_errors=True)   # paused with no checkpoint of its own
        update_run(run_id, status="PAUSED", **done)
    else:
        update_run(run_id, status="COMPLETED", **done)
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
    rs = train.add_parser("resume")
    rs.add_argument("run_id")
    rs.add_argument("-e", "--env-var", action="append")
    rs.add_argument("--env-file", action="append")
    rs.add_argument("--gpu-type")
    rs.add_argument("--image-tag")
    rs.add_argument("-o", "--output", default="table")
    rs.add_argument("-y", "--yes", action="store_true")
    rs.set_defaults(fn=cmd_train_resume)
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


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def main(argv: list[str]) -> int:
    argv = [a for a in argv if a != "--plain"]
    if argv[:1] == ["_worker"]:
        return worker(argv[1])
    if argv[:1] == ["_prime_rl_check"]:   # run by local_check in prime-rl's interpreter
        return _prime_rl_check()
    try:
        h = home()
        with open(h / "calls.jsonl", "a") as f:
            f.write(json.dumps({"argv": argv, "ts": time.time(), "pid": os.getpid()}) + "\n")
        if argv[:1] in (["--version"], ["-v"]):
            out(f"Prime CLI version: {os.environ.get('PRIME_DOUBLE_VERSION', '0.18.0')}")
            return 0
        subcommands = set(TRAIN_SUBCOMMANDS)
        if _version_tuple(os.environ.get("PRIME_DOUBLE_VERSION", "0.18.0")) < (0, 16, 0):
            subcommands.discard("resume")   # `train resume` arrived in 0.16.0 (commands/rl.py:1667@0.16.0; none in 0.15.0)
        if argv[:1] == ["train"] and (len(argv) < 2 or argv[1] not in subcommands):
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
