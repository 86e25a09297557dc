"""A test double of prime-rl's `rl` entrypoint (used only by tests and the demo), both
generations: a config with [[orchestrator.train.source]] (or `--evals` first, for the standalone
`evals` entrypoint) is the current generation's (trainer_double_current.py); anything else
the classic one's, described here.

It speaks the same contract: `rl @ a.toml @ b.toml --max-steps N --output-dir X ...` with
prime-rl's composition (later files and CLI flags win, tables deep-merge, lists are replaced
whole), requires [trainer] and [orchestrator], loads the train and eval envs through verifiers,
writes the classic output layout, prints "RL training finished!" and exits 0. It does no
learning: eval correctness is a deterministic function of the train envs and the resume step.

Fault knobs (environment): DOUBLE_CRASH_AT_STEP=k exits 1 at step k; DOUBLE_HANG_AT_STEP=k
sleeps forever at step k; DOUBLE_STEP_SECONDS=s sleeps s per step; DOUBLE_SKIP_EVAL=1 writes no
eval file; DOUBLE_EVAL_ROWS=n writes only n eval rows; DOUBLE_TORN_EVAL=1 (or =ARM, e.g. iter_1: that arm only) cuts the last eval
line in half; DOUBLE_SKIP_CHECKPOINT=1 writes no checkpoint trees. Each still exits 0.

Production shape (an arm on real GPUs is silent for long stretches at known places): 
DOUBLE_STARTUP_SECONDS=s sleeps s before its first step (vLLM and the trainer starting; an eval
launch before its first row); DOUBLE_EVAL_SECONDS=s sleeps s after the last step and then writes
the final eval file in one write, as a full-split eval does; DOUBLE_EVAL_ROW_SECONDS=s instead
streams the eval rows one every s seconds; DOUBLE_IGNORE_TERM=1 ignores SIGTERM (only SIGKILL
stops it); DOUBLE_TRAIN_SKILL=p solves a train rollout with probability p (0: none, as for a
dataset the student never solves). DOUBLE_SHAPE_ARM=DIR applies these and DOUBLE_HANG_AT_STEP
to that arm only (its directory name, e.g. run_a_best_from_iter0, or `probe` for the gradient
probe's one-step launch). Each launch's entry in DOUBLE_LAUNCH_LOG lists, as
`alive_before`, the pids of earlier launches still running when it started: a second arm
started beside a live one shows there.

DOUBLE_ROW_CACHE=DIR (the suite sets it) keeps each loaded env's rows in DIR, keyed on the env
id, its args and a hash of its installed source, so the hub env is loaded through verifiers once
per test process rather than once per launch (`cached_load`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path


def parse_args(argv: list[str]) -> dict:
    # prime-rl's composition rules, shared with the embedded trainer (no schema applied here)
    from rl_contract.composition import CompositionError, compose

    try:
        return compose(argv)
    except CompositionError as e:
        sys.exit(str(e))


def frac(*parts) -> float:
    h = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()
    return int(h[:8], 16) / 0xFFFFFFFF


def source_fingerprint(env_id: str) -> str | None:
    """A hash of the installed env module's files (found without importing it), or None when
    it is not installed: a cached load is valid only for the exact source that made it."""
    import importlib.util

    from generators.core import module_name

    try:
        spec = importlib.util.find_spec(module_name(env_id))
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    roots = list(spec.submodule_search_locations or []) or [spec.origin]
    h = hashlib.sha256()
    for root in map(Path, roots):
        for f in sorted(root.rglob("*") if root.is_dir() else [root]):
            if f.is_file() and "__pycache__" not in f.parts:
                h.update(str(f).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:24]


def cached_load(env_id: str, key: list, load) -> list:
    """`load()` (a list of JSON-able rows), or, with DOUBLE_ROW_CACHE set (the test suite sets
    it), the rows an earlier launch loaded for the same key from the same installed source. The
    rows are the same either way (both come back through JSON); a launch that finds every env
    it needs cached skips the verifiers import, about 5 s a launch on 2 cores."""
    cache = os.environ.get("DOUBLE_ROW_CACHE")
    fp = source_fingerprint(env_id) if cache else None
    path = None
    if fp:
        digest = hashlib.sha256(json.dumps([env_id, *key, fp], sort_keys=True, default=str).encode())
        path = Path(cache) / f"{digest.hexdigest()[:24]}.json"
        if path.exists():
            return json.loads(path.read_text())
    rows = json.loads(json.dumps(load(), default=str))
    if path:   # atomic: a launch killed mid-write leaves no torn cache entry
        from driver.run.files import atomic_write_text

        atomic_write_text(path, json.dumps(rows))
    return rows


def load_rows(env_block: dict, split: str) -> list[dict]:
    """The env's rows, loaded through verifiers as prime-rl loads them (or from the cache)."""
    def load() -> list[dict]:
        import verifiers as vf

        env = vf.load_environment(env_block["id"], **env_block.get("args", {}))
        ds = env.get_dataset() if split == "train" else env.get_eval_dataset()
        return [dict(r) for r in ds]

    return cached_load(env_block["id"], [env_block.get("args") or {}, split], load)


def arm_of(output_dir: str | None) -> str:
    """The arm directory a launch writes under: ARM/prime_out, or ARM/prime_out/final_eval/step_N."""
    parts = Path(output_dir or "outputs").resolve().parts
    return parts[parts.index("prime_out") - 1] if "prime_out" in parts else ""


ARM = ""   # this launch's arm (set in main)


def knob(name: str, default: str = "") -> str:
    """A fault or shape knob's value for this launch (DOUBLE_SHAPE_ARM limits the shape knobs
    and the hang to one arm)."""
    only = os.environ.get("DOUBLE_SHAPE_ARM")
    shaped = name in ("DOUBLE_STARTUP_SECONDS", "DOUBLE_EVAL_SECONDS", "DOUBLE_EVAL_ROW_SECONDS",
                      "DOUBLE_IGNORE_TERM", "DOUBLE_HANG_AT_STEP", "DOUBLE_TRAIN_SKILL")
    if shaped and only and only != ARM:
        return default
    return os.environ.get(name, default) or default


def still_running(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except OSError:
            pass
    return alive


def write_eval_rows(path: Path, lines: list[str], mode: str = "w") -> None:
    """The final eval file: in one write after DOUBLE_EVAL_SECONDS (a full-split eval writes
    once, at the end), or streamed one row every DOUBLE_EVAL_ROW_SECONDS."""
    path.parent.mkdir(parents=True, exist_ok=True)
    per_row = float(knob("DOUBLE_EVAL_ROW_SECONDS", "0"))
    if not per_row:
        time.sleep(float(knob("DOUBLE_EVAL_SECONDS", "0")))
        with open(path, mode) as f:
            f.write("".join(lines))
        return
    with open(path, mode) as f:
        for line in lines:
            time.sleep(per_row)
            f.write(line)
            f.flush()


def zero_weight_metrics(env_block: dict) -> list[str]:
    """The names of the env's zero-weight rubric functions (its metrics), as prime-rl's rows
    carry them (loaded once per installed source, like the rows)."""
    def load() -> list[str]:
        import verifiers as vf

        rubric = vf.load_environment(env_block["id"], **env_block.get("args", {})).rubric
        rubrics = getattr(rubric, "rubrics", [rubric])
        return [getattr(f, "__name__", "") for r in rubrics
                for f, w in zip(getattr(r, "funcs", []), getattr(r, "weights", [])) if w == 0]

    return cached_load(env_block["id"], [env_block.get("args") or {}, "metrics"], load)


def main(argv: list[str]) -> int:
    global ARM
    as_evals = bool(argv) and argv[0] == "--evals"
    if as_evals:   # the final-eval contract: --evals --tokenizer MODEL @ evals.toml --flags
        argv = argv[3:] if argv[1:2] == ["--tokenizer"] else argv[1:]
    cfg = parse_args(argv)
    ARM = arm_of(cfg.get("output_dir"))
    if knob("DOUBLE_IGNORE_TERM"):
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.environ.get("DOUBLE_LAUNCH_LOG"):
        log = Path(os.environ["DOUBLE_LAUNCH_LOG"])
        earlier = [json.loads(x)["pid"] for x in log.read_text().splitlines()] if log.exists() else []
        with open(log, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "output_dir": cfg.get("output_dir"), "argv": argv,
                                "alive_before": still_running(earlier), "ts": time.time()}) + "\n")
    time.sleep(float(knob("DOUBLE_STARTUP_SECONDS", "0")))
    if as_evals or "source" in cfg.get("orchestrator", {}).get("train", {}):
        import trainer_double_current as current

        return current.evals(cfg) if as_evals else current.rl(cfg)
    for required in ("trainer", "orchestrator"):
        if required not in cfg:
            print(f"--{required}  Field required", file=sys.stderr)
            return 1
    out = Path(cfg.get("output_dir", "outputs"))
    orch = cfg["orchestrator"]
    max_steps = int(cfg["max_steps"])
    rpe = int(orch.get("rollouts_per_example", 1))
    batch = int(orch.get("batch_size", 128))
    if batch % rpe:
        print("batch_size must be divisible by rollouts_per_example", file=sys.stderr)
        return 1
    ckpt = cfg.get("ckpt") or {}
    resume = ckpt.get("resume_step")
    start = 0
    if resume is not None:
        for tree in (out / "checkpoints" / f"step_{resume}", out / "weights" / f"step_{resume}",
                     out / "run_default" / "checkpoints" / f"step_{resume}",
                     out / "run_default" / "broadcasts" / f"step_{resume}"):
            if not tree.exists():
                print(f"FileNotFoundError: {tree}", file=sys.stderr)
                return 1
        start = int(resume)
    if start >= max_steps:
        print("KeyError: 'perf/peak_memory'", file=sys.stderr)
        return 1
    train_envs = orch.get("train", {}).get("env") or [{"id": "reverse-text"}]
    eval_envs = (orch.get("eval") or {}).get("env") or []
    train_rows = {e["id"]: load_rows(e, "train") for e in train_envs}
    # behaviour is a function of the data, not of package names (which carry a per-run tag)
    content = {k: hashlib.sha256(json.dumps([r.get("question", r.get("prompt")) for r in v],
                                            default=str).encode()).hexdigest()[:12]
               for k, v in train_rows.items()}
    skill = 0.3 + 0.25 * frac(sorted(content.values()), resume, len(sum(train_rows.values(), [])))
    crash = int(os.environ.get("DOUBLE_CRASH_AT_STEP", "0") or 0)
    hang = int(knob("DOUBLE_HANG_AT_STEP", "0"))
    pause = float(os.environ.get("DOUBLE_STEP_SECONDS", "0") or 0)
    interval = int(ckpt.get("interval") or max_steps)
    rdir = out / "run_default"
    for step in range(start + 1, max_steps + 1):
        if step == crash:
            print(f"RuntimeError: injected crash at step {step}", file=sys.stderr)
            return 1
        if step == hang:
            while True:
                time.sleep(60)
        time.sleep(pause)
        rows = []
        n_prompts = batch // rpe
        taken: set = set()
        for j in range(n_prompts):
            env_id = sorted(train_rows, key=content.get)[j % len(train_rows)]
            pool = train_rows[env_id]
            i = int(frac(step, j, content[env_id]) * len(pool))
            while (env_id, i) in taken and len(taken) < sum(map(len, train_rows.values())):
                i = (i + 1) % len(pool)     # one group per example in a step, as prime-rl draws
            taken.add((env_id, i))
            ex = pool[i]
            for k in range(rpe):
                ok = frac("train", step, j, k) < float(knob("DOUBLE_TRAIN_SKILL", str(skill)))
                rows.append({
                    "example_id": ex.get("example_id", j), "env_name": env_id,
                    "prompt": ex.get("prompt"), "answer": ex.get("answer"), "info": ex.get("info"),
                    "completion": [{"role": "assistant", "content": f"(double) {'right' if ok else 'wrong'} {k}"}],
                    "reward": float(ok), "metrics": {"is_correct": float(ok)},
                    "is_completed": True, "is_truncated": False, "advantage": 0.0,
                    "timing": {"total_ms": 1.0}, "filters": {}, "is_filtered": False,
                })
        sdir = rdir / "rollouts" / f"step_{step}"
        sdir.mkdir(parents=True, exist_ok=True)
        (sdir / "train_rollouts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        if (step % interval == 0 or step == max_steps) and not os.environ.get("DOUBLE_SKIP_CHECKPOINT"):
            (out / "checkpoints" / f"step_{step}" / "trainer").mkdir(parents=True, exist_ok=True)
            (out / "checkpoints" / f"step_{step}" / "trainer" / "__0_0.distcp").write_text(f"step {step}")
            (out / "checkpoints" / f"step_{step}" / "STABLE").write_text("")
            w = out / "weights" / f"step_{step}"
            w.mkdir(parents=True, exist_ok=True)
            for name in ("model.safetensors", "config.json", "tokenizer.json"):
                (w / name).write_text(json.dumps({"step": step, "skill": skill}))
            (rdir / "checkpoints" / f"step_{step}" / "orchestrator").mkdir(parents=True, exist_ok=True)
            (rdir / "broadcasts" / f"step_{step}").mkdir(parents=True, exist_ok=True)
    # every eval env's rows go into one file, in config order, unlabelled, as prime-rl writes them
    path = rdir / "rollouts" / f"step_{max_steps}" / "eval_rollouts.jsonl"
    lines = []
    from rl_contract.rows import SELECTION_METRIC

    for e in [] if os.environ.get("DOUBLE_SKIP_EVAL") else eval_envs:
        # prime-rl's classic eval rows carry the env's metrics, and no env name
        # (rl_contract/rows.py); the one metric simulated is the selection label, 1 on every row
        marks = {SELECTION_METRIC: 1.0} if SELECTION_METRIC in zero_weight_metrics(e) else {}
        rows = load_rows(e, "eval")[: int(e.get("num_examples", -1)) if int(e.get("num_examples", -1)) > 0 else None]
        if os.environ.get("DOUBLE_EVAL_ROWS"):
            rows = rows[:int(os.environ["DOUBLE_EVAL_ROWS"])]
        for r in rows:
            # the env's id without the run's tag (`_<6 hex>`, the selection env's): as in a real
            # trainer, no name a run picks for itself enters a draw, so one seed gives one result
            env_key = re.sub(r"_[0-9a-f]{6}$", "", e["id"])
            ok = frac("eval", r.get("example_id"), env_key, *([json.dumps(e["args"], sort_keys=True)] if e.get("args") else [])) < skill
            lines.append(json.dumps({
                "example_id": r.get("example_id"), "prompt": r.get("prompt"),
                "answer": r.get("answer"), "info": r.get("info"),
                "completion": [{"role": "assistant", "content": "(double)"}],
                "reward": float(ok), "metrics": {"is_correct": float(ok), **marks},
                "is_completed": True, "is_truncated": False}) + "\n")
    if lines:
        write_eval_rows(path, lines)
    torn = os.environ.get("DOUBLE_TORN_EVAL")
    if torn and (torn == "1" or out.resolve().parent.name == torn) and path.exists():
        text = path.read_text()
        path.write_text(text[:len(text) - len(text.splitlines()[-1]) // 2 - 1])
    print("RL training finished!")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
