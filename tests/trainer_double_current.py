"""The current-generation half of the trainer double (prime-rl v0.8.1.dev57 .. dev67): `rl` and
the standalone `evals`, as trainer_double.py dispatches them.

`rl @ a.toml ... --flags`: prime-rl's composition; [trainer] and [orchestrator] required; the
schema snapshot's closed tables (classic keys are rejected as prime-rl rejects them); one run
dir R = output_dir/run.name (an unset name gets a random suffix per launch, as prime-rl's does);
a fresh launch into a used R fails with FileExistsError; `[resume] step` (own R) or `dir`
(another run's checkpoints/step_F) needs both checkpoint halves, refuses a renamed train source,
and hangs at max_steps <= F as the real trainer does; resuming deletes rollouts and broadcasts
past F. It writes R/rollouts/step_N/train/{all,effective}/traces.jsonl episodes (rewards as
score x weight, task.key per task), R/checkpoints/step_N/{trainer,orchestrator}, the filesystem
broadcast R/broadcasts/step_N + STABLE (step-2 cleaned unless on the checkpoint interval;
nothing without [weight_broadcast] filesystem, NCCL being the default), R/metrics.jsonl, and
the base eval as step_1 when [orchestrator.eval] is set. Tasksets load through verifiers.v1.

`--evals [--tokenizer MODEL] @ evals.toml --output-dir D`: one epoch of each eval source against the
weights dir named by `model` (a broadcast), written to D/rollouts/step_0/eval/all/traces.jsonl.

Learning is not simulated: correctness is a deterministic function of the train rows' content
and the resume step, carried in the broadcast's config.json. Fault knobs as trainer_double.py.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import time
from pathlib import Path

from trainer_double import cached_load, frac, knob, write_eval_rows

from driver.dialects import current_schema


def fail(msg: str) -> int:
    print(msg, file=sys.stderr)
    return 1


def tasks_of(source: dict) -> list[dict]:
    taskset = dict(source["env"]["taskset"])
    tid = taskset.pop("id")

    def load() -> list[dict]:
        from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

        cls = taskset_class(tid)
        out = []
        for task in cls(taskset_config_type(tid)(id=tid, **taskset)):
            d = task.data
            out.append({"key": task.key, "hash": task.hash, "prompt": d.prompt,
                        "answer": getattr(d, "answer", None), "info": getattr(d, "info", None),
                        "type": type(task).__name__})
        return out

    return cached_load(tid, ["taskset", taskset], load)


def episode(task: dict, env_id: str, env_name: str, work: str, step: int, ok: bool) -> dict:
    prompt = task["prompt"] if isinstance(task["prompt"], str) else json.dumps(task["prompt"])
    return {"id": secrets.token_hex(8), "env": {"id": env_id, "name": env_name},
            "task": {"type": task["type"], "data": {"prompt": task["prompt"], "answer": task["answer"],
                                                    "info": task["info"]},
                     "key": task["key"], "hash": task["hash"]},
            "group": {"id": secrets.token_hex(8)},
            "run": {"type": "train", "id": "double", "name": "double",
                    "work": {"type": work, "step": step, "policy": {"start": step - 1, "end": step - 1}}},
            "ok": True, "errors": [],
            "traces": [{"task": {"key": task["key"]},
                        "nodes": [{"message": {"role": "user", "content": prompt}},
                                  {"message": {"role": "assistant", "content": f"(double) {'right' if ok else 'wrong'}"},
                                   "sampled": True, "parent": 0}],
                        "rewards": {"correct": {"score": float(ok), "weight": 1.0}},
                        "metrics": {"is_correct": float(ok)}, "is_completed": True, "ok": True,
                        "stop_condition": "completed"}]}


def rl(cfg: dict) -> int:
    for required in ("trainer", "orchestrator"):
        if required not in cfg:
            return fail(f"--{required}  Field required")
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
        if saved != names:
            return fail(f"Train-source checkpoint envs {saved} do not match configured envs {names}")
        for d in ("rollouts", "broadcasts"):   # clean_future_steps
            for p in (R / d).glob("step_*"):
                if int(p.name.split("_")[1]) > start:
                    shutil.rmtree(p)
        if max_steps <= start:
            while True:     # the trainer's equality test never fires: prime-rl hangs here
                time.sleep(60)
    elif any((R / d).exists() and any((R / d).iterdir()) for d in ("checkpoints", "rollouts", "broadcasts")) \
            and not cfg.get("clean"):
        return fail(f"FileExistsError: run directory {R} already has artifacts; pass clean = true or resume")
    rows = {n: tasks_of(s) for n, s in zip(names, sources)}
    content = sorted(json.dumps([t["prompt"] for t in v], default=str) for v in rows.values())
    skill = 0.3 + 0.25 * frac(content, start, sum(map(len, rows.values())))
    crash = int(os.environ.get("DOUBLE_CRASH_AT_STEP", "0") or 0)
    hang = int(knob("DOUBLE_HANG_AT_STEP", "0"))
    pause = float(os.environ.get("DOUBLE_STEP_SECONDS", "0") or 0)
    interval = int((cfg.get("ckpt") or {}).get("interval") or max_steps)
    filesystem = (cfg.get("weight_broadcast") or {}).get("type") == "filesystem"
    R.mkdir(parents=True, exist_ok=True)
    ev = orch.get("eval")
    if ev and resume is None and not ev.get("skip_first_step"):
        write_eval(R / "rollouts" / "step_1" / "eval" / "all" / "traces.jsonl", ev["source"],
                   int(ev.get("num_examples", -1)), 0.2, step=1)
    cursor = 0
    for step in range(start + 1, max_steps + 1):
        if step == crash:
            return fail(f"RuntimeError: injected crash at step {step}")
        if step == hang:
            while True:
                time.sleep(60)
        time.sleep(pause)
        episodes = []
        for j in range(batch // group):
            name = names[j % len(names)]
            pool = rows[name]
            task = pool[cursor % len(pool)]   # the default sampler cycles in order
            cursor += 1
            for k in range(group):
                episodes.append(episode(task, sources[names.index(name)]["env"]["taskset"]["id"],
                                        name, "train", step, frac("train", step, j, k) < float(knob("DOUBLE_TRAIN_SKILL", str(skill)))))
        for subset in ("all", "effective"):
            path = R / "rollouts" / f"step_{step}" / "train" / subset / "traces.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
        with open(R / "metrics.jsonl", "a") as f:
            f.write(json.dumps({"step": step, "time": time.time(),
                                "reward/mean": sum(e["traces"][0]["rewards"]["correct"]["score"]
                                                   for e in episodes) / len(episodes)}) + "\n")
        if filesystem:
            b = R / "broadcasts" / f"step_{step}"
            b.mkdir(parents=True, exist_ok=True)
            for name in ("model.safetensors", "config.json"):
                (b / name).write_text(json.dumps({"step": step, "skill": skill}))
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
    print("RL training finished!")
    return 0


def write_eval(path: Path, sources: list[dict], default_n: int, skill: float, step: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    limit = int(os.environ.get("DOUBLE_EVAL_ROWS", "0") or 0)
    lines: list[str] = []
    for s in sources:
        n = int(s.get("num_examples", default_n))
        for t in tasks_of(s)[: n if n > 0 else None]:
            if limit and len(lines) >= limit:
                break
            ok = frac("eval", t["key"], json.dumps(s["env"]["taskset"], sort_keys=True)) < skill
            lines.append(json.dumps(episode(t, s["env"]["taskset"]["id"], s["name"], "eval", step, ok)) + "\n")
    write_eval_rows(path, lines, mode="a")
    return len(lines)


def evals(cfg: dict) -> int:
    unknown = current_schema.unknown_keys(cfg, current_schema.EVALS_SCHEMA)
    if unknown:
        return fail(f"Extra inputs are not permitted: {', '.join(unknown)}")
    model = Path(cfg["model"])
    if not (model / "config.json").exists() or not (model / "STABLE").exists():
        return fail(f"inference server cannot load {model}: not a stable weight broadcast")
    skill = json.loads((model / "config.json").read_text())["skill"]
    out = Path(cfg.get("output_dir", "outputs"))
    path = out / "rollouts" / "step_0" / "eval" / "all" / "traces.jsonl"
    if os.environ.get("DOUBLE_SKIP_EVAL"):
        print("Evals finished!")
        return 0
    write_eval(path, cfg["eval"]["source"], int(cfg["eval"].get("num_examples", -1)), skill, step=0)
    torn = os.environ.get("DOUBLE_TORN_EVAL")
    if torn and (torn == "1" or out.parents[2].name == torn) and path.exists():
        text = path.read_text()
        path.write_text(text[:len(text) - len(text.splitlines()[-1]) // 2 - 1])
    print("Evals finished!")
    return 0
