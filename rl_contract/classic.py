"""The classic generation (prime-rl 0.5.x) at run time: where a launch writes what, and the
behaviours of its `rl` that the driver relies on. Every fact is read off prime-rl v0.5.1.dev209
(commit 09e2977) at the lines SOURCES names; the driver reads the layout only through this
module, and the test double (tests/trainer_double.py) and the embedded trainer write it through
the same functions.

Layout: `OUT/{checkpoints,weights}/step_N` (the trainer) and `OUT/run_default/{rollouts,
checkpoints,broadcasts,control}` (the orchestrator, whose output dir is OUT/run_default), with
rollout rows in `rollouts/step_N/{train,eval}_rollouts.jsonl`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from rl_contract.steps import StepDirs

COMMIT = "09e2977"   # prime-rl v0.5.1.dev209
_CFG = "packages/prime-rl-configs/src/prime_rl/configs"
_ORCH = "src/prime_rl/orchestrator/orchestrator.py"

# fact -> the lines of prime-rl (at COMMIT) it is read off
SOURCES: dict[str, str] = {
    "orchestrator output dir is OUT/run_default": "packages/prime-rl-configs/src/prime_rl/utils/validation.py:134-142",
    "train rows of a launch from F to M land in step_F .. step_{M-1}":
        f"src/prime_rl/orchestrator/ckpt.py:14-15 (Progress.step = 0); {_ORCH}:295 (a resume "
        f"restarts at the checkpoint's step F), :351-352 (the loop ends at step >= max_steps), "
        f":466-469 (a batch is saved under the step it is sampled at), :792 (then step += 1)",
    "the final eval alone lands in step_M": f"{_ORCH}:813-834",
    "a fresh run evaluates the base model at step 0":
        f"{_CFG}/orchestrator.py:367 (eval_base_model = True); "
        "src/prime_rl/orchestrator/eval_utils.py:22-24; " + f"{_ORCH}:362-370,402-407",
    "a resumed run does not evaluate at its start step": f"{_CFG}/orchestrator.py:370-371; {_ORCH}:298-301",
    "zero-advantage rollouts are filtered by default":
        f"{_CFG}/orchestrator.py:505-509 (enforce = True), :583 (the default filters)",
    "three fully filtered batches at one step abort the run and write control/evicted.txt":
        f"{_ORCH}:84 (MAX_EMPTY_BATCH_ATTEMPTS = 3), :422-450",
    "a launch into an output dir holding control/evicted.txt aborts at once": f"{_ORCH}:326-329",
    "HF weights are saved sharded above 5 GB, with config, generation config and tokenizer":
        f"{_CFG}/trainer.py:353 (save_sharded = True); src/prime_rl/trainer/weights.py:82-113; "
        "src/prime_rl/trainer/ckpt.py:354-367",
    "a resume reads checkpoints/step_F/trainer, run_default/checkpoints/step_F and the step's "
    "broadcast, never weights/step_F":
        f"src/prime_rl/trainer/rl/train.py:133-137,219-220; {_ORCH}:295,309-313; "
        "src/prime_rl/orchestrator/utils.py:136-178",
    "the final eval runs on whatever policy the server holds while the last updates land":
        f"{_ORCH}:813-834 (no pause of weight updates, unlike the in-loop evals at :375-381,410); "
        f"src/prime_rl/orchestrator/scheduler.py:297-308,405-411; {_CFG}/orchestrator.py:641 "
        "(max_async_level = 1)",
    "[wandb] turns on one W&B run shared by trainer and orchestrator":
        f"{_CFG}/rl.py:81,216,350; src/prime_rl/utils/monitor/__init__.py:33",
}

# a rollout "passes" when its reward is at least this (pass/fail live groups, accuracy)
SUCCESS_THRESHOLD = 0.5
# fully filtered attempts at one step before the orchestrator aborts the run
MAX_EMPTY_BATCH_ATTEMPTS = 3
# what the final eval measures (the summary says so beside each classic number)
FINAL_EVAL_MEASURES = ("the run's own eval after its last step, on the policy its inference server "
                       "holds while the last weight updates land (v(max_steps - max_async_level) .. "
                       "v(max_steps); max_async_level = 1 by default)")
# the zero-advantage filter turned off, the other default filters kept (a list replaces the
# defaults whole): the gradient probe measures a dataset's live groups, which the filter would
# otherwise turn into an abort
PROBE_FILTERS = {"orchestrator": {"filters": [{"type": "gibberish"}, {"type": "repetition"},
                                              {"type": "zero_advantage", "enforce": False}]}}


class ClassicLayout(StepDirs):
    # what a gradient probe's one-step launch overlays on its config
    probe_overlay = PROBE_FILTERS
    final_eval_measures = FINAL_EVAL_MEASURES
    # a batch sampled at orchestrator step s trains the update to v(s + 1)
    ROWS_OFFSET = 1

    def rollouts_dir(self, out: Path) -> Path:
        return Path(out) / "run_default" / "rollouts"

    def weights_dir(self, out: Path, step: int) -> Path:
        """The Hugging Face model directory a step's weights are saved in."""
        return Path(out) / "weights" / f"step_{step}"

    def eval_file(self, out: Path, step: int) -> Path:
        return self.rollouts_dir(out) / f"step_{step}" / "eval_rollouts.jsonl"

    def train_file(self, out: Path, step: int) -> Path:
        return self.rollouts_dir(out) / f"step_{step}" / "train_rollouts.jsonl"

    def final_eval_step(self, final: int) -> int:
        """Where the eval of a launch ending at `final` lands (alone: no train rows there)."""
        return final

    def checkpoint_trees(self, out: Path, step: int) -> list[Path]:
        """What a finished arm leaves at its final step: the trainer's checkpoint, the HF
        weights (the reported, loadable model), the orchestrator's checkpoint and the step's
        broadcast (the last three are what a resuming run reads, with the first)."""
        out = Path(out)
        return [out / "checkpoints" / f"step_{step}", out / "weights" / f"step_{step}",
                out / "run_default" / "checkpoints" / f"step_{step}",
                out / "run_default" / "broadcasts" / f"step_{step}"]

    def resume_trees(self, out: Path, step: int) -> list[Path]:
        """The trees a run resuming at `step` reads in its own output dir (weights/ is not one)."""
        trees = self.checkpoint_trees(out, step)
        return [trees[0], trees[2], trees[3]]

    def resumable_step(self, out: Path) -> int | None:
        """The newest step whose every tree a resume reads is present."""
        steps = [s for s in self.steps(Path(out) / "checkpoints")
                 if all(tree.exists() for tree in self.resume_trees(out, s))]
        return steps[-1] if steps else None

    def weights_problems(self, out: Path, step: int) -> list[str]:
        """What keeps the step's HF weights from loading with `from_pretrained` ([] if none)."""
        d = self.weights_dir(out, step)
        return [f"{d}/{m}" for m in hf_weight_files(d)] if d.is_dir() else [str(d)]

    def evicted_file(self, out: Path) -> Path:
        return Path(out) / "run_default" / "control" / "evicted.txt"

    def abort_reason(self, out: Path, start: int, final: int, groups_per_batch: int) -> str | None:
        """Why prime-rl aborted a launch on its own rule, where it says so in a file: the
        zero-advantage filter emptied MAX_EMPTY_BATCH_ATTEMPTS batches at one step, and the
        orchestrator wrote its reason to control/evicted.txt."""
        try:
            return self.evicted_file(out).read_text(encoding="utf-8").strip() or "evicted"
        except OSError:
            return None

    def train_rows(self, out: Path, step: int) -> Iterator[dict]:
        """Train rollout rows (fair game for the teacher)."""
        with open(self.train_file(out, step), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)


def hf_weight_files(d: Path) -> list[str]:
    """What a Hugging Face model directory lacks to load with `from_pretrained`: its config,
    tokenizer, and either one `model.safetensors` or an index whose every shard is present
    (prime-rl shards above 5 GB: trainer/weights.py:82-113@09e2977). [] when complete."""
    d = Path(d)
    missing = [n for n in ("config.json", "tokenizer_config.json") if not (d / n).exists()]
    index = d / "model.safetensors.index.json"
    if index.exists():
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (OSError, ValueError, KeyError, AttributeError):
            return missing + [f"{index.name} (unreadable)"]
        missing += sorted(s for s in shards if not (d / s).exists())
    elif not (d / "model.safetensors").exists():
        missing.append("model.safetensors (or model.safetensors.index.json)")
    return missing
