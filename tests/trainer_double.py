"""A test double of prime-rl's `rl` entrypoint (used only by tests and the demo), both
generations: a config with [[orchestrator.train.source]] is the current generation's
(trainer_double_current.py, which also holds `evals`); anything else the classic one's,
described here. Around either, tests/double_launcher.py does what prime-rl's launcher does:
refuses a node with too few GPUs or W&B with no key, starts the process tree (inference,
torchrun with its ranks in sessions of their own, tail) and cleans it up.

Each behaviour copies prime-rl v0.5.1.dev209 (09e2977) as rl_contract/classic.py states it,
with the lines cited there, through the same functions the driver reads the layout with:
`rl @ a.toml @ b.toml --max-steps N --output-dir X ...` with prime-rl's composition (later files
and CLI flags win, tables deep-merge, lists are replaced whole); [trainer] and [orchestrator]
required; a resume at F reads checkpoints/step_F, run_default/checkpoints/step_F and the step's
broadcast, never weights/; a launch into an output dir holding run_default/control/evicted.txt
aborts at once. A fresh run evaluates the base model into rollouts/step_0 (eval_base_model);
the batch of trainer step s is saved under rollouts/step_{s-1}, so a launch from F to M writes
train rows to step_F .. step_{M-1} and its final eval alone to step_M. The zero-advantage
filter is on unless the config's `filters` list turns it off: a batch with no group whose
rewards differ is drawn again, and the third such attempt at one step writes
control/evicted.txt and exits 1. HF weights (weights/step_N) hold config, generation config,
tokenizer and one model.safetensors, or DOUBLE_WEIGHT_SHARDS shards with an index (prime-rl
shards above 5 GB: the model's size decides). It prints "RL training finished!" and exits 0.
It does no learning: eval correctness is a deterministic function of the train envs and the
resume step.

Fault knobs (environment): DOUBLE_CRASH_AT_STEP=k exits 1 at step k; DOUBLE_HANG_AT_STEP=k
sleeps forever at step k; DOUBLE_STEP_SECONDS=s sleeps s per step; DOUBLE_SKIP_EVAL=1 writes no
eval file; DOUBLE_EVAL_ROWS=n writes only n eval rows; DOUBLE_ERRORED_EVAL_ROWS=i,j,... makes
those eval rows errored (a non-null `error`); DOUBLE_TORN_EVAL=1 (or =ARM, e.g. iter_1: that arm
only) cuts the last eval line in half; DOUBLE_SKIP_CHECKPOINT=1 writes no checkpoint trees;
DOUBLE_FAILED_EVAL_ROLLOUTS=k makes the first k rollouts of the final eval raise, as an env-server
timeout does: prime-rl drops them from the eval file and its orchestrator logs, per eval env,
"n/total (p%) rollouts failed" after "Running final evals" (orchestrator/envs.py:206-209,224-227,
236-243 and orchestrator.py:814@09e2977; rl_contract/classic.py), into OUT/logs/orchestrator.log
and, through `rl`'s tail of it, the launch's own log. Each still exits 0.

Production shape (an arm on real GPUs is silent for long stretches at known places):
DOUBLE_STARTUP_SECONDS=s sleeps s before its first step (vLLM and the trainer starting; an eval
launch before its first row); DOUBLE_EVAL_SECONDS=s sleeps s after the last step and then writes
the final eval file in one write, as a full-split eval does; DOUBLE_EVAL_ROW_SECONDS=s instead
streams the eval rows one every s seconds; DOUBLE_RANK_IGNORES_TERM=1 and
DOUBLE_TORCHRUN_GRACE_SECONDS=s (tests/double_launcher.py) wedge a rank's and torchrun's
teardowns; DOUBLE_IGNORE_TERM=1 makes the launcher ignore
SIGTERM (only SIGKILL stops it; its tree is then left to the caller); DOUBLE_TRAIN_SKILL=p
solves a train rollout with probability p (0 or 1: no group has a reward spread, as for a
dataset the student never or always solves). DOUBLE_SHAPE_ARM=DIR applies these,
DOUBLE_HANG_AT_STEP and DOUBLE_FAILED_EVAL_ROLLOUTS to that arm only (its directory name, e.g.
run_a_best_from_iter0, or `probe` for the gradient probe's one-step launch). Each launch's entry in DOUBLE_LAUNCH_LOG
lists, as `alive_before`, the pids of earlier launches and of their trees still running when it
started: a second arm started beside a live one (or its orphaned rank) shows there.

DOUBLE_ROW_SERVER=SOCKET (the suite sets it) makes each load through verifiers (an env's rows, its
metrics, a taskset's tasks) through tests/row_server.py, a warm interpreter that forks a fresh
process per load (the same code, without the verifiers import); a failed request loads in the
launch itself.
DOUBLE_ROW_CACHE=DIR (the suite sets it) keeps each loaded env's rows in DIR, keyed on the env
id, its args and a hash of its installed source, so the hub env is loaded through verifiers once
per test process rather than once per launch (`cached_load`).

Test plumbing, not prime-rl's behaviour: `main(argv, in_process_pid=PID)` runs a launch in a
thread of the test process (tests/inprocess_trainer.py) with no launcher tree; its waits
(`pause`) end when STOP is set, as a process's end on its signal, and a load the row server
declines runs in a process of its own (`--through-verifiers`: verifiers' loader sets signal
handlers, which only a main thread may). A process run of this file never sets STOP. While a
thread's launch runs, `thread_marker` names a file that says so, so that a launch in any process
lists it in `alive_before` as it lists a live process.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
import time
from pathlib import Path


if __name__ == "__main__":   # one module, whether run or imported (the current half reads ARM)
    sys.modules.setdefault("trainer_double", sys.modules[__name__])


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


def load_through_verifiers(env_id: str, args: dict, split: str) -> list[dict]:
    """The env's rows as prime-rl's orchestrator gets them: `vf.load_environment(id, **args)`
    (orchestrator/envs.py:35@09e2977), then its train dataset (buffer.py:32) or its eval
    dataset (envs.py:174)."""
    import verifiers as vf

    env = vf.load_environment(env_id, **args)
    ds = env.get_dataset() if split == "train" else env.get_eval_dataset()
    return [dict(r) for r in ds]


def metrics_through_verifiers(env_id: str, args: dict) -> list[str]:
    """The names of the env's zero-weight rubric functions. prime-rl's eval rows carry every
    reward function's score in `metrics`, zero-weight ones included (rl_contract/rows.py:10-11,
    verifiers/utils/save_utils.py:196-314@58b119f); the double sets only the selection label
    among them (rl_contract/rows.py:17-19), so it needs only their names."""
    import verifiers as vf

    rubric = vf.load_environment(env_id, **args).rubric
    rubrics = getattr(rubric, "rubrics", [rubric])
    return [getattr(f, "__name__", "") for r in rubrics
            for f, w in zip(getattr(r, "funcs", []), getattr(r, "weights", [])) if w == 0]


def through_verifiers(what: str, env_id: str, args: dict) -> list:
    """One load a launch makes through verifiers: `train` or `eval` rows, the env's `metrics`,
    or a v1 `taskset`'s tasks. tests/row_server.py runs this same function in a warm
    interpreter."""
    if what == "metrics":
        return metrics_through_verifiers(env_id, args)
    if what == "taskset":
        from trainer_double_current import tasks_through_verifiers

        return tasks_through_verifiers(env_id, args)
    return load_through_verifiers(env_id, args, what)


def served_or_loaded(what: str, env_id: str, args: dict) -> list:
    """through_verifiers, forked from the warm interpreter at DOUBLE_ROW_SERVER when one answers
    (tests/row_server.py), else in this launch: an env that cannot load fails here as it would
    without the server."""
    server = os.environ.get("DOUBLE_ROW_SERVER")
    if server:
        import tempfile

        from row_server import request   # this file's folder is sys.path[0]

        with tempfile.TemporaryDirectory(prefix="double-rows-") as tmp:
            out = str(Path(tmp) / "rows.json")
            if request(server, env_id, args, what, out):
                return json.loads(Path(out).read_text())
    if threading.current_thread() is not threading.main_thread():
        return loaded_in_own_process(what, env_id, args)
    return through_verifiers(what, env_id, args)


def loaded_in_own_process(what: str, env_id: str, args: dict) -> list:
    """through_verifiers in a process of its own, for a launch running in a thread of the test
    process (tests/inprocess_trainer.py): verifiers' loader sets signal handlers, which only a
    main thread may. An env that cannot load fails the launch with the load's own traceback."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="double-rows-") as tmp:
        out = Path(tmp) / "rows.json"
        r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--through-verifiers",
                            what, env_id, json.dumps(args), str(out)], capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr)
            raise RuntimeError(f"loading {env_id} through verifiers failed (exit {r.returncode})")
        return json.loads(out.read_text())


def load_rows(env_block: dict, split: str) -> list[dict]:
    """The env's rows, loaded through verifiers as prime-rl loads them (or from the cache)."""
    args = env_block.get("args") or {}
    return cached_load(env_block["id"], [args, split],
                       lambda: served_or_loaded(split, env_block["id"], args))


def arm_of(output_dir: str | None) -> str:
    """The arm directory a launch writes under: ARM/prime_out, or ARM/prime_out/final_eval/step_N."""
    parts = Path(output_dir or "outputs").resolve().parts
    return parts[parts.index("prime_out") - 1] if "prime_out" in parts else ""


ARM = ""   # this launch's arm (set in main)


# the pids of launches in threads of the test process start here, above any pid Linux gives out
# (its pid_max is at most 2**22)
IN_PROCESS_PIDS = 1 << 22


class Stopped(Exception):
    """An in-process launch was stopped (tests/inprocess_trainer.py): it ends where it waits,
    as a process ends on its signal."""


# set when an in-process launch is stopped; a process run of this file never sets it, so its
# waits are plain sleeps
STOP = threading.Event()


def pause(seconds: float) -> None:
    """Sleep `seconds` (a step's length, a hang, a slow start or eval), or end the launch here
    once it is stopped."""
    if STOP.wait(seconds):
        raise Stopped


def knob(name: str, default: str = "") -> str:
    """A fault or shape knob's value for this launch (DOUBLE_SHAPE_ARM limits the shape knobs
    and the hang to one arm)."""
    only = os.environ.get("DOUBLE_SHAPE_ARM")
    shaped = name in ("DOUBLE_STARTUP_SECONDS", "DOUBLE_EVAL_SECONDS", "DOUBLE_EVAL_ROW_SECONDS",
                      "DOUBLE_IGNORE_TERM", "DOUBLE_HANG_AT_STEP", "DOUBLE_TRAIN_SKILL",
                      "DOUBLE_RANK_IGNORES_TERM", "DOUBLE_TORCHRUN_GRACE_SECONDS", "DOUBLE_TRAIN_ERRORED",
                      "DOUBLE_FAILED_EVAL_ROLLOUTS")
    if shaped and only and only != ARM:
        return default
    return os.environ.get(name, default) or default


def thread_marker(launch_log: Path, pid: int) -> Path:
    """A file that exists while the launch `pid` runs in a thread of the test process
    (tests/inprocess_trainer.py makes and removes it): how a launch in any process tells
    whether that one still runs."""
    return Path(f"{launch_log}.threads") / str(pid)


def still_running(pids: list[int], launch_log: Path) -> list[int]:
    alive = []
    for pid in pids:
        if pid >= IN_PROCESS_PIDS:   # a launch in a thread of the test process
            if thread_marker(launch_log, pid).exists():
                alive.append(pid)
            continue
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
        pause(float(knob("DOUBLE_EVAL_SECONDS", "0")))
        with open(path, mode) as f:
            f.write("".join(lines))
        return
    with open(path, mode) as f:
        for line in lines:
            pause(per_row)
            f.write(line)
            f.flush()


def zero_weight_metrics(env_block: dict) -> list[str]:
    """The names of the env's zero-weight rubric functions (its metrics), as prime-rl's rows
    carry them (loaded once per installed source, like the rows)."""
    args = env_block.get("args") or {}
    return cached_load(env_block["id"], [args, "metrics"],
                       lambda: served_or_loaded("metrics", env_block["id"], args))


def main(argv: list[str], in_process_pid: int | None = None) -> int:
    """`rl` (or, with --evals first, `evals`). `in_process_pid`: this launch runs in a thread of
    the test process under that pid (tests/inprocess_trainer.py), with no process tree of its
    own; its refusals and its writes are the same."""
    global ARM
    as_evals = bool(argv) and argv[0] == "--evals"
    if as_evals:   # the standalone evals entrypoint: --evals @ evals.toml --flags
        argv = argv[1:]
    cfg = parse_args(argv)
    ARM = arm_of(cfg.get("output_dir"))
    if knob("DOUBLE_IGNORE_TERM"):
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.environ.get("DOUBLE_LAUNCH_LOG"):
        log = Path(os.environ["DOUBLE_LAUNCH_LOG"])
        earlier = [json.loads(x)["pid"] for x in log.read_text().splitlines()] if log.exists() else []
        trees = Path(str(log) + ".trees")
        earlier += [pid for x in (trees.read_text().splitlines() if trees.exists() else [])
                    for pid in json.loads(x)["pids"]]
        with open(log, "a") as f:
            f.write(json.dumps({"pid": in_process_pid or os.getpid(), "output_dir": cfg.get("output_dir"), "argv": argv,
                                "alive_before": still_running(earlier, log), "ts": time.time()}) + "\n")
    pause(float(knob("DOUBLE_STARTUP_SECONDS", "0")))
    generation = "current" if "source" in cfg.get("orchestrator", {}).get("train", {}) else "classic"
    if as_evals:
        import trainer_double_current as current

        return current.evals(cfg)
    for required in ("trainer", "orchestrator"):
        if required not in cfg:
            print(f"--{required}  Field required", file=sys.stderr)
            return 1
    import double_launcher

    refused = double_launcher.refusal(cfg, generation)
    if refused:
        print(refused, file=sys.stderr)
        return 1
    tree = double_launcher.Tree(cfg, generation) if in_process_pid is None else None
    if generation == "current":
        import trainer_double_current as current

        rc = current.rl(cfg)
    else:
        rc = rl_classic(cfg)
    if tree is not None:
        tree.cleanup()   # entrypoints/rl.py:358-360@09e2977, :405-407@559b447: after the run, as after a failure
    return rc


def zero_advantage_enforced(orch: dict) -> bool:
    """configs/orchestrator.py:505-509,583@09e2977: the default filters enforce zero-advantage
    filtering; a `filters` list replaces the defaults whole."""
    filters = orch.get("filters")
    if filters is None:
        return True
    return any(f.get("type") == "zero_advantage" and f.get("enforce", True) for f in filters)


def write_weights(w: Path, step: int, skill: float) -> None:
    """trainer/ckpt.py:354-367@09e2977: weights (sharded above 5 GB, trainer/weights.py:82-113;
    how many shards is the model's size: DOUBLE_WEIGHT_SHARDS), config, generation config and
    tokenizer, then STABLE."""
    w.mkdir(parents=True, exist_ok=True)
    shards = int(os.environ.get("DOUBLE_WEIGHT_SHARDS", "1") or 1)
    payload = json.dumps({"step": step, "skill": skill})
    if shards == 1:
        (w / "model.safetensors").write_text(payload)
    else:
        names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
        for name in names:
            (w / name).write_text(payload)
        (w / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": 0}, "weight_map": {f"layer.{i}": n for i, n in enumerate(names)}}))
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        (w / name).write_text(json.dumps({"step": step}))
    (w / "STABLE").write_text("")


def write_inference_config(cfg: dict, out: Path) -> None:
    """OUT/configs/inference.toml, the resolved [inference] the server starts on (entrypoints/
    rl.py:54-68,84-85,162@09e2977): the shared model's name, its tool-call parser resolved from
    that name where it is "auto" (configs/inference.py:60,77-78: tests/prime_rl_tool_calls.py)."""
    import copy

    import tomli_w
    from prime_rl_tool_calls import resolve

    inf = copy.deepcopy(cfg["inference"])
    model = inf.setdefault("model", {})
    model.setdefault("name", (cfg.get("model") or {}).get("name", "Qwen/Qwen3-0.6B"))
    parser = resolve(model.pop("tool_call_parser", "auto"), str(model["name"]), "classic")
    if parser is not None:   # exclude_none: a None parser is not written
        model["tool_call_parser"] = parser
    (out / "configs").mkdir(parents=True, exist_ok=True)
    (out / "configs" / "inference.toml").write_text(tomli_w.dumps(inf))


def rl_classic(cfg: dict) -> int:
    """The classic `rl`, as rl_contract/classic.py states it (each line cited there)."""
    from rl_contract.classic import FINAL_EVALS_MESSAGE, MAX_EMPTY_BATCH_ATTEMPTS, ClassicLayout

    layout = ClassicLayout()
    out = Path(cfg.get("output_dir", "outputs"))
    orch = cfg["orchestrator"]
    max_steps = int(cfg["max_steps"])
    rpe = int(orch.get("rollouts_per_example", 1))
    batch = int(orch.get("batch_size", 128))
    if batch % rpe:
        print("batch_size must be divisible by rollouts_per_example", file=sys.stderr)
        return 1
    # each launch's orchestrator log starts empty (entrypoints/rl.py:142-143,245)
    layout.orchestrator_log(out).parent.mkdir(parents=True, exist_ok=True)
    layout.orchestrator_log(out).write_text("")
    if cfg.get("inference") is not None:
        write_inference_config(cfg, out)
    ckpt = cfg.get("ckpt") or {}
    resume = ckpt.get("resume_step")
    start = 0
    if resume is not None:
        # a resume reads the trainer's and orchestrator's checkpoints and the step's broadcast,
        # never weights/step_F (trainer/rl/train.py:133-137; orchestrator.py:295,309-313)
        for tree in layout.resume_trees(out, int(resume)):
            if not tree.exists():
                print(f"FileNotFoundError: {tree}", file=sys.stderr)
                return 1
        start = int(resume)
    if start >= max_steps:
        print("KeyError: 'perf/peak_memory'", file=sys.stderr)
        return 1
    evicted = layout.evicted_file(out)
    if evicted.exists():   # orchestrator.py:326-329
        print(f"RuntimeError: Run evicted by trainer: {evicted.read_text().strip()}", file=sys.stderr)
        return 1
    train_envs = orch.get("train", {}).get("env") or [{"id": "reverse-text"}]
    eval_cfg = orch.get("eval") or {}
    eval_envs = eval_cfg.get("env") or []
    train_rows = {e["id"]: load_rows(e, "train") for e in train_envs}
    # behaviour is a function of the data, not of package names (which carry a per-run tag)
    content = {k: hashlib.sha256(json.dumps([r.get("question", r.get("prompt")) for r in v],
                                            default=str).encode()).hexdigest()[:12]
               for k, v in train_rows.items()}
    skill = 0.3 + 0.25 * frac(sorted(content.values()), resume, len(sum(train_rows.values(), [])))
    crash = int(os.environ.get("DOUBLE_CRASH_AT_STEP", "0") or 0)
    hang = int(knob("DOUBLE_HANG_AT_STEP", "0"))
    step_s = float(os.environ.get("DOUBLE_STEP_SECONDS", "0") or 0)
    interval = int(ckpt.get("interval") or max_steps)
    filtering = zero_advantage_enforced(orch)
    rdir = out / "run_default"
    # orchestrator.py:106-110: the orchestrator's resolved config, None values left out (the
    # double writes the composed [orchestrator] table: its eval sampling is what the driver reads)
    (rdir / "control").mkdir(parents=True, exist_ok=True)
    import tomli_w
    (rdir / "control" / "orch.toml").write_text(tomli_w.dumps(orch))
    if eval_envs and resume is None and eval_cfg.get("eval_base_model", True):
        # a fresh run evaluates the base model at step 0 (eval_utils.py:22-24)
        write_eval_rows(layout.eval_file(out, 0), eval_lines(eval_envs, 0.2))
    for step in range(start + 1, max_steps + 1):   # the trainer's steps; rows filed below
        if step == crash:
            print(f"RuntimeError: injected crash at step {step}", file=sys.stderr)
            return 1
        if step == hang:
            while True:
                pause(60)
        pause(step_s)
        rows_step = layout.rows_step(step)   # the orchestrator's step when it samples
        for attempt in range(MAX_EMPTY_BATCH_ATTEMPTS):   # orchestrator.py:422-450
            rows = sample_batch(train_rows, content, batch, rpe, step, attempt, skill)
            live = {(r["env_name"], r["example_id"]) for r in rows if r["reward"] > 0} & \
                {(r["env_name"], r["example_id"]) for r in rows if r["reward"] <= 0}
            if live or not filtering:
                break
            if attempt == MAX_EMPTY_BATCH_ATTEMPTS - 1:
                reason = (f"All {len(rows)} rollouts were filtered out on {MAX_EMPTY_BATCH_ATTEMPTS} "
                          f"consecutive attempts at step {rows_step}")
                evicted.write_text(reason)
                print(f"RuntimeError: {reason}", file=sys.stderr)
                return 1
        for r in rows:
            key = (r["env_name"], r["example_id"])
            r["is_filtered"] = filtering and key not in live
            r["filters"] = {"zero_advantage": r["is_filtered"]}
        write_train_rows(layout.train_file(out, rows_step), rows)
        if (step % interval == 0 or step == max_steps) and not os.environ.get("DOUBLE_SKIP_CHECKPOINT"):
            trainer, weights, orch_ckpt, broadcast = layout.checkpoint_trees(out, step)
            (trainer / "trainer").mkdir(parents=True, exist_ok=True)
            (trainer / "trainer" / "__0_0.distcp").write_text(f"step {step}")
            (trainer / "STABLE").write_text("")
            write_weights(weights, step, skill)
            orch_ckpt.mkdir(parents=True, exist_ok=True)
            (orch_ckpt / "orchestrator").mkdir(parents=True, exist_ok=True)
            broadcast.mkdir(parents=True, exist_ok=True)
            (broadcast / "STABLE").write_text("")
    # the final eval alone lands in step_max (orchestrator.py:813-834): every eval env's rows in
    # one file, in config order, unlabelled
    path = layout.eval_file(out, layout.final_eval_step(max_steps))
    if eval_envs:
        orchestrator_says(out, "info", FINAL_EVALS_MESSAGE)   # orchestrator.py:814
    failed = int(knob("DOUBLE_FAILED_EVAL_ROLLOUTS", "0"))
    lines = [] if os.environ.get("DOUBLE_SKIP_EVAL") else \
        eval_lines(eval_envs, skill, failed=failed, log=lambda m: orchestrator_says(out, "warning", m))
    if lines:
        write_eval_rows(path, lines)
    torn = os.environ.get("DOUBLE_TORN_EVAL")
    if torn and (torn == "1" or out.resolve().parent.name == torn) and path.exists():
        text = path.read_text()
        path.write_text(text[:len(text) - len(text.splitlines()[-1]) // 2 - 1])
    print("RL training finished!")
    return 0


def sample_batch(train_rows: dict, content: dict, batch: int, rpe: int, step: int, attempt: int,
                 skill: float) -> list[dict]:
    """One batch: batch // rpe prompts, one group each, drawn by a seeded function of the step
    (and the attempt: a redrawn batch is new rollouts)."""
    rows = []
    taken: set = set()
    for j in range(batch // rpe):
        env_id = sorted(train_rows, key=content.get)[j % len(train_rows)]
        pool = train_rows[env_id]
        i = int(frac(step, j, content[env_id], *([attempt] if attempt else [])) * len(pool))
        while (env_id, i) in taken and len(taken) < sum(map(len, train_rows.values())):
            i = (i + 1) % len(pool)     # one group per example in a step, as prime-rl draws
        taken.add((env_id, i))
        ex = pool[i]
        for k in range(rpe):
            ok = frac("train", step, j, k, *([attempt] if attempt else [])) < \
                float(knob("DOUBLE_TRAIN_SKILL", str(skill)))
            rows.append({
                "example_id": ex.get("example_id", j), "env_name": env_id,
                "prompt": ex.get("prompt"), "answer": ex.get("answer"), "info": ex.get("info"),
                "completion": [{"role": "assistant", "content": f"(double) {'right' if ok else 'wrong'} {k}"}],
                "reward": float(ok), "metrics": {"is_correct": float(ok)}, "error": None,
                "is_completed": True, "is_truncated": False, "advantage": 0.0,
                "timing": {"total_ms": 1.0}, "filters": {}, "is_filtered": False,
            })
    return rows


def orchestrator_says(out: Path, level: str, message: str) -> None:
    """One line of the orchestrator's log as its logger formats it (utils/logger.py:100-114,142
    @09e2977; the colours LOGURU_FORCE_COLORS turns on, rl.py:254, left out): into
    OUT/logs/orchestrator.log, where `rl` sends the orchestrator's stdout (rl.py:245-249), and
    into `rl`'s own stdout, the launch's log, through its `tail -F` of that file (rl.py:324-327)."""
    from rl_contract.classic import ClassicLayout

    # the clock time is fixed: a launch in a thread and the same launch as a process write the
    # same files (tests/test_inprocess_trainer.py), whichever second they cross
    line = f"00:00:00 {level.upper():>7} {message}"
    with open(ClassicLayout().orchestrator_log(out), "a") as f:
        f.write(line + "\n")
    print(line, flush=True)


def write_train_rows(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def eval_lines(eval_envs: list[dict], skill: float, failed: int = 0, log=None) -> list[str]:
    """Every eval env's rows, in config order, unlabelled: prime-rl's classic eval rows carry the
    env's metrics and no env name (rl_contract/rows.py); the one metric simulated is the
    selection label, 1 on every row. The first `failed` rollouts (in config order) raise: they
    are no row, and `log` gets, for each env that lost any, the orchestrator's warning
    (orchestrator/envs.py:236-243@09e2977: only the rollouts that came back are kept)."""
    from rl_contract.classic import failed_rollouts_message
    from rl_contract.rows import SELECTION_METRIC

    lines = []
    for e in eval_envs:
        marks = {SELECTION_METRIC: 1.0} if SELECTION_METRIC in zero_weight_metrics(e) else {}
        n = int(e.get("num_examples", -1))
        rows = load_rows(e, "eval")[: n if n > 0 else None]
        if os.environ.get("DOUBLE_EVAL_ROWS"):
            rows = rows[:int(os.environ["DOUBLE_EVAL_ROWS"])]
        errored = {int(x) for x in os.environ.get("DOUBLE_ERRORED_EVAL_ROWS", "").split(",") if x}
        raised = min(failed, len(rows))
        failed -= raised
        if raised and log is not None:
            log(failed_rollouts_message(raised, len(rows)))
        for i, r in enumerate(rows):
            if i < raised:
                continue
            # the env's id without the run's tag (`_<6 hex>`, the selection env's): as in a real
            # trainer, no name a run picks for itself enters a draw, so one seed gives one result
            env_key = re.sub(r"_[0-9a-f]{6}$", "", e["id"])
            ok = frac("eval", r.get("example_id"), env_key,
                      *([json.dumps(e["args"], sort_keys=True)] if e.get("args") else [])) < skill
            error = "ModelError: the inference request failed" if i in errored else None
            lines.append(json.dumps({
                "example_id": r.get("example_id"), "prompt": r.get("prompt"),
                "answer": r.get("answer"), "info": r.get("info"),
                "completion": [{"role": "assistant", "content": "(double)"}],
                "reward": float(ok and not error), "error": error,
                "metrics": {"is_correct": float(ok and not error), **marks},
                "is_completed": error is None, "is_truncated": False}) + "\n")
    return lines


if __name__ == "__main__":
    if sys.argv[1:2] == ["--through-verifiers"]:   # WHAT ENV_ID ARGS_JSON OUT: one load
        what, env_id, args, out = sys.argv[2:6]
        Path(out).write_text(json.dumps(through_verifiers(what, env_id, json.loads(args)), default=str))
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
