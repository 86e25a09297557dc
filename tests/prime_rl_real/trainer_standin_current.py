"""CPU stand-in for prime-rl's RL trainer, current generation (prime-rl 559b447).

Started by tests/prime_rl_real/bin/torchrun in place of
`torchrun ... -m prime_rl.trainer.rl.train @ <run>/configs/trainer.json [flags]`
(src/prime_rl/entrypoints/rl.py:320-334@559b447), with the prime-rl test venv's python.

It does no learning. It keeps the trainer's side of the file protocol with the orchestrator,
using prime-rl's own config class, path helpers and rollout receiver:

  config     `cli(TrainerConfig)` as the trainer's main does (src/prime_rl/trainer/rl/train.py:749@559b447)
  resume     resume.dir -> its step; resume.step; a bare resume -> the latest checkpoints/step_N
             (train.py:133-139; utils/pathing.py:123-133); training continues at that step + 1 (:229-230)
  startup    `broadcasts/step_{start-1}/` + STABLE before waiting for the first batch (train.py:271-277;
             transports/weights/filesystem.py:39-41,72-75)
  each step  wait for and read `rollouts/step_s/rank_{r}.bin` with FileSystemMicroBatchReceiver
             (transports/rollouts/filesystem.py:38-62; trainer/rl/data.py:165-177 builds it with current_step =
             the start step; transports/rollouts/__init__.py:31-35), then broadcast v{s}:
             `broadcasts/step_s/` + STABLE, weights only (train.py:579-598; filesystem.py:33-75). The
             stand-in writes no shards, so a broadcast holds STABLE alone.
  checkpoint `checkpoints/step_s/trainer/` (trainer/ckpt.py:163-165, 254-271: a DCP dir, no STABLE
             marker anywhere in it or beside it) at ckpt.interval except the last step (train.py:602-611)
             and once after the loop for the final step (train.py:727-731); the stand-in writes a
             `.metadata` placeholder, not a real DCP checkpoint.
  last step  `is_last_step = progress.step == max_steps` (train.py:266, 713-715): equality, as the real one.

Per step it appends one JSON line to `<output_dir>/standin_trainer.jsonl`:
  {"step", "micro_batches", "samples", "loss_tokens", "nonzero_advantages", "env_names", "ranks"}
so tests can assert on what prime-rl shipped.

Knobs: PRL_TRAINER_FAIL_AT_STEP=k exits 3 at step k (before reading its batch);
PRL_TRAINER_STEP_SECONDS=s spends s seconds on each step's update (a GPU's time).
SIGTERM/SIGINT: exit promptly (143/130).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path


def _on_signal(signum, _frame):
    sys.stderr.write(f"[trainer stand-in] signal {signum}, exiting\n")
    sys.stderr.flush()
    os._exit(128 + signum)


signal.signal(signal.SIGTERM, _on_signal)
signal.signal(signal.SIGINT, _on_signal)

from prime_rl.configs.trainer import TrainerConfig  # noqa: E402
from prime_rl.transports.rollouts.filesystem import FileSystemMicroBatchReceiver  # noqa: E402
from prime_rl.utils.config import cli  # noqa: E402
from prime_rl.utils.pathing import (  # noqa: E402
    get_all_ckpt_steps,
    get_broadcast_dir,
    get_ckpt_dir,
    get_step_path,
)

LOG_NAME = "standin_trainer.jsonl"


def say(msg: str) -> None:
    print(f"[trainer stand-in] {msg}", flush=True)


def resume_step(config: TrainerConfig, ckpt_dir: Path) -> int | None:
    # train.py:133-139@559b447
    if config.resume is None:
        return None
    if config.resume.dir is not None:
        return config.resume.dir_step
    if config.resume.step is not None:
        return config.resume.step
    steps = get_all_ckpt_steps(ckpt_dir)   # resolve_latest_ckpt_step (utils/pathing.py:123-133)
    return steps[-1] if steps else None


def broadcast(out: Path, step: int, lora=None) -> None:
    # filesystem.py:39-41 (mkdir step dir), :72-75 (touch STABLE); a LoRA run broadcasts the
    # adapter alone with its adapter_config.json (:43-55: save_state_dict(adapter=True),
    # save_lora_config), which evals loads by /load_lora_adapter (evals.py:350-357)
    d = get_step_path(get_broadcast_dir(out), step)
    d.mkdir(parents=True, exist_ok=True)
    if lora is not None:
        (d / "adapter_config.json").write_text(json.dumps({"r": lora.rank, "lora_alpha": lora.alpha,
                                                           "peft_type": "LORA"}))
    (d / "STABLE").touch()


def checkpoint(ckpt_dir: Path, step: int) -> None:
    # ckpt.py:163-165 (step_N/trainer), :264-271 (mkdir parent, dcp_save into trainer/)
    d = get_step_path(ckpt_dir, step) / "trainer"
    d.mkdir(parents=True, exist_ok=True)
    (d / ".metadata").write_text(json.dumps({"standin": True, "step": step}))


def main() -> int:
    config = cli(TrainerConfig)
    out = Path(config.output_dir)
    # setup_ckpt_manager: checkpoints under ckpt.output_dir or output_dir (ckpt.py:309-318)
    ckpt_base = Path((config.ckpt.output_dir if config.ckpt else None) or out)
    ckpt_dir = get_ckpt_dir(ckpt_base)
    fail_at = int(os.environ.get("PRL_TRAINER_FAIL_AT_STEP") or 0)
    world = max(1, int(os.environ.get("WORLD_SIZE") or 1))   # data ranks: dp = world size (trainer/rl/data.py:174-177)
    interval = config.ckpt.interval if config.ckpt else None
    max_steps = config.max_steps

    resumed = resume_step(config, ckpt_dir)
    step = resumed + 1 if resumed is not None else 1     # Progress.step starts at 1; resume F -> F+1
    say(f"output_dir={out} max_steps={max_steps} ckpt.interval={interval} resume={resumed} start={step} "
        f"ranks={world} transport={config.rollout_transport.type} broadcast={config.weight_broadcast.type}")
    if config.rollout_transport.type != "filesystem" or config.weight_broadcast.type != "filesystem":
        say("only the filesystem rollout transport and weight broadcast are stood in for")
        return 2

    lora = config.model.lora
    broadcast(out, step - 1, lora)                       # startup policy v{start-1} (train.py:275-277)
    receivers = [FileSystemMicroBatchReceiver(out, r, step) for r in range(world)]
    log = out / LOG_NAME
    while True:
        is_last = max_steps is not None and step == max_steps
        if fail_at and step == fail_at:
            say(f"PRL_TRAINER_FAIL_AT_STEP={fail_at}: exiting 3 at step {step}")
            return 3
        t0 = time.monotonic()
        for r in receivers:
            r.wait()
        batches = [r.receive() for r in receivers]
        # a step's update takes time on a GPU; PRL_TRAINER_STEP_SECONDS stands in for it
        time.sleep(float(os.environ.get("PRL_TRAINER_STEP_SECONDS") or 0))
        micro = [mb for b in batches for mb in b]
        samples = sum(len(mb.sequence_lengths) for mb in micro)   # one per packed sample (trainer/batch.py:596)
        loss_tokens = sum(sum(1 for m in mb.loss_mask if m) for mb in micro)
        nonzero = sum(1 for mb in micro for a, m in zip(mb.advantages, mb.loss_mask) if m and a != 0.0)
        record = {"step": step, "micro_batches": len(micro), "samples": samples,
                  "loss_tokens": loss_tokens, "nonzero_advantages": nonzero,
                  "env_names": sorted({e for mb in micro for e in mb.env_names}),
                  "ranks": len(batches), "wait_s": round(time.monotonic() - t0, 2)}
        with open(log, "a") as f:
            f.write(json.dumps(record) + "\n")
        say(f"step {step}: {record}")
        broadcast(out, step, lora)                       # v{step} (train.py:593)
        if interval and not is_last and step % interval == 0:   # train.py:602-611
            checkpoint(ckpt_dir, step)
        if is_last:                                      # train.py:713-715
            break
        step += 1
    if config.ckpt is not None:                          # final checkpoint (train.py:727-731)
        checkpoint(ckpt_dir, step)
    say("RL trainer stand-in finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
