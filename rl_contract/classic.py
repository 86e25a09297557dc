"""The classic generation (prime-rl 0.5.x) at run time: where a launch writes what, and the
behaviours of its `rl` that the driver relies on. Every fact is read off prime-rl v0.5.1.dev209
(commit 09e2977) at the lines SOURCES names; the driver reads the layout only through this
module, and the test double (tests/trainer_double.py) and the embedded trainer write it through
the same functions.

Layout: `OUT/{checkpoints,weights}/step_N` (the trainer) and `OUT/run_default/{rollouts,
checkpoints,broadcasts,control}` (the orchestrator, whose output dir is OUT/run_default), with
rollout rows in `rollouts/step_N/{train,eval}_rollouts.jsonl`; the orchestrator's log is
`OUT/logs/orchestrator.log`.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Iterator

from rl_contract.steps import StepDirs, is_step_dir

COMMIT = "09e2977"   # prime-rl v0.5.1.dev209
_CFG = "packages/prime-rl-configs/src/prime_rl/configs"
_ORCH = "src/prime_rl/orchestrator/orchestrator.py"
_ENVS = "src/prime_rl/orchestrator/envs.py"

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
    "the orchestrator writes its resolved config, eval sampling included, to control/orch.toml":
        f"{_ORCH}:106-110; {_CFG}/orchestrator.py:104-125 (EvalSamplingConfig: None defers to the server)",
    "nothing is written to the rollouts while an empty batch is retried":
        f"{_ORCH}:422-450 (the attempts), :466-469 (the batch saved after them, once one leaves a "
        "trainable rollout)",
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
    "the orchestrator's stdout and stderr go to OUT/logs/orchestrator.log, which `rl` tails into "
    "its own stdout (the arm's launch log)":
        "src/prime_rl/utils/pathing.py:9-10; src/prime_rl/entrypoints/rl.py:142-143,245-249,324-327",
    "an eval rollout that raises is dropped, never written: the orchestrator logs how many of an "
    "eval env's rollouts failed, after 'Running final evals' for the final eval":
        f"{_ENVS}:206-209,224-227 (a failed group or rollout comes back as None), :236-237 (only "
        f"the others are kept), :240-243 (the warning FAILED_ROLLOUTS_MESSAGE), :319 (the kept "
        f"ones are returned); {_ORCH}:814 (FINAL_EVALS_MESSAGE), :829-834 (what came back is "
        f"all the final eval writes)",
}

# a rollout "passes" when its reward is at least this (pass/fail live groups, accuracy)
SUCCESS_THRESHOLD = 0.5
# fully filtered attempts at one step before the orchestrator aborts the run
MAX_EMPTY_BATCH_ATTEMPTS = 3
# what the final eval measures (the summary says so beside each classic number)
FINAL_EVAL_MEASURES = ("the run's own eval after its last step, on the policy its inference server "
                       "holds while the last weight updates land (v(max_steps - max_async_level - 1) .. "
                       "v(max_steps): batch max_steps - 1 may start on v(max_steps - 2); "
                       "max_async_level = 1 by default)")
# the zero-advantage filter turned off, the other default filters kept (a list replaces the
# defaults whole): the gradient probe measures a dataset's live groups, which the filter would
# otherwise turn into an abort
PROBE_FILTERS = {"orchestrator": {"filters": [{"type": "gibberish"}, {"type": "repetition"},
                                              {"type": "zero_advantage", "enforce": False}]}}


# what the orchestrator logs as its final eval starts (orchestrator.py:814), and, once an eval
# env's rollouts are gathered, how many of them raised and were dropped (envs.py:240-243)
FINAL_EVALS_MESSAGE = "Running final evals"
FAILED_ROLLOUTS_MESSAGE = "{failed}/{total} ({pct:.1f}%) rollouts failed"
_FAILED_ROLLOUTS = re.compile(r"(?<![\d.])(\d+)/(\d+) \((\d+\.\d)%\) rollouts failed")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")   # rl starts the orchestrator with LOGURU_FORCE_COLORS=1


def failed_rollouts_message(failed: int, total: int) -> str:
    """The orchestrator's warning when `failed` of an eval env's `total` rollouts raised
    (envs.py:240-243@09e2977)."""
    return FAILED_ROLLOUTS_MESSAGE.format(failed=failed, total=total, pct=failed / total * 100)


def failed_final_eval_rollouts(log_lines: Iterable[str]) -> int:
    """How many rollouts of a launch's final eval raised, and so were never written, as the
    orchestrator's log says: the sum of its FAILED_ROLLOUTS_MESSAGE warnings (one per eval env
    that lost any; the env is not named) after its last FINAL_EVALS_MESSAGE. 0 when the log
    reached no final eval. Colour codes and JSON logging (the message inside a JSON line) read
    alike; a warning counts only where its percentage is the one prime-rl computes from its two
    numbers."""
    failed = None   # the in-loop evals' warnings come before the final eval's message
    for raw in log_lines:
        line = _ANSI.sub("", raw)
        if FINAL_EVALS_MESSAGE in line:
            failed = 0
            continue
        m = _FAILED_ROLLOUTS.search(line) if failed is not None else None
        if m:
            n, total = int(m[1]), int(m[2])
            if 0 < n <= total and failed_rollouts_message(n, total) == m[0]:
                failed += n
    return failed or 0


# every eval env's rows of one eval, in one file of its step's rollouts dir (orchestrator.py:813-834)
EVAL_FILE_NAME = "eval_rollouts.jsonl"
# what a sealed row says in place of an error's text: only that the rollout raised is read
SEALED_ERROR = "the rollout raised (its message is sealed with the eval)"


def sealed_row(row: dict) -> dict:
    """An eval row cut to what the driver measures an arm by (driver/analysis/evaluation.py's
    numeric view reads nothing else): the example's id, the env's label where the row has one,
    whether the rollout raised, the reward and the numeric metrics. The view reads the same
    numbers from it as from the whole row, and a sealed row seals to itself; no prompt,
    completion, answer, info or error text is kept."""
    metrics = row.get("metrics") if isinstance(row.get("metrics"), dict) else {}
    reward = row.get("reward")
    cut: dict = {"example_id": row.get("example_id")}
    if isinstance(row.get("env_name"), str):
        cut["env_name"] = row["env_name"]
    cut["error"] = None if row.get("error") is None else SEALED_ERROR
    cut["reward"] = float(reward) if isinstance(reward, (int, float)) else 0.0
    cut["metrics"] = {str(k): float(v) for k, v in metrics.items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return cut


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
        return self.rollouts_dir(out) / f"step_{step}" / EVAL_FILE_NAME

    eval_file_name = EVAL_FILE_NAME

    def is_eval_file(self, path: Path) -> bool:
        """An eval's rollout file, wherever a launch wrote one: rollouts/step_N/eval_rollouts.jsonl
        (the final eval's, a base-model or in-loop eval's: orchestrator.py:402-407,813-834)."""
        return Path(path).name == EVAL_FILE_NAME and is_step_dir(Path(path).parent)

    def sealed_eval_row(self, row: dict) -> dict:
        """An eval row cut to its numbers (sealed_row)."""
        return sealed_row(row)

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

    def progress_files(self, out: Path, start: int, final: int) -> list[Path]:
        """None: the orchestrator writes nothing while it retries an empty batch (SOURCES); its
        train file appears once, with the step, which the step count already sees."""
        return []

    def orchestrator_log(self, out: Path) -> Path:
        """The orchestrator's log of a launch into `out` (rewritten by each launch)."""
        return Path(out) / "logs" / "orchestrator.log"

    def dropped_eval_rollouts(self, out: Path) -> int:
        """How many rollouts of the final eval of the launch into `out` raised and were dropped
        from its eval file, as its orchestrator log says (0 where there is no log)."""
        try:
            with open(self.orchestrator_log(out), encoding="utf-8", errors="replace") as f:
                return failed_final_eval_rollouts(f)
        except OSError:
            return 0

    def recorded_eval_setting(self, out: Path) -> dict | None:
        """The final eval's sampling, from the orchestrator config the run wrote
        (run_default/control/orch.toml, orchestrator.py:106-110: the resolved config less its
        None values; EvalSamplingConfig, configs/orchestrator.py:104-125, where an unset
        temperature or limit defers to the server). None without the file or an [eval]."""
        import tomllib

        try:
            cfg = tomllib.loads((Path(out) / "run_default" / "control" / "orch.toml").read_text())
        except (OSError, tomllib.TOMLDecodeError):
            return None
        ev = cfg.get("eval")
        if not isinstance(ev, dict):
            return None
        sampling = ev.get("sampling") or {}
        return {"max_completion_tokens": sampling.get("max_completion_tokens", sampling.get("max_tokens")),
                "temperature": sampling.get("temperature"),
                "examples": {e.get("name") or e.get("id"): e.get("num_examples")
                             for e in ev.get("env") or [] if isinstance(e, dict)}}

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
