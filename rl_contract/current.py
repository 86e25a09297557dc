"""The current generation (prime-rl v0.8.1.dev57 .. dev67, verifiers v1 tasksets) at run time:
where a launch writes what, the behaviours of `rl` and `evals` the driver relies on, and its
trace episodes read as flat rows. Every fact is read off prime-rl v0.8.1.dev67 (commit 559b447)
at the lines SOURCES names; the driver reads the layout only through this module, and the test
double (tests/trainer_double_current.py) writes it through the same functions.

One run directory R = OUT/run.name holds everything an arm writes:
`R/checkpoints/step_N/{trainer,orchestrator}`, `R/broadcasts/step_N` (weight shards + STABLE, with
the filesystem weight broadcast: no config, no tokenizer), `R/rollouts/step_N/{train,eval}/{all,
effective}/traces.jsonl` and `R/metrics.jsonl`. There is no weights/ dir, and the run never
evaluates its final weights: each arm's final broadcast is measured by prime-rl's own `evals` in
its online mode (the base model served as in training, the broadcast loaded into it), whose
output dir is `OUT/final_eval/step_N`.

Rows are verifiers Episodes with no stored reward: reward = sum of score x weight over the
trace's `rewards`, and the per-example key is `task.key`. This module turns them into the flat
rows the rest of the driver reads (the classic rows' field names), so nothing past the dialect
knows which generation wrote them. Eval episodes are cut to numbers in `eval_view`.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from rl_contract.steps import StepDirs, is_step_dir

COMMIT = "559b447"   # prime-rl v0.8.1.dev67
_CFG = "packages/prime-rl-configs/src/prime_rl/configs"
_ORCH = "src/prime_rl/orchestrator/orchestrator.py"
_EVALS = "src/prime_rl/evals/evals.py"

# fact -> the lines of prime-rl (at COMMIT) it is read off
SOURCES: dict[str, str] = {
    "train rows of a launch from F to M land in step_{F+1} .. step_M":
        "src/prime_rl/orchestrator/types.py:27-30 (Progress.step starts at 1, trainer-aligned); "
        f"{_ORCH}:321 (a resume continues at F + 1), :591-592 (an arriving train episode is "
        "logged under the step still collecting), :690 (step += 1 after a batch ships)",
    "episodes arriving after the last batch ships may spill into step_{M+1}, never trained":
        f"{_ORCH}:690,761-776 (the final ship moves the step to M + 1; draining starts after "
        "and cancels in-flight train episodes, :771-773), :561-592 (episodes already queued "
        "still arrive and are logged under M + 1 first): timing, so run against prime-rl's own "
        "orchestrator one machine wrote a step_{M+1}/train/all and another none",
    "an in-run eval fires at step M+1 (policy vM) only when M+1 is a multiple of its interval":
        f"{_ORCH}:690,759 (maybe_trigger_eval after the final ship), "
        "src/prime_rl/orchestrator/eval_source.py:54 (step % interval == 0), "
        f"{_ORCH}:768-776 (draining lets a triggered eval finish): the driver leaves in-run evals "
        "off and measures every arm's final weights by `evals` whatever the interval",
    "batch equivalents of groups with no trainable survivor (all errored, rejected, stale) abort "
    "the run at ten":
        "src/prime_rl/orchestrator/train_sink.py:28,240-252,309-338 (\"10 consecutive zero-output "
        "batch equivalents\"); seen against prime-rl's own orchestrator with every request failing",
    "`all` holds every arriving episode, errored ones included":
        f"{_ORCH}:584-592; src/prime_rl/monitors/file.py:43-55",
    "zero-advantage samples are filtered by default": f"{_CFG}/orchestrator.py:270",
    "through empty or zero-output batches the step does not move, and its `all` file grows "
    "with every arriving episode until the run ships a batch or aborts":
        f"{_ORCH}:591-592,640-652; src/prime_rl/orchestrator/train_sink.py:240-252,309-338; "
        "src/prime_rl/monitors/file.py:43-55 (appended one episode at a time)",
    "ten consecutive empty train batches abort the run, their episodes left in `all`":
        f"{_ORCH}:99 (MAX_CONSECUTIVE_EMPTY_BATCHES = 10), :640-652 (an empty batch does not "
        "advance the step)",
    "a broadcast holds weight shards and STABLE only":
        "src/prime_rl/transports/weights/filesystem.py:33-75; src/prime_rl/utils/weights.py:184-234",
    "a broadcast's tensors carry Hugging Face names":
        "src/prime_rl/transports/weights/filesystem.py:63-64 (convert_state_dict_to_hf; :66-67 saves them)",
    "there is no weights/ directory": "29e4222 (#3316, the trainer saves DCP checkpoints only)",
    "evals' online mode serves the base model and loads a broadcast into it":
        f"{_CFG}/evals.py:43-62,82; {_EVALS}:228-231,239-270,327-367 "
        "(pool.update_weights(broadcast_dir) at :357)",
    "online evals write their episodes under the policy's step": f"{_EVALS}:354-384",
    "a standalone inference server takes filesystem weight updates":
        f"{_CFG}/inference.py:216-218,458; src/prime_rl/inference/vllm/server.py:83-86,233",
    "a standalone `inference` puts a router on server.port and the engine on server.port + 100":
        f"{_CFG}/inference.py:440-444,511-515; src/prime_rl/entrypoints/inference.py:155-179,204-208",
    "admin calls (pause, update_weights, resume) must reach the engine, not the router":
        f"{_CFG}/rl.py:816-824 and {_CFG}/sft.py:483-486 (both launchers set client.admin_base_url "
        f"to the engine port); {_CFG}/shared.py:178-179; docs/inference.md:62",
    "the served model's name picks its tool-call and reasoning parsers":
        f"{_CFG}/inference.py:163-175",
    "train-source names must match the checkpoint's, as a set":
        "src/prime_rl/orchestrator/train_source.py:73-82",
    "[monitors.wandb] turns on one W&B run shared by trainer and orchestrator":
        "src/prime_rl/entrypoints/rl.py:158-161; src/prime_rl/monitors/wandb/monitor.py:44-47,75-111",
}

# every launch of an arm passes this run.name: unset, prime-rl adds a random suffix per launch
# and a resume would land in a new directory
RUN_NAME = "run"
# the subset of rows read: `all` holds every finished episode on arrival, errored ones included
# (a row's `errored` says so; they are counted apart, never as wrong answers)
SUBSET = "all"
# the episodes file of every kind and subset, train and eval (monitors/file.py:50)
TRACES = "traces.jsonl"
# consecutive empty train batches before the orchestrator aborts the run
MAX_CONSECUTIVE_EMPTY_BATCHES = 10
# batch equivalents of groups with no trainable survivor before it aborts the run
MAX_ZERO_OUTPUT_BATCHES = 10
# where a standalone `inference --server.port P` serves its engine, behind the router on P
# (SOURCES above): the final-weights eval sends its admin calls there, as rl's launcher does
ENGINE_PORT_OFFSET = 100


# what the final eval measures (the summary says so beside each number)
FINAL_EVAL_MEASURES = ("the arm's final weights v(max_steps) alone: prime-rl's `evals` in online "
                       "mode loads the last broadcast into the base model's server")
# the zero-advantage filter turned off: the gradient probe measures a dataset's live groups,
# which the filter would otherwise turn into an abort
PROBE_FILTERS = {"orchestrator": {"train": {"filter_zero_advantages": False}}}
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
        "group_id": (episode.get("group") or {}).get("id"),
        "env_name": (episode.get("env") or {}).get("name"),
        "errored": not ok,
        "prompt": prompt or data.get("prompt"), "completion": completion,
        "answer": data.get("answer"), "info": data.get("info") or {},
        "reward": episode_reward(episode) if ok else 0.0,
        "metrics": {k: float(v) for k, v in (trace.get("metrics") or {}).items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)},
        "is_completed": bool(trace.get("is_completed", ok)),
        "is_truncated": trace.get("stop_condition") in TRUNCATING_STOPS,
        # how the episode ended (verifiers v1 Trace.stop_condition, trace.py:403@a60a606): the
        # run's episode counts for a multi-turn or tool-using env (phases/setup.py episode_ends)
        "stop_condition": trace.get("stop_condition"),
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
            "errored": not ok,
            "reward": episode_reward(episode) if ok else 0.0,
            "metrics": metrics if ok else {k: 0.0 for k in metrics}}


def sealed_episode(episode: dict) -> dict:
    """An eval episode cut to what `eval_view` reads, in the episode's own shape: the task key,
    the env's name, `ok`, and each trace's rewards (numeric scores and weights) and numeric
    metrics. `eval_view` reads the same numbers from it as from the whole episode, and a sealed
    episode seals to itself; no prompt, completion, answer, info or error text is kept."""
    def number(x: object) -> bool:
        return isinstance(x, (int, float))

    traces = []
    for trace in episode.get("traces") or []:
        if not isinstance(trace, dict):
            continue
        rewards = {}
        for name, r in (trace.get("rewards") or {}).items():
            if isinstance(r, dict):   # a score or weight that is no number reads as its default
                rewards[str(name)] = {k: float(r[k]) for k in ("score", "weight") if number(r.get(k))}
        traces.append({"rewards": rewards,
                       "metrics": {str(k): float(v) for k, v in (trace.get("metrics") or {}).items()
                                   if number(v) and not isinstance(v, bool)}})
    return {"task": {"key": (episode.get("task") or {}).get("key")},
            "env": {"name": (episode.get("env") or {}).get("name")},
            "ok": bool(episode.get("ok", True)), "traces": traces}


class CurrentLayout(StepDirs):
    # what a gradient probe's one-step launch overlays on its config
    probe_overlay = PROBE_FILTERS
    final_eval_measures = FINAL_EVAL_MEASURES
    # the batch of trainer step s is collected while the orchestrator is at step s
    ROWS_OFFSET = 0

    def run_dir(self, out: Path) -> Path:
        return Path(out) / RUN_NAME

    def rollouts_dir(self, out: Path) -> Path:
        return self.run_dir(out) / "rollouts"

    def broadcasts_dir(self, out: Path) -> Path:
        return self.run_dir(out) / "broadcasts"

    def weights_dir(self, out: Path, step: int) -> Path:
        """A step's weights (the filesystem broadcast): shards and STABLE, no config or
        tokenizer; loadable beside the base model's (`driver export-model` puts them there)."""
        return self.broadcasts_dir(out) / f"step_{step}"

    def checkpoint_dir(self, out: Path, step: int) -> Path:
        """What `[resume] dir` names to fork this arm's step into another run."""
        return self.run_dir(out) / "checkpoints" / f"step_{step}"

    def final_eval_dir(self, out: Path, step: int) -> Path:
        """The output dir of the `evals` launch that measures a step's final weights."""
        return Path(out) / "final_eval" / f"step_{step}"

    def final_eval_step(self, final: int) -> int:
        """The step the final-weights eval files its episodes under: online evals write them
        under the policy's step, the launch's last."""
        return final

    def eval_file(self, out: Path, step: int) -> Path:
        return (self.final_eval_dir(out, step) / "rollouts" / f"step_{self.final_eval_step(step)}"
                / "eval" / SUBSET / TRACES)

    # the name of an eval's episodes file (and of a train one)
    eval_file_name = TRACES

    def is_eval_file(self, path: Path) -> bool:
        """An eval's episodes file, wherever a launch wrote one: rollouts/step_N/eval/<subset>/
        traces.jsonl (both subsets the FileMonitor writes, monitors/file.py:43-59; the
        final-weights eval's, an in-run eval's)."""
        p = Path(path)
        return p.name == TRACES and p.parent.parent.name == "eval" and is_step_dir(p.parent.parent.parent)

    def sealed_eval_row(self, row: dict) -> dict:
        """An eval episode cut to its numbers (sealed_episode)."""
        return sealed_episode(row)

    def train_file(self, out: Path, step: int) -> Path:
        return self.rollouts_dir(out) / f"step_{step}" / "train" / SUBSET / TRACES

    def progress_files(self, out: Path, start: int, final: int) -> list[Path]:
        """The launch's train `all` files on disk: the step still collecting appends every
        arriving episode to its own, empty and zero-output batches included (SOURCES), so a run
        working through prime-rl's own ten-batch abort window writes there and nowhere else."""
        return [self.train_file(out, s) for s in self.train_steps(out, start, final)]

    def checkpoint_trees(self, out: Path, step: int) -> list[Path]:
        """What a finished arm leaves at its final step: the trainer's and the orchestrator's
        checkpoint (a later arm forks them with `[resume] dir`) and the loadable weights."""
        ckpt = self.checkpoint_dir(out, step)
        return [ckpt / "trainer", self.weights_dir(out, step), ckpt / "orchestrator"]

    def resume_trees(self, out: Path, step: int) -> list[Path]:
        """The trees a run forking `step` reads (`[resume] dir`: trainer/rl/train.py:217-230,
        orchestrator.py:314-321)."""
        ckpt = self.checkpoint_dir(out, step)
        return [ckpt / "trainer", ckpt / "orchestrator"]

    def train_rows(self, out: Path, step: int) -> Iterator[dict]:
        with open(self.train_file(out, step), encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield train_row(json.loads(line))

    def abort_reason(self, out: Path, start: int, final: int, groups_per_batch: int) -> str | None:
        """Why prime-rl aborted a launch on its own rule, as its files show it: the orchestrator
        writes no reason, but every episode of the empty batches stays in `all` under the one
        step it could not ship. When that window holds MAX_CONSECUTIVE_EMPTY_BATCHES batches of
        complete groups and not one group has a reward spread, the zero-advantage filter
        emptied them all (none of them is a row the driver did not read anyway)."""
        step = self.latest_train_step(out, start, final)
        if step is None:
            return None
        groups: dict = {}
        errored: set = set()
        for row in self.train_rows(out, step):
            if not row.get("errored"):
                groups.setdefault(row.get("group_id"), []).append(float(row.get("reward", 0.0)))
            else:
                errored.add(row.get("group_id"))
        # the second rule: groups with no trainable survivor (every episode errored) count
        # toward MAX_ZERO_OUTPUT_BATCHES batch equivalents, then the run aborts
        if not groups and len(errored) >= MAX_ZERO_OUTPUT_BATCHES * max(1, groups_per_batch):
            return (f"{MAX_ZERO_OUTPUT_BATCHES} consecutive zero-output batch equivalents at step {step}: "
                    f"every episode of {len(errored)} groups errored (a model or env-server error), so "
                    "no batch had anything to train on")
        if None in groups or len(groups) < MAX_CONSECUTIVE_EMPTY_BATCHES * max(1, groups_per_batch):
            return None
        if any(max(r) > min(r) for r in groups.values()):
            return None
        return (f"{MAX_CONSECUTIVE_EMPTY_BATCHES} consecutive empty train batches at step {step}: "
                f"all {len(groups)} groups had no reward spread, so the zero-advantage filter left "
                "nothing to train on")

    def weights_problems(self, out: Path, step: int) -> list[str]:
        """What keeps the step's broadcast from being loaded into the served base model (the
        final-weights eval's way): [] when its STABLE marker and its weights are there."""
        d = self.weights_dir(out, step)
        if not (d / "STABLE").exists():
            return [str(d / "STABLE")]
        if not (d / "model.safetensors").exists() and not (d / "model.safetensors.index.json").exists():
            return [str(d / "model.safetensors")]
        return []

    def resumable_step(self, out: Path) -> int | None:
        """The newest step whose trainer AND orchestrator checkpoints both exist (after a crash
        the orchestrator's final save can exist alone; prime-rl's bare resume does not check)."""
        ckpts = self.run_dir(out) / "checkpoints"
        both = [s for s in self.steps(ckpts)
                if (ckpts / f"step_{s}" / "trainer").is_dir()
                and (ckpts / f"step_{s}" / "orchestrator" / "progress.pt").exists()]
        return both[-1] if both else None
