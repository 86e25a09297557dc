#!/usr/bin/env python3
"""CPU stand-in for classic prime-rl's trainer (09e2977):
    torchrun ... -m prime_rl.trainer.rl.train @ OUT/configs/trainer.toml [--a.b VALUE ...]
(bin/torchrun execs this with the arguments after `-m prime_rl.trainer.rl.train`).

It trains nothing. It moves through the files the real trainer reads and writes, in the real
trainer's order, so prime-rl's own orchestrator and `rl` launcher run unchanged around it. Every
behaviour copied names the line of prime-rl it copies (paths under the checkout, @09e2977):

  config      `@ FILE` then `--a.b VALUE` overrides; fields read: output_dir, max_steps,
              ckpt.{interval,resume_step,output_dir} (packages/prime-rl-configs/src/prime_rl/
              configs/trainer.py; the launcher writes them into configs/trainer.toml)
  run dir     RUN = output_dir/run_default: the launcher puts the orchestrator there
              (packages/prime-rl-configs/src/prime_rl/utils/validation.py:141-142) and the
              trainer's multi-run manager reads each run at output_dir/<run id>
              (src/prime_rl/trainer/runs.py:471-472)
  start step  0, or on resume ckpt.resume_step, -1 meaning the newest step_* under
              <ckpt base>/checkpoints (src/prime_rl/trainer/rl/train.py:133-137;
              src/prime_rl/utils/pathing.py:88-91,100-107; the ckpt base is ckpt.output_dir or
              output_dir: src/prime_rl/trainer/ckpt.py:475-476)
  the loop, for progress.step = p (src/prime_rl/trainer/rl/train.py:252-314, 656):
    1. p > 0: "broadcast" = touch RUN/broadcasts/step_p/STABLE (train.py:264-266 (filesystem
       broadcasts every step, the last ones too); src/prime_rl/trainer/rl/broadcast/
       filesystem.py:72-76,90,107-110)
    2. ckpt.interval set, p neither the loop's first nor its last step, p % interval == 0:
       trainer checkpoint at <ckpt base>/checkpoints/step_p/trainer (train.py:279-291;
       src/prime_rl/trainer/ckpt.py:144-146,231-245 — no STABLE for trainer checkpoints)
    3. p >= max_steps: leave the loop (train.py:313-314)
    4. wait for RUN/rollouts/step_p/train_rollouts.bin (src/prime_rl/transport/filesystem.py:10,
       53-58: the receiver reads the step it expects next, starting at progress.step: :46-51) and
       decode it with prime-rl's own msgspec.msgpack.Decoder(type=TrainingBatch)
       (src/prime_rl/transport/base.py:37; TrainingBatch: src/prime_rl/transport/types.py:39-44)
    5. p += 1 (train.py:656)
  after the loop: the final checkpoint at step max_steps when ckpt is configured
       (train.py:672-676)

  with every checkpoint while ckpt.weights is on: the weight checkpoint <ckpt base>/weights/step_N
       (save_weights: the base model's config and tokenizer, a safetensors file with no tensor)

What it does not do: no weights (the real broadcast dir also holds the model's safetensors,
filesystem.py:79, and the weight checkpoint the model's tensors), no DCP contents, no metrics.
Instead it appends one JSON line per step to
<output_dir>/standin_trainer.jsonl: {"step", "examples", "nonzero_advantages", "batch_step"}.

Knobs: PRL_TRAINER_FAIL_AT_STEP=k exits 3 when step k's batch has arrived (before its update);
PRL_TRAINER_STEP_SECONDS=s spends s seconds on each step's update (a GPU's time).
SIGTERM/SIGINT: exits at once (143/130).
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import time
import tomllib
from pathlib import Path

POLL_S = 0.1


def _value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse(argv: list[str]) -> dict:
    """The trainer config from `@ FILE` (TOML) and `--a.b VALUE` / `--a.b=VALUE` / `--flag`."""
    cfg: dict = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "@" or (arg.startswith("@") and len(arg) > 1):
            path = argv[i + 1] if arg == "@" else arg[1:]
            i += 2 if arg == "@" else 1
            _merge(cfg, tomllib.loads(Path(path).read_text()))
            continue
        if not arg.startswith("--"):
            sys.exit(f"trainer stand-in: unexpected argument {arg!r}")
        name, eq, val = arg[2:].partition("=")
        if not eq:
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                val, i = argv[i + 1], i + 1
            else:
                val = "true"
        node = cfg
        keys = [k.replace("-", "_") for k in name.split(".")]
        for k in keys[:-1]:
            if not isinstance(node.get(k), dict):
                node[k] = {}
            node = node[k]
        node[keys[-1]] = _value(val)
        i += 1
    return cfg


def _merge(into: dict, new: dict) -> None:
    for k, v in new.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v


def training_batch_type():
    """prime-rl's own TrainingBatch (src/prime_rl/transport/types.py:39-44@09e2977), loaded from
    its file: the package __init__ (src/prime_rl/transport/__init__.py) pulls in zmq and the
    trainer's run manager, which the stand-in does not need."""
    spec = importlib.util.find_spec("prime_rl")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("trainer stand-in: prime_rl is not importable in this interpreter")
    path = Path(list(spec.submodule_search_locations)[0]) / "transport" / "types.py"
    mod_spec = importlib.util.spec_from_file_location("_prl_transport_types", path)
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    return module.TrainingBatch


def latest_step(ckpt_dir: Path) -> int | None:
    # src/prime_rl/utils/pathing.py:88-91,100-107@09e2977: the newest step_* (no STABLE needed)
    steps = sorted(int(p.name.split("_")[-1]) for p in ckpt_dir.glob("step_*"))
    return steps[-1] if steps else None


def touch(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "STABLE").touch()


def save_ckpt(ckpt_dir: Path, step: int) -> None:
    # src/prime_rl/trainer/ckpt.py:144-146,241-245@09e2977: <ckpt dir>/step_N/trainer (a DCP dir there)
    d = ckpt_dir / f"step_{step}" / "trainer"
    d.mkdir(parents=True, exist_ok=True)
    (d / "standin_progress.json").write_text(json.dumps({"step": step}))
    print(f"[trainer stand-in] saved checkpoint at step {step}: {d}", flush=True)


def save_weights(weights_dir: Path, step: int, model: str | None) -> None:
    """The weight checkpoint <ckpt base>/weights/step_N, written with each checkpoint while
    ckpt.weights is set (its default: configs/trainer.py:370; ckpt.py:295,477-485; train.py:296-302,
    678-681@09e2977): the model's config, generation config and tokenizer (ckpt.py:354-367), the
    weights as safetensors, then STABLE (ckpt.py:315-319,433). The stand-in has no weights: its
    safetensors file is a valid one holding no tensor, and its config and tokenizer are the base
    model directory's."""
    import shutil

    d = weights_dir / f"step_{step}"
    d.mkdir(parents=True, exist_ok=True)
    src = Path(model) if model else None
    if src is not None and src.is_dir():
        for f in src.iterdir():
            if f.is_file() and (f.suffix == ".json" or f.name.startswith("tokenizer")):
                shutil.copyfile(f, d / f.name)
    header = json.dumps({"__metadata__": {"format": "pt", "stand_in": "trainer_standin_classic"}}).encode()
    header += b" " * (-len(header) % 8)
    (d / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    (d / "STABLE").touch()
    print(f"[trainer stand-in] saved weight checkpoint at step {step}: {d}", flush=True)


def main(argv: list[str]) -> int:
    for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        signal.signal(sig, lambda *_a, _c=code: os._exit(_c))
    cfg = parse(argv)
    out = Path(cfg.get("output_dir") or "outputs")
    max_steps = cfg.get("max_steps")
    ckpt = cfg.get("ckpt")                  # None: no checkpoints at all (ckpt.py:473-474)
    interval = (ckpt or {}).get("interval")
    ckpt_dir = Path((ckpt or {}).get("output_dir") or out) / "checkpoints"
    # ckpt.weights defaults on (configs/trainer.py:370); `weights = null` can't be said in TOML
    weights_dir = Path((ckpt or {}).get("output_dir") or out) / "weights"
    save_weights_too = ckpt is not None and not (ckpt or {}).get("skip_gather_master_weights")
    model = (cfg.get("model") or {}).get("name")
    run = out / "run_default"
    fail_at = os.environ.get("PRL_TRAINER_FAIL_AT_STEP")
    fail_at = int(fail_at) if fail_at not in (None, "") else None
    log = out / "standin_trainer.jsonl"

    step = 0
    resume = (ckpt or {}).get("resume_step")
    if ckpt is not None and resume is not None:
        step = latest_step(ckpt_dir) if resume == -1 else int(resume)
        step = step or 0
        print(f"[trainer stand-in] resuming training from checkpoint step {step}", flush=True)
    decoder = None
    first = True
    print(f"[trainer stand-in] output_dir={out} max_steps={max_steps} ckpt.interval={interval} "
          f"start={step}", flush=True)
    while True:
        last = max_steps is not None and step == max_steps
        if step > 0:
            touch(run / "broadcasts" / f"step_{step}")
        if ckpt is not None and interval and not (first or last) and step % interval == 0:
            save_ckpt(ckpt_dir, step)
            if save_weights_too:
                save_weights(weights_dir, step, model)
        if max_steps is not None and step >= max_steps:
            break
        batch_file = run / "rollouts" / f"step_{step}" / "train_rollouts.bin"
        while not batch_file.exists():
            time.sleep(POLL_S)
        if decoder is None:
            import msgspec

            decoder = msgspec.msgpack.Decoder(type=training_batch_type())
        batch = decoder.decode(batch_file.read_bytes())
        # a step's update takes time on a GPU; PRL_TRAINER_STEP_SECONDS stands in for it
        time.sleep(float(os.environ.get("PRL_TRAINER_STEP_SECONDS") or 0))
        if fail_at is not None and step == fail_at:
            print(f"[trainer stand-in] PRL_TRAINER_FAIL_AT_STEP={fail_at}: exiting 3", flush=True)
            return 3
        record = {"step": step, "batch_step": batch.step, "examples": len(batch.examples),
                  "nonzero_advantages": sum(1 for e in batch.examples if e.advantage)}
        with log.open("a") as f:
            f.write(json.dumps(record) + "\n")
        print(f"[trainer stand-in] Step {step}: {record}", flush=True)
        step += 1
        first = False
    if ckpt is not None:
        save_ckpt(ckpt_dir, step)
        if save_weights_too:
            save_weights(weights_dir, step, model)
    print("[trainer stand-in] RL trainer finished!", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
