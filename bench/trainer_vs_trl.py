"""Benchmark: the embedded trainer vs TRL's GRPOTrainer, side by side in one run.

Same tiny model (the built-in recipe, warm-started on StockArithmetic's train rows), same group
size, prompts per step, learning rate, clip epsilon, optimizer betas, completion limit and
number of generation rounds; both do two optimizer steps per round and no KL. Each trainer's
final model is then scored by the same greedy evaluation on the same held-out split.

Prints, for each: rollouts/s over its training time, the ratio, and held-out accuracy with a
Wilson 95% interval. Needs the `embedded` and `bench` extras:
pip install -e ".[embedded,bench]" (torch stays pinned at 2.13.0).

    python bench/trainer_vs_trl.py [--rounds 30] [--eval-examples 200] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ENV = "stock_arithmetic"
CONFIG = """max_steps = {rounds}
[model]
name = "{model}"
[orchestrator]
batch_size = {batch}
rollouts_per_example = {group}
[orchestrator.train.sampling]
temperature = 1.0
max_completion_tokens = {max_tokens}
[[orchestrator.train.env]]
id = "{env}"
[orchestrator.eval]
interval = {rounds}
[orchestrator.eval.sampling]
max_completion_tokens = {max_tokens}
[[orchestrator.eval.env]]
id = "{env}"
num_examples = {eval_examples}
[trainer.optim]
lr = {lr}
betas2 = 0.99
[embedded]
seed = {seed}
threads = {threads}
updates_per_batch = 2
"""


def run_embedded(a, work: Path) -> dict:
    cfg = work / "embedded.toml"
    cfg.write_text(CONFIG.format(rounds=a.rounds, model=a.model, batch=a.prompts * a.group,
                                 group=a.group, max_tokens=a.max_tokens, env=ENV,
                                 eval_examples=a.eval_examples, lr=a.lr, seed=a.seed,
                                 threads=a.threads))
    out = work / "embedded_out"
    proc = subprocess.run([sys.executable, "-m", "embedded_trainer.rl", "@", str(cfg),
                           "--output-dir", str(out)], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"embedded trainer failed:\n{proc.stderr[-3000:]}")
    step_s = [float(m) for m in re.findall(r"total ([0-9.]+)s", proc.stdout)]
    rows = [json.loads(x) for x in (out / "run_default" / "rollouts" / f"step_{a.rounds}"
                                    / "eval_rollouts.jsonl").read_text().splitlines()]
    return {"train_seconds": sum(step_s), "rounds": len(step_s),
            "rewards": [r["reward"] for r in rows], "model_dir": out / "weights" / f"step_{a.rounds}"}


def run_trl(a, work: Path, model_dir: Path, env) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    from embedded_trainer.rollouts import score

    tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    train = list(env.get_dataset())
    ds = Dataset.from_list([{"prompt": r["prompt"], "row": json.dumps(
        {k: r[k] for k in ("prompt", "answer", "info", "example_id")})} for r in train])

    def env_reward(prompts, completions, row, completion_ids=None, **kwargs):
        rows = [json.loads(x) for x in row]
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        trunc = [len(ids) >= a.max_tokens and (not ids or ids[-1] != tok.eos_token_id)
                 for ids in (completion_ids or [[]] * len(texts))]
        return [s["reward"] for s in score(env, rows, texts, trunc)]

    args = GRPOConfig(
        output_dir=str(work / "trl_out"), use_cpu=True, use_vllm=False, bf16=False,
        per_device_train_batch_size=a.prompts * a.group // 2, steps_per_generation=2,
        num_generations=a.group, max_steps=2 * a.rounds, learning_rate=a.lr,
        lr_scheduler_type="constant", adam_beta2=0.99, weight_decay=0.0, beta=0.0, epsilon=0.2,
        loss_type="grpo", scale_rewards="group", temperature=1.0,
        max_completion_length=a.max_tokens, logging_steps=1000, save_strategy="no",
        report_to="none", seed=a.seed, disable_tqdm=True)
    trainer = GRPOTrainer(model=model, reward_funcs=env_reward, args=args, train_dataset=ds,
                          processing_class=tok)
    t0 = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - t0
    final = work / "trl_model"
    trainer.model.save_pretrained(final)
    return {"train_seconds": seconds, "rounds": a.rounds, "model": trainer.model, "tok": tok}


def greedy_eval(model, tok, env, n: int, max_tokens: int) -> list[float]:
    from embedded_trainer.rollouts import decode, render_prompt, sample, score

    rows = list(env.get_eval_dataset())[:n]
    rewards = []
    model.eval()
    for s in range(0, len(rows), 64):
        chunk = rows[s:s + 64]
        res = sample(model, [render_prompt(tok, r["prompt"]) for r in chunk], 1, max_tokens, 0.0,
                     tok.eos_token_id, tok.pad_token_id, None)
        texts = [decode(tok, res["tokens"][i], int(res["lengths"][i]), tok.eos_token_id)
                 for i in range(len(chunk))]
        rewards += [x["reward"] for x in score(env, chunk, texts, res["truncated"].tolist())]
    return rewards


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=30, help="generation rounds (steps) for each")
    p.add_argument("--prompts", type=int, default=16, help="prompts per round")
    p.add_argument("--group", type=int, default=4, help="completions per prompt")
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--eval-examples", type=int, default=200)
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", default="builtin:tiny-char-qwen2")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()

    import torch
    import verifiers as vf

    from driver.analysis.evaluation import wilson_interval
    from embedded_trainer import recipe
    from embedded_trainer.rl import quiet_libraries

    quiet_libraries()
    torch.set_num_threads(a.threads)
    env = vf.load_environment(ENV)
    base = recipe.materialize(a.model, env, json.dumps({"id": ENV, "args": {}}, sort_keys=True),
                              lambda m: print(m, file=sys.stderr))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ours = run_embedded(a, work)
        theirs = run_trl(a, work, base, env)
        theirs["rewards"] = greedy_eval(theirs.pop("model"), theirs.pop("tok"), env,
                                        a.eval_examples, a.max_tokens)
    base_model = __import__("transformers").AutoModelForCausalLM.from_pretrained(base)
    from transformers import PreTrainedTokenizerFast
    base_rewards = greedy_eval(base_model, PreTrainedTokenizerFast.from_pretrained(base), env,
                               a.eval_examples, a.max_tokens)
    rollouts = a.rounds * a.prompts * a.group
    report = {"env": ENV, "model": a.model, "rounds": a.rounds, "prompts_per_round": a.prompts,
              "group": a.group, "lr": a.lr, "threads": a.threads, "rollouts_each": rollouts,
              "start_acc": _acc(base_rewards, wilson_interval)}
    for name, r in (("embedded", ours), ("trl", theirs)):
        report[name] = {"train_seconds": round(r["train_seconds"], 2),
                        "rollouts_per_s": round(rollouts / r["train_seconds"], 2),
                        "heldout_acc": _acc(r["rewards"], wilson_interval)}
    report["throughput_ratio"] = round(report["embedded"]["rollouts_per_s"] / report["trl"]["rollouts_per_s"], 2)
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{ENV}, {a.model}: {a.rounds} rounds x {a.prompts} prompts x {a.group} = {rollouts} "
          f"rollouts each, lr {a.lr}, {a.threads} threads")
    print(f"start (shared model): held-out acc {_fmt(report['start_acc'])}")
    print(f"{'trainer':<10}{'train s':>9}{'rollouts/s':>12}   held-out acc (greedy)")
    for name in ("embedded", "trl"):
        r = report[name]
        print(f"{name:<10}{r['train_seconds']:>9.1f}{r['rollouts_per_s']:>12.1f}   {_fmt(r['heldout_acc'])}")
    print(f"throughput ratio embedded/trl: {report['throughput_ratio']:.2f}x")
    return 0


def _acc(rewards: list[float], wilson) -> dict:
    k, n = sum(1 for r in rewards if r >= 1.0), len(rewards)
    lo, hi = wilson(k, n)
    return {"correct": k, "n": n, "acc": round(k / n, 4) if n else None, "ci95": [round(lo, 4), round(hi, 4)]}


def _fmt(a: dict) -> str:
    return f"{a['acc']:.3f} ({a['correct']}/{a['n']}, 95% CI {a['ci95'][0]:.3f}-{a['ci95'][1]:.3f})"


if __name__ == "__main__":
    sys.exit(main())
