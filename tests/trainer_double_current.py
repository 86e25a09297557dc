"""The current-generation half of the trainer double (prime-rl v0.8.1.dev67 = 559b447): `rl` and
`evals`, as trainer_double.py dispatches them, each behaviour as rl_contract/current.py states it
(the lines of prime-rl it copies are cited there and here).

`rl @ a.toml ... --flags`: prime-rl's composition; [trainer] and [orchestrator] required; the
schema snapshot's closed tables (classic keys are rejected as prime-rl rejects them); one run
dir R = output_dir/run.name (an unset name gets a random suffix per launch, as prime-rl's does);
a fresh launch into a used R fails with FileExistsError; `[resume] step` (own R) or `dir`
(another run's checkpoints/step_F) needs both checkpoint halves, refuses train-source names that
differ (as a set), and hangs at max_steps <= F as the real trainer does; resuming deletes
rollouts and broadcasts past F. Steps run F+1 .. max_steps; every arriving episode is appended
to R/rollouts/step_N/train/all/traces.jsonl under the step still collecting, the shipped batch to
`effective`; a group's episodes share a group id. The zero-advantage filter is on by default: a
batch with no group whose rewards differ is empty, does not advance the step, and ten in a row
abort the run. DOUBLE_TRAIN_ERRORED=1 makes every train episode errored (ok = false, no traces):
no group has a trainable survivor, and ten batch equivalents of them abort the run on prime-rl's
second rule (train_sink.py:28,309-338). After the final ship, late episodes spill into
step_{max+1}/train/all (DOUBLE_SPILL_GROUPS, default 1: how many is timing, not settled by the source;
prime-rl's own orchestrator, run in tests/test_prime_rl_real_*, wrote some on one machine and
none on another). With the filesystem
broadcast, R/broadcasts/step_N holds a weight shard and STABLE only (no config, no tokenizer;
step-2 cleaned unless on the checkpoint interval). R/checkpoints/step_N/{trainer,orchestrator},
R/metrics.jsonl, and the base eval as step_1 when [orchestrator.eval] is set. `all` is written as
episodes arrive: the first half of a batch's last group lands under the step before
(DOUBLE_PARTIAL_GROUPS, default 1; 0 keeps every group whole under its own step).

`evals @ evals.toml --output-dir D` (through `uv run evals`, tests/prime_rl_bin/uv): waits for
the inference server (the inference double's readiness marker), then standalone evaluates what
it serves at step 0, or online loads the broadcast at `online.resume_step` (with
`eval.retrigger_on_resume`) and writes its episodes under that step. The load goes to the
admin URL (`eval.client.admin_base_url`, else the base URL): a router that does not forward
admin calls, or an adapter broadcast (a LoRA run's) into a server without LoRA, fails it, and
evals skips the step and writes nothing (weight_update_error). With [inference], `rl` writes
R/configs/inference.json as prime-rl's launcher resolves it (resolved_inference), and a LoRA
run broadcasts an adapter. DOUBLE_ERRORED_EVAL_ROWS makes the eval rows errored episodes (ok =
false, no traces); DOUBLE_EVALS_SECONDS makes the epoch last that long.

Learning is not simulated: correctness is a deterministic function of the train rows' content
and the resume step, carried in the broadcast's shard. Fault knobs as trainer_double.py.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import time
from pathlib import Path

from trainer_double import cached_load, frac, knob, pause, served_or_loaded, write_eval_rows

from driver.dialects import current_schema


def fail(msg: str) -> int:
    print(msg, file=sys.stderr)
    return 1


def tasks_through_verifiers(tid: str, taskset: dict) -> list[dict]:
    """A v1 taskset's tasks as prime-rl's orchestrator gets them: `vf.load_taskset(config)`
    (orchestrator/envs.py:75@559b447), which is `taskset_class(config.id)(config)` in verifiers
    v1 (utils/loaders.py:190-191), then every task of it (envs.py:80)."""
    from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

    cls = taskset_class(tid)
    out = []
    taskset_obj = cls(taskset_config_type(tid)(id=tid, **taskset))
    tools = advertised_tools(cls, taskset_obj.config)
    for task in taskset_obj:
        d = task.data
        out.append({"key": task.key, "hash": task.hash, "prompt": d.prompt,
                    "answer": getattr(d, "answer", None), "info": getattr(d, "info", None),
                    "type": type(task).__name__, "tools": tools})
    return out


def advertised_tools(cls, config) -> list[dict]:
    """The tools a rollout's agent is offered, as the trace records them (a `Tool`: name,
    description, parameters; verifiers v1 types.py:97-101, trace.py:374@a60a606): the Task
    class's toolsets and the Taskset's shared ones, built from the taskset's config (env.py:391-399,
    rollout.py:248), each `tool` method registered with its name and stripped docstring
    (mcp/toolset.py:28-34) and advertised as `<server>_<tool>`, bare for a server named ""
    (harnesses/null/program.py:74-107, mcp/server.py:256-261)."""
    from verifiers.v1.utils.decorators import discover_decorated

    out = []
    for server in [*cls.task_type().toolsets(config.task), *cls.toolsets(config)]:
        for fn in discover_decorated(server, "tool"):
            raw = getattr(fn, "tool_name", None) or fn.__name__
            out.append({"name": f"{server.server_name}_{raw}" if server.server_name else raw,
                        "description": (fn.__doc__ or "").strip(), "parameters": tool_parameters(fn)})
    return out


def tool_parameters(fn) -> dict:
    """A tool's input schema as FastMCP derives it from the method's signature: a pydantic model
    `<name>Arguments` with one field per parameter, its annotation (Any where it has none) and
    its default, as JSON schema by alias (mcp/server/fastmcp/utilities/func_metadata.py:221-261,
    tools/base.py:70-76 of mcp 1.27.1, the version prime-rl pins: uv.lock:3343-3344@559b447).
    FastMCP's string schema for an unannotated parameter (func_metadata.py:239-240) and its alias for a parameter named like a BaseModel method
    (243-247) are not copied: no shipped or test toolset has either."""
    import inspect
    from typing import Any

    import pydantic

    fields = {n: (Any if p.annotation is inspect.Parameter.empty else p.annotation,
                  ... if p.default is inspect.Parameter.empty else p.default)
              for n, p in inspect.signature(fn, eval_str=True).parameters.items()}
    return pydantic.create_model(f"{fn.__name__}Arguments", **fields).model_json_schema(by_alias=True)


def tasks_of(source: dict) -> list[dict]:
    taskset = dict(source["env"]["taskset"])
    tid = taskset.pop("id")
    return cached_load(tid, ["taskset", taskset], lambda: served_or_loaded("taskset", tid, taskset))


def episode(task: dict, env_id: str, env_name: str, work: str, step: int, ok: bool,
            group: str | None = None, errored: bool = False) -> dict:
    """One vf.Episode record (verifiers v1/episode.py at the pin): a group's episodes share its
    `group.id`, fresh per dispatch; an errored episode has ok = false, its errors, no reward."""
    prompt = task["prompt"] if isinstance(task["prompt"], str) else json.dumps(task["prompt"])
    ep = {"id": secrets.token_hex(8), "env": {"id": env_id, "name": env_name},
          "task": {"type": task["type"], "data": {"prompt": task["prompt"], "answer": task["answer"],
                                                  "info": task["info"]},
                   "key": task["key"], "hash": task["hash"]},
          "group": {"id": group or secrets.token_hex(8)},
          "run": {"type": "train", "id": "double", "name": "double",
                  "work": {"type": work, "step": step, "policy": {"start": step - 1, "end": step - 1}}},
          "ok": True, "errors": [],
          "traces": [{"task": {"key": task["key"]}, "tools": task.get("tools") or [],
                      "nodes": [{"message": {"role": "user", "content": prompt}},
                                {"message": {"role": "assistant", "content": f"(double) {'right' if ok else 'wrong'}"},
                                 "sampled": True, "parent": 0}],
                      "rewards": {"correct": {"score": float(ok), "weight": 1.0}},
                      "metrics": {"is_correct": float(ok)}, "is_completed": True, "ok": True,
                      "stop_condition": "completed"}]}
    if errored:
        ep.update(ok=False, errors=["ModelError: the inference request failed"], traces=[])
    return ep


def append(path: Path, episodes: list[dict]) -> None:
    """monitors/file.py:43-55: a per-step episode file, appended to."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write("".join(json.dumps(e) + "\n" for e in episodes))


# transports/weights/filesystem.py:35-62@559b447: a LoRA run broadcasts the adapter alone
# (utils/weights.py:54: adapter_model.safetensors) with adapter_config.json (trainer/lora.py:331)
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_config.json")


def weights_skill(broadcast: Path) -> float:
    """The double's weights carry its skill in the shard's placeholder bytes."""
    shard = "adapter_model.safetensors" if (broadcast / "adapter_config.json").exists() else "model.safetensors"
    return json.loads((broadcast / shard).read_text())["skill"]


def resolved_inference(cfg: dict) -> dict:
    """The inference config `rl` writes to R/configs/inference.json and starts its server on
    (entrypoints/rl.py:46,87-95,122-123,195@559b447): the [inference] table with the shared
    model, the router and its engine port (configs/inference.py:440-444,511-515), the tool-call
    parser resolved from the model's name where it is "auto" (configs/inference.py:171-172:
    tests/prime_rl_tool_calls.py), and, when the trainer trains an adapter, LoRA turned on at
    its rank (configs/rl.py:576-578)."""
    import copy

    from prime_rl_tool_calls import resolve

    inf = copy.deepcopy(cfg["inference"])
    server = inf.setdefault("server", {})
    server.setdefault("port", 8000)
    vllm = inf.setdefault("vllm", {})
    vllm.setdefault("model", (cfg.get("model") or {}).get("name", "Qwen/Qwen3-0.6B"))
    parser = resolve(vllm.get("tool_call_parser", "auto"), str(vllm["model"]), "current")
    vllm.pop("tool_call_parser", None)
    if parser is not None:   # a None parser is dropped from the dump (exclude_none)
        vllm["tool_call_parser"] = parser
    if "router" not in inf:
        inf["router"] = {"type": "vllm-router", "policy": "consistent_hash"}
    if inf["router"] is not None:
        inf.setdefault("backend_port", int(server["port"]) + 100)
    lora = ((cfg.get("trainer") or {}).get("model") or {}).get("lora")
    if lora is not None:
        vllm["enable_lora"] = True
        vllm["max_lora_rank"] = int(lora.get("rank", 16))
    return inf


def rl(cfg: dict) -> int:
    from rl_contract.current import MAX_CONSECUTIVE_EMPTY_BATCHES, MAX_ZERO_OUTPUT_BATCHES

    unknown = current_schema.unknown_keys(cfg)
    if unknown:
        return fail(f"Extra inputs are not permitted: {', '.join(unknown)}")
    orch = cfg["orchestrator"]
    sources = orch.get("train", {}).get("source") or []
    if not sources:
        return fail("no train source")
    names = [s.get("name") or s["env"]["taskset"]["id"] for s in sources]
    run_name = (cfg.get("run") or {}).get("name") or \
        f"{'-'.join(names)}--{str((cfg.get('model') or {}).get('name', 'Qwen3-0.6B')).split('/')[-1].lower()}--{secrets.token_hex(4)}"
    R = Path(cfg.get("output_dir", "outputs")) / run_name
    max_steps, group = int(cfg["max_steps"]), int(orch.get("group_size", 1))
    batch = int(orch.get("batch_size", 128))
    if batch % group:
        return fail("batch_size must be divisible by group_size")
    for s in sources:
        agent = (s.get("env") or {}).get("agent") or {}
        if (agent.get("runtime") or {}).get("type", "prime") == "prime":
            return fail("SandboxError: no prime sandbox reachable (agent.runtime defaulted to prime)")
    resume = cfg.get("resume")
    start, src_ckpt = 0, None
    if resume is not None:
        src_ckpt = Path(resume["dir"]) if "dir" in resume else R / "checkpoints" / f"step_{int(resume['step'])}"
        start = int(src_ckpt.name.split("_")[1])
        if not (src_ckpt / "trainer").is_dir():
            return fail(f"FileNotFoundError: Checkpoint not found at {src_ckpt / 'trainer'}")
        progress = src_ckpt / "orchestrator" / "progress.pt"
        if not progress.exists():
            return fail(f"Orchestrator checkpoint not found at {progress}")
        saved = json.loads(progress.read_text())["train_source"]["names"]
        if set(saved) != set(names):   # train_source.py:73-82 compares the names as sets
            return fail(f"Train-source checkpoint envs {saved} do not match configured envs {names}")
        for d in ("rollouts", "broadcasts"):   # clean_future_steps
            for p in (R / d).glob("step_*"):
                if int(p.name.split("_")[1]) > start:
                    shutil.rmtree(p)
        if max_steps <= start:
            while True:     # the trainer's equality test never fires: prime-rl hangs here
                pause(60)
    elif any((R / d).exists() and any((R / d).iterdir()) for d in ("checkpoints", "rollouts", "broadcasts")) \
            and not cfg.get("clean"):
        return fail(f"FileExistsError: run directory {R} already has artifacts; pass clean = true or resume")
    rows = {n: tasks_of(s) for n, s in zip(names, sources)}
    content = sorted(json.dumps([t["prompt"] for t in v], default=str) for v in rows.values())
    skill = 0.3 + 0.25 * frac(content, start, sum(map(len, rows.values())))
    crash = int(os.environ.get("DOUBLE_CRASH_AT_STEP", "0") or 0)
    hang = int(knob("DOUBLE_HANG_AT_STEP", "0"))
    step_s = float(os.environ.get("DOUBLE_STEP_SECONDS", "0") or 0)
    interval = int((cfg.get("ckpt") or {}).get("interval") or max_steps)
    filesystem = (cfg.get("weight_broadcast") or {}).get("type") == "filesystem"
    # configs/orchestrator.py:270: zero-advantage samples are filtered unless turned off
    filtering = (orch.get("train") or {}).get("filter_zero_advantages", True)
    R.mkdir(parents=True, exist_ok=True)
    if cfg.get("inference") is not None:
        (R / "configs").mkdir(exist_ok=True)
        (R / "configs" / "inference.json").write_text(json.dumps(resolved_inference(cfg), indent=2))
    lora = ((cfg.get("trainer") or {}).get("model") or {}).get("lora")
    ev = orch.get("eval")
    if ev and resume is None and not ev.get("skip_first_step"):
        write_eval(R / "rollouts" / "step_1" / "eval" / "all" / "traces.jsonl", ev["source"],
                   int(ev.get("num_examples", -1)), 0.2, step=1)
    cursor = 0
    empty = 0
    zero_output = 0

    def draw(step: int, tag) -> list[dict]:
        nonlocal cursor
        episodes = []
        for j in range(batch // group):
            name = names[j % len(names)]
            pool = rows[name]
            task = pool[cursor % len(pool)]   # the default sampler cycles in order
            cursor += 1
            gid = secrets.token_hex(8)
            for k in range(group):
                episodes.append(episode(task, sources[names.index(name)]["env"]["taskset"]["id"],
                                        name, "train", step, frac("train", step, j, k, *tag) <
                                        float(knob("DOUBLE_TRAIN_SKILL", str(skill))), group=gid))
        return episodes

    step = start + 1   # orchestrator.py:321 (types.py:27-30: 1-indexed, trainer-aligned)
    while step <= max_steps:
        if step == crash:
            return fail(f"RuntimeError: injected crash at step {step}")
        if step == hang:
            while True:
                pause(60)
        pause(step_s)
        episodes = draw(step, [empty] if empty else [])
        if knob("DOUBLE_TRAIN_ERRORED", "") == "1":
            # every request of the arm fails: errored episodes, no trainable survivor
            episodes = [{**e, "ok": False, "errors": ["ModelError: the inference request failed"],
                         "traces": []} for e in episodes]
        # every arriving episode is logged to `all` under the step still collecting (:591-592),
        # as it arrives: a group still in flight when the previous step shipped left its first
        # episodes under that step, so `all` holds partial groups (DOUBLE_PARTIAL_GROUPS=0: the
        # batch's groups whole under their own step; how many straddle is timing)
        early = []
        if knob("DOUBLE_PARTIAL_GROUPS", "1") == "1" and step > start + 1 and group > 1 and episodes:
            gid = episodes[-1]["group"]["id"]
            early = [e for e in episodes if e["group"]["id"] == gid][: group // 2]
            append(R / "rollouts" / f"step_{step - 1}" / "train" / "all" / "traces.jsonl", early)
        arrived_early = {id(e) for e in early}
        append(R / "rollouts" / f"step_{step}" / "train" / "all" / "traces.jsonl",
               [e for e in episodes if id(e) not in arrived_early])
        if episodes and all(not e["ok"] for e in episodes):
            # orchestrator/train_sink.py:240-252,309-338: groups with no trainable survivor
            # count their owed episodes; a batch's worth is one zero-output batch equivalent,
            # and ten abort the run (MAX_CONSECUTIVE_ZERO_OUTPUT_BATCH_EQUIVALENTS, :28)
            zero_output += 1
            if zero_output >= MAX_ZERO_OUTPUT_BATCHES:
                return fail(f"RuntimeError: {zero_output} consecutive zero-output batch equivalents — "
                            "check the curriculum admission policy, task difficulty, and staleness drops.")
            continue
        spread = {}
        for e in episodes:
            spread.setdefault(e["group"]["id"], set()).add(e["traces"][0]["rewards"]["correct"]["score"])
        if filtering and not any(len(v) > 1 for v in spread.values()):
            empty += 1   # an empty batch does not advance the step (:640-652)
            if empty >= MAX_CONSECUTIVE_EMPTY_BATCHES:
                return fail(f"RuntimeError: {empty} consecutive empty train batches — check algorithm "
                            "credit and task difficulty.")
            continue
        empty = 0
        append(R / "rollouts" / f"step_{step}" / "train" / "effective" / "traces.jsonl", episodes)
        with open(R / "metrics.jsonl", "a") as f:
            f.write(json.dumps({"step": step, "time": time.time(),
                                "reward/mean": sum(e["traces"][0]["rewards"]["correct"]["score"]
                                                   for e in episodes) / len(episodes)}) + "\n")
        if filesystem:
            # transports/weights/filesystem.py:33-75: weight shards and STABLE, no config or
            # tokenizer (utils/weights.py:184-234: one shard is model.safetensors)
            b = R / "broadcasts" / f"step_{step}"
            b.mkdir(parents=True, exist_ok=True)
            if lora is not None:
                (b / ADAPTER_FILES[0]).write_text(json.dumps({"step": step, "skill": skill}))
                (b / ADAPTER_FILES[1]).write_text(json.dumps({"r": lora.get("rank"), "lora_alpha": lora.get("alpha")}))
            else:
                (b / "model.safetensors").write_text(json.dumps({"step": step, "skill": skill}))
            (b / "STABLE").write_text("")
            old = R / "broadcasts" / f"step_{step - 2}"
            if old.exists() and (step - 2) % interval:
                shutil.rmtree(old)
        if (step % interval == 0 or step == max_steps) and not os.environ.get("DOUBLE_SKIP_CHECKPOINT"):
            c = R / "checkpoints" / f"step_{step}"
            (c / "trainer").mkdir(parents=True, exist_ok=True)
            (c / "trainer" / "__0_0.distcp").write_text(f"step {step}")
            (c / "orchestrator").mkdir(parents=True, exist_ok=True)
            (c / "orchestrator" / "progress.pt").write_text(json.dumps(
                {"progress": {"step": step}, "train_source": {"names": names, "cursor": cursor}}))
        step += 1   # :690
    # the final ship moved the step to max + 1, and episodes already queued when the drain
    # starts land there (:561-592,690,761-776); how many is timing, not settled by the source
    # (prime-rl's own orchestrator wrote some on one machine, none on another):
    # DOUBLE_SPILL_GROUPS groups, the last one cut short (default 1; 0 for none)
    spill = int(os.environ.get("DOUBLE_SPILL_GROUPS", "1") or 0)
    if spill:
        late = draw(step, ["spill"])[: spill * group - max(1, group // 2)]
        append(R / "rollouts" / f"step_{step}" / "train" / "all" / "traces.jsonl", late)
    print("Training finished!")
    return 0


def write_eval(path: Path, sources: list[dict], default_n: int, skill: float, step: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    limit = int(os.environ.get("DOUBLE_EVAL_ROWS", "0") or 0)
    errored = {int(x) for x in os.environ.get("DOUBLE_ERRORED_EVAL_ROWS", "").split(",") if x}
    lines: list[str] = []
    for s in sources:
        n = int(s.get("num_examples", default_n))
        # group_size rollouts of each example (orchestrator/eval_sink.py:37-42@559b447: a
        # source's batch is its examples times its group_size); a source's own sampling at a
        # temperature above 0 draws each rollout apart, else they are one greedy answer
        group = int(s.get("group_size", 1))
        sampled = float((s.get("sampling") or {}).get("temperature") or 0.0) > 0
        for t in tasks_of(s)[: n if n > 0 else None]:
            for d in range(group):
                if limit and len(lines) >= limit:
                    break
                ok = frac("eval", t["key"], json.dumps(s["env"]["taskset"], sort_keys=True),
                          *((d,) if sampled and group > 1 else ())) < skill
                lines.append(json.dumps(episode(t, s["env"]["taskset"]["id"], s["name"], "eval", step,
                                                ok, errored=len(lines) in errored)) + "\n")
    write_eval_rows(path, lines, mode="a")
    return len(lines)


def _marker(port: int) -> dict | None:
    path = Path(os.environ.get("DOUBLE_SERVER_DIR", "/tmp")) / f"ready-{port}"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _port(url: str) -> int:
    from urllib.parse import urlparse

    return urlparse(str(url)).port or 8000


def wait_for_server(cfg: dict) -> str | None:
    """utils/client.py:174-200: poll the server until it is ready, for up to
    eval.client.wait_for_ready_timeout (1800 s, configs/shared.py:157); the inference double
    marks readiness in DOUBLE_SERVER_DIR (DOUBLE_READY_TIMEOUT_SECONDS scales the wait).
    Returns the model the server serves, or None when it never became ready."""
    url = ((cfg.get("eval") or {}).get("client") or {}).get("base_url", "http://localhost:8000/v1")
    timeout = float(os.environ.get("DOUBLE_READY_TIMEOUT_SECONDS",
                                   (cfg.get("eval") or {}).get("client", {}).get("wait_for_ready_timeout", 1800)))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = _marker(_port(url))
        if m is not None:
            return m["model"]
        time.sleep(0.05)
    return None


def weight_update_error(cfg: dict, broadcast: Path) -> str | None:
    """Why `pool.update_weights` fails, or None: it posts /pause, /update_weights (or
    /load_lora_adapter for an adapter broadcast, evals.py:350-357@559b447), /resume to the admin
    clients (`eval.client.admin_base_url`, else the base URL: utils/client.py:128-156). A router
    that does not forward admin calls answers 404 (whether the pinned one does is open:
    DOUBLE_ROUTER_FORWARDS_ADMIN); an engine without LoRA cannot load an adapter (prime-rl's
    /load_lora_adapter returns vLLM's error: inference/vllm/server.py:90-116)."""
    client = (cfg.get("eval") or {}).get("client") or {}
    admin = client.get("admin_base_url") or [client.get("base_url", "http://localhost:8000/v1")]
    adapter = (broadcast / "adapter_config.json").exists()
    for url in (admin if isinstance(admin, list) else [admin]):
        m = _marker(_port(url))
        if m is None:
            return f"ConnectError: All connection attempts failed ({url})"
        if m.get("role") == "router" and not m.get("forwards_admin", True):
            return f"HTTPStatusError: Client error '404 Not Found' for url '{url}/pause'"
        if adapter and not m.get("enable_lora"):
            return (f"HTTPStatusError: Client error '400 Bad Request' for url '{url}/load_lora_adapter' "
                    "(LoRA is not enabled on the server: start it with enable_lora)")
    return None


def evals(cfg: dict) -> int:
    """`uv run evals @ evals.toml`: standalone (one epoch against whatever the server serves, at
    step 0) or online (evals.py:239-312: wait for the broadcast at `resume_step`, load it into
    the server, evaluate it under that step; with `retrigger_on_resume` off nothing past the
    resume step is due and it exits without an episode, :74,286-309)."""
    unknown = current_schema.unknown_keys(cfg, current_schema.EVALS_SCHEMA)
    if unknown:
        return fail(f"Extra inputs are not permitted: {', '.join(unknown)}")
    served = wait_for_server(cfg)
    if served is None:
        return fail("TimeoutError: the inference server did not become ready "
                    "(eval.client.wait_for_ready_timeout)")
    if served != cfg.get("model", "Qwen/Qwen3-0.6B"):   # every request names `model`
        return fail(f"NotFoundError: The model `{cfg.get('model')}` does not exist (served: {served})")
    out = Path(cfg.get("output_dir", "outputs"))
    online = cfg.get("online")
    skill, step = 0.2, 0    # the base model, as served
    if online is not None:
        step = int(online.get("resume_step") or 0)
        if not (cfg.get("eval") or {}).get("retrigger_on_resume"):
            print("Evals finished!")
            return 0
        broadcast = Path(online.get("broadcasts_dir") or out / "broadcasts") / f"step_{step}"
        deadline = time.monotonic() + float(os.environ.get("DOUBLE_READY_TIMEOUT_SECONDS", "3600"))
        while not (broadcast / "STABLE").exists():   # evals.py:250-258: waits for the broadcast
            if time.monotonic() > deadline:
                return fail(f"no stable broadcast at {broadcast}")
            time.sleep(0.05)
        why = weight_update_error(cfg, broadcast)
        if why is not None:   # evals.py:356-364: the step is skipped, the run goes on and ends
            print(f"Failed to update inference weights to step {step} - skipping evals: {why}", file=sys.stderr)
            print("Evals finished!")
            return 0
        skill = weights_skill(broadcast)   # pool.update_weights(broadcast_dir), :357
    path = out / "rollouts" / f"step_{step}" / "eval" / "all" / "traces.jsonl"
    pause(float(os.environ.get("DOUBLE_EVALS_SECONDS", "0") or 0))   # a long epoch
    if os.environ.get("DOUBLE_SKIP_EVAL"):
        print("Evals finished!")
        return 0
    write_eval(path, cfg["eval"]["source"], int(cfg["eval"].get("num_examples", -1)), skill, step=step)
    torn = os.environ.get("DOUBLE_TORN_EVAL")
    if torn and (torn == "1" or out.parents[2].name == torn) and path.exists():
        text = path.read_text()
        path.write_text(text[:len(text) - len(text.splitlines()[-1]) // 2 - 1])
    print("Evals finished!")
    return 0
