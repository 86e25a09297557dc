"""The current generation's output layout (prime-rl v0.8.1.dev57 .. dev67, verifiers v1 tasksets).

One run directory R = OUT/run.name holds everything an arm writes:
`R/checkpoints/step_N/{trainer,orchestrator}`, `R/broadcasts/step_N` (HF weights + STABLE, with
the filesystem weight broadcast), `R/rollouts/step_N/{train,eval}/{all,effective}/traces.jsonl`
and `R/metrics.jsonl`. There is no weights/ dir, and the run never evaluates its final weights,
so each arm's final broadcast is measured by a separate `evals` launch whose output dir is
`OUT/final_eval/step_N` (standalone evals write their one epoch as step 0).

Rows are verifiers Episodes with no stored reward: reward = sum of score x weight over the
trace's `rewards`, and the per-example key is `task.key`. This module turns them into the flat
rows the rest of the driver reads (the classic rows' field names), so nothing past the dialect
knows which generation wrote them. Eval episodes are cut to numbers in `eval_view`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from rl_contract.steps import StepDirs

# every launch of an arm passes this run.name: unset, prime-rl adds a random suffix per launch
# and a resume would land in a new directory
RUN_NAME = "run"
# the subset of rows read: `all` holds every finished episode, errored ones included (they
# count as failures), on arrival; `effective` drops the errored ones
SUBSET = "all"
# a trace ending on one of these stopped on a length limit (prime-rl serializes no is_truncated)
TRUNCATING_STOPS = {"max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens",
                    "compaction_failed"}

def episode_reward(episode: dict) -> float:
    """prime-rl's reward of an episode: the mean over its traces of sum(score x weight)."""
    totals = []
    for trace in episode.get("traces") or []:
        rewards = trace.get("rewards") or {}
        totals.append(sum(float(r.get("score") or 0.0) * float(r.get("weight", 1.0))
                          for r in rewards.values() if isinstance(r, dict)))
    return sum(totals) / len(totals) if totals else 0.0


def _messages(trace: dict) -> tuple[list, list]:
    """(prompt, completion) messages of a single-agent trace: the nodes before the first sampled
    one are the prompt, the sampled ones and what follows them the completion."""
    prompt, completion = [], []
    for node in trace.get("nodes") or []:
        msg = node.get("message")
        if not isinstance(msg, dict):
            continue
        (completion if node.get("sampled") or completion else prompt).append(msg)
    return prompt, completion


def train_row(episode: dict) -> dict:
    """A train episode as a flat row (fair game for the teacher)."""
    trace = (episode.get("traces") or [{}])[0]
    data = (episode.get("task") or {}).get("data") or {}
    prompt, completion = _messages(trace)
    ok = bool(episode.get("ok", True)) and bool(episode.get("traces"))
    return {
        "example_id": (episode.get("task") or {}).get("key"),
        "env_name": (episode.get("env") or {}).get("name"),
        "prompt": prompt or data.get("prompt"), "completion": completion,
        "answer": data.get("answer"), "info": data.get("info") or {},
        "reward": episode_reward(episode) if ok else 0.0,
        "metrics": {k: float(v) for k, v in (trace.get("metrics") or {}).items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)},
        "is_completed": bool(trace.get("is_completed", ok)),
        "is_truncated": trace.get("stop_condition") in TRUNCATING_STOPS,
        "errors": [str(e)[:200] for e in (episode.get("errors") or [])][:3],
    }


def eval_view(episode: dict) -> dict:
    """An eval episode cut to its numbers the moment it is parsed: the task key, the env's name,
    the reward (rewards' scores and weights) and numeric metrics. Nothing else is kept."""
    trace = (episode.get("traces") or [{}])[0]
    ok = bool(episode.get("ok", True)) and bool(episode.get("traces"))
    metrics = {k: float(v) for k, v in (trace.get("metrics") or {}).items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    for name, r in (trace.get("rewards") or {}).items():   # a binary reward reads as is_correct
        if isinstance(r, dict) and isinstance(r.get("score"), (int, float)):
            metrics.setdefault(name, float(r["score"]))
    return {"example_id": (episode.get("task") or {}).get("key"),
            "env_name": (episode.get("env") or {}).get("name"),
            "reward": episode_reward(episode) if ok else 0.0,
            "metrics": metrics if ok else {k: 0.0 for k in metrics}}


class CurrentLayout(StepDirs):
    def run_dir(self, out: Path) -> Path:
        return Path(out) / RUN_NAME

    def rollouts_dir(self, out: Path) -> Path:
        return self.run_dir(out) / "rollouts"

    def weights_dir(self, out: Path, step: int) -> Path:
        """The Hugging Face model directory of a step's weights (the filesystem broadcast)."""
        return self.run_dir(out) / "broadcasts" / f"step_{step}"

    def checkpoint_dir(self, out: Path, step: int) -> Path:
        """What `[resume] dir` names to fork this arm's step into another run."""
        return self.run_dir(out) / "checkpoints" / f"step_{step}"

    def final_eval_dir(self, out: Path, step: int) -> Path:
        """The output dir of the `evals` launch that measures a step's final weights."""
        return Path(out) / "final_eval" / f"step_{step}"

    def eval_file(self, out: Path, step: int) -> Path:
        return self.final_eval_dir(out, step) / "rollouts" / "step_0" / "eval" / SUBSET / "traces.jsonl"

    def train_file(self, out: Path, step: int) -> Path:
        return self.rollouts_dir(out) / f"step_{step}" / "train" / SUBSET / "traces.jsonl"

    def checkpoint_trees(self, out: Path, step: int) -> list[Path]:
        """What a finished arm leaves at its final step: the trainer's and the orchestrator's
        checkpoint (a later arm forks them with `[resume] dir`) and the loadable weights."""
        ckpt = self.checkpoint_dir(out, step)
        return [ckpt / "trainer", self.weights_dir(out, step), ckpt / "orchestrator"]

    def train_rows(self, out: Path, step: int) -> Iterator[dict]:
        with open(self.train_file(out, step), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield train_row(json.loads(line))

    def resumable_step(self, out: Path) -> int | None:
        """The newest step whose trainer AND orchestrator checkpoints both exist (after a crash
        the orchestrator's final save can exist alone; prime-rl's bare resume does not check)."""
        ckpts = self.run_dir(out) / "checkpoints"
        both = [s for s in self.steps(ckpts)
                if (ckpts / f"step_{s}" / "trainer").is_dir()
                and (ckpts / f"step_{s}" / "orchestrator" / "progress.pt").exists()]
        return both[-1] if both else None
