"""The embedded trainer, top to bottom: `python -m embedded_trainer.rl @ a.toml [@ b.toml] [--flags]`.

It honours prime-rl's classic `rl` contract (config composition, absolute max_steps,
`[ckpt] resume_step`, the output layout, "RL training finished!" and a non-zero exit on
failure) so the driver launches it exactly as it launches prime-rl. One process does what
prime-rl spreads over an inference server, an orchestrator and a trainer:

  for each step:  draw prompts -> sample a group per prompt (behaviour log-probs kept) ->
                  score with the env's rubric -> group advantages -> clipped-surrogate
                  updates -> rollouts, checkpoints and evals on disk.

Everything random is a function of (seed, step), so an interrupted run resumed from a
checkpoint ends bit-identical to a continuous one.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from driver.dialects.classic import ClassicDialect
from embedded_trainer import config as cfgmod
from embedded_trainer.errors import TrainerError

FINISHED = "RL training finished!"
LAYOUT = ClassicDialect()   # the output layout this trainer writes is the one the driver reads


def log(msg: str) -> None:
    print(msg, flush=True)


# ---- small helpers ---------------------------------------------------------------------------

def write_jsonl(path: Path, rows: list[dict]) -> None:
    """Whole-file atomic write: a poller counting rows never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, default=str) + "\n")
    os.replace(tmp, path)


def load_env(block):
    import verifiers as vf

    try:
        return vf.load_environment(block.id, **block.args)
    except Exception as e:  # an env that is not installed, or whose loader fails
        raise TrainerError(f"cannot load environment {block.id!r} ({type(e).__name__}: {e}). "
                           f"Install it (e.g. `prime env install` or `pip install -e`) in this "
                           f"interpreter: {sys.executable}") from None


def env_name(block) -> str:
    return block.name or block.id


def allocate(total: int, ratios: list[float]) -> list[int]:
    """Prompts per env for one step: largest remainder over the ratios."""
    raw = [total * r / sum(ratios) for r in ratios]
    counts = [int(x) for x in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - counts[i], reverse=True)[:total - sum(counts)]:
        counts[i] += 1
    return counts


def draw(n_rows: int, seed: int, name: str, start: int, count: int) -> list[int]:
    """Positions [start, start+count) of an endless stream of seeded per-epoch permutations
    of the env's train rows: stateless, so resume needs only the step."""
    import random

    out, orders = [], {}
    for pos in range(start, start + count):
        epoch, k = divmod(pos, n_rows)
        if epoch not in orders:
            orders[epoch] = list(range(n_rows))
            random.Random(f"{seed}|{name}|{epoch}").shuffle(orders[epoch])
        out.append(orders[epoch][k])
    return out


# ---- checkpoints -----------------------------------------------------------------------------

def checkpoint_trees(out: Path, step: int) -> list[Path]:
    return LAYOUT.checkpoint_trees(out, step)


def save_checkpoint(out: Path, step: int, model, tokenizer, opt, progress: dict,
                    model_path: Path) -> None:
    """Each tree is written beside its final name and renamed into place, so a kill during a
    save never leaves a tree that looks complete."""
    import torch
    from safetensors.torch import save_model

    from embedded_trainer import recipe

    def staged(final: Path, write) -> None:
        tmp = final.with_name(final.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        write(tmp)
        (tmp / "STABLE").write_text("")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)

    trainer, weights, orch, broadcast = checkpoint_trees(out, step)

    def write_trainer(d: Path) -> None:
        (d / "trainer").mkdir()
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step},
                   d / "trainer" / "state.pt")

    def write_weights(d: Path) -> None:
        model.save_pretrained(d)
        tokenizer.save_pretrained(d)
        if (model_path / recipe.MARKER).exists():
            shutil.copy(model_path / recipe.MARKER, d / recipe.MARKER)

    def write_orch(d: Path) -> None:
        (d / "orchestrator").mkdir()
        (d / "orchestrator" / "progress.json").write_text(json.dumps(progress, indent=2))

    def write_broadcast(d: Path) -> None:
        save_model(model, str(d / "model.safetensors"))

    for final, write in ((trainer, write_trainer), (weights, write_weights),
                         (orch, write_orch), (broadcast, write_broadcast)):
        staged(final, write)


def resolve_resume(out: Path, resume_step: int) -> int:
    if resume_step == -1:
        steps = sorted(int(p.name[5:]) for p in (out / "checkpoints").glob("step_*")
                       if p.name[5:].isdigit() and (p / "STABLE").exists())
        if not steps:
            raise TrainerError(f"resume_step = -1 (latest) but {out}/checkpoints has no checkpoint")
        resume_step = steps[-1]
    missing = [str(t) for t in checkpoint_trees(out, resume_step) if not t.exists()]
    if missing:
        raise TrainerError(f"cannot resume from step {resume_step}: missing {', '.join(missing)}")
    return resume_step


# ---- model -----------------------------------------------------------------------------------

def load_model(name: str, warm_env, warm_key: str):
    """(policy, tokenizer, anchor path). `name` is a Hugging Face directory or the built-in
    recipe; hub names need the network, which this trainer never uses."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from embedded_trainer import recipe

    if recipe.is_recipe(name):
        try:
            path = recipe.materialize(name, warm_env, warm_key, log)
        except ValueError as e:
            raise TrainerError(str(e)) from None
    elif Path(name).expanduser().is_dir():
        path = Path(name).expanduser()
    else:
        raise TrainerError(
            f"model {name!r} is neither a model directory on disk nor {recipe.RECIPE_PREFIX}. "
            "The embedded trainer loads local Hugging Face directories only (download the model "
            "first, then pass its path as --model.name).")
    if (path / recipe.MARKER).exists():
        # AutoTokenizer would pick Qwen2's tokenizer class from config.json and re-tokenize
        # the character vocabulary differently; the tokenizer.json is authoritative here.
        from transformers import PreTrainedTokenizerFast
        tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    else:
        tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if tokenizer.eos_token_id is None:
        raise TrainerError(f"the tokenizer in {path} has no eos token")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer, path


# ---- the run ---------------------------------------------------------------------------------

def quiet_libraries() -> None:
    """Progress bars and advisory warnings would bury the one-line-per-step log."""
    import datasets
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()


def run(cfg: cfgmod.RLConfig) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from embedded_trainer import grpo
    from embedded_trainer.rollouts import decode, render_prompt, sample, score

    quiet_libraries()
    emb = cfg.embedded
    torch.set_num_threads(emb.threads or max(1, min(8, os.cpu_count() or 1)))
    device = torch.device("cuda" if emb.device == "cuda" or (
        emb.device == "auto" and torch.cuda.is_available()) else "cpu")
    out = Path(cfg.output_dir)
    orch = cfg.orchestrator
    resume = cfg.ckpt.resume_step if cfg.ckpt else None

    if resume is None and (out / "checkpoints").exists() and any((out / "checkpoints").iterdir()):
        if not cfg.clean_output_dir:
            raise TrainerError(f"{out} already holds checkpoints of another run; pass "
                               "--clean-output-dir, pick a new --output-dir, or resume with "
                               "--ckpt.resume-step")
        for sub in ("checkpoints", "weights", "run_default"):
            shutil.rmtree(out / sub, ignore_errors=True)

    # environments: train envs (with ratios) and eval envs, all through verifiers
    train_blocks = orch.train.env
    train_envs = [load_env(b) for b in train_blocks]
    train_rows = [list(e.get_dataset()) for e in train_envs]
    for b, rows in zip(train_blocks, train_rows):
        if not rows:
            raise TrainerError(f"train env {env_name(b)!r} has no train rows")
    eval_blocks = orch.eval.env if orch.eval else []
    eval_envs = [load_env(b) for b in eval_blocks]

    # the student and, for the KL term, its frozen anchor (the model before any RL)
    warm_block = eval_blocks[0] if eval_blocks else train_blocks[0]
    warm_env = eval_envs[0] if eval_envs else train_envs[0]
    model, tok, model_path = load_model(cfg.model.name, warm_env, json.dumps(
        {"id": warm_block.id, "args": warm_block.args}, sort_keys=True))
    model.to(device)
    anchor = None
    if emb.kl_beta > 0:
        anchor = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(device).eval()
        for p in anchor.parameters():
            p.requires_grad_(False)
    o = cfg.trainer.optim
    opt = torch.optim.AdamW(model.parameters(), lr=o.lr, weight_decay=o.weight_decay,
                            betas=(o.betas1, o.betas2))

    start = 0
    if resume is not None:
        start = resolve_resume(out, resume)
        state = torch.load(out / "checkpoints" / f"step_{start}" / "trainer" / "state.pt",
                           map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        # load_state_dict restores the saved run's hyperparameters too; the config in hand
        # decides them (as prime-rl's scheduler does on resume), so re-apply it
        for g in opt.param_groups:
            g.update(lr=o.lr, weight_decay=o.weight_decay, betas=(o.betas1, o.betas2))
        log(f"resumed from step {start}")
    if start >= cfg.max_steps:
        raise TrainerError(f"nothing to train: the run is at step {start} and max_steps is "
                           f"{cfg.max_steps}. max_steps is absolute: set it above {start}.")

    group = orch.rollouts_per_example
    n_prompts = orch.batch_size // group
    temperature = orch.train.sampling.temperature if orch.train.sampling.temperature is not None else 1.0
    max_new = orch.train.sampling.max_completion_tokens or emb.default_max_completion_tokens
    seq_len = min(orch.seq_len or cfg.seq_len, cfg.seq_len,
                  getattr(model.config, "max_position_embeddings", cfg.seq_len))
    per_env = allocate(n_prompts, [b.ratio or 1.0 for b in train_blocks])
    log(f"embedded trainer: {cfg.model.name} ({sum(p.numel() for p in model.parameters()):,} "
        f"params) on {device}, {torch.get_num_threads()} threads; steps {start + 1}..{cfg.max_steps}, "
        f"{n_prompts} prompts x {group} completions, max {max_new} new tokens, lr {o.lr}; train "
        + ", ".join(f"{env_name(b)} ({c}/step)" for b, c in zip(train_blocks, per_env))
        + (f"; eval {', '.join(env_name(b) for b in eval_blocks)}" if eval_blocks else ""))
    prompt_cache: dict = {}

    def prompt_ids(env_i: int, idx: int) -> list[int]:
        key = (env_i, idx)
        if key not in prompt_cache:
            ids = render_prompt(tok, train_rows[env_i][idx]["prompt"])
            if len(ids) + max_new > seq_len:
                raise TrainerError(
                    f"a prompt of {env_name(train_blocks[env_i])} is {len(ids)} tokens; with "
                    f"max_completion_tokens {max_new} it exceeds seq_len {seq_len}")
            prompt_cache[key] = ids
        return prompt_cache[key]

    ckpt_interval = cfg.ckpt.interval if cfg.ckpt and cfg.ckpt.interval else None

    def evaluate(step: int) -> None:
        rows_out = []
        for block, env in zip(eval_blocks, eval_envs):
            ds = list(env.get_eval_dataset())
            n = block.num_examples if block.num_examples > 0 else (orch.eval.num_examples or -1)
            ds = ds[:n] if n > 0 else ds
            rpe = block.rollouts_per_example
            temp = orch.eval.sampling.temperature
            temp = (0.0 if rpe == 1 else 1.0) if temp is None else temp
            limit = orch.eval.sampling.max_completion_tokens or emb.default_max_completion_tokens
            gen = torch.Generator(device=device).manual_seed(hash_seed(emb.seed, "eval", step))
            model.eval()
            for s in range(0, len(ds), 64):
                chunk = ds[s:s + 64]
                prompts = [render_prompt(tok, r["prompt"]) for r in chunk]
                t0 = time.perf_counter()
                res = sample(model, prompts, rpe, limit, temp, tok.eos_token_id, tok.pad_token_id, gen)
                gen_ms = (time.perf_counter() - t0) * 1000 / max(1, len(chunk) * rpe)
                texts = [decode(tok, res["tokens"][i], int(res["lengths"][i]), tok.eos_token_id)
                         for i in range(len(chunk) * rpe)]
                rows = [chunk[i // rpe] for i in range(len(texts))]
                trunc = res["truncated"].tolist()
                scores = score(env, rows, texts, trunc)
                for r, text, tr, sc in zip(rows, texts, trunc, scores):
                    rows_out.append(rollout_row(r, text, tr, sc, env_name(block), None, gen_ms))
            rewards = [r["reward"] for r in rows_out if r["env_name"] == env_name(block)]
            log(f"eval step {step} {env_name(block)}: mean reward "
                f"{sum(rewards) / max(1, len(rewards)):.4f} over {len(rewards)} rollouts")
        write_jsonl(LAYOUT.eval_file(out, step), rows_out)

    def eval_due(step: int) -> bool:
        if not eval_blocks:
            return False
        if step == cfg.max_steps:
            return True
        intervals = {b.interval or orch.eval.interval for b in eval_blocks}
        return any(step % i == 0 for i in intervals)

    if eval_blocks and ((start == 0 and orch.eval.eval_base_model) or
                        (start > 0 and not orch.eval.skip_eval_on_resume)):
        evaluate(start)

    for step in range(start + 1, cfg.max_steps + 1):
        t_step = time.perf_counter()
        gen = torch.Generator(device=device).manual_seed(hash_seed(emb.seed, "train", step))
        # 1. prompts: each env's share of the step, from its seeded stream
        picks = []
        for env_i, (block, count) in enumerate(zip(train_blocks, per_env)):
            if count:
                idxs = draw(len(train_rows[env_i]), emb.seed, env_name(block), (step - 1) * count, count)
                picks += [(env_i, i) for i in idxs]
        prompts = [prompt_ids(e, i) for e, i in picks]
        # 2. sample a group per prompt; the behaviour log-probs are kept as sampled
        model.eval()
        t0 = time.perf_counter()
        res = sample(model, prompts, group, max_new, temperature, tok.eos_token_id, tok.pad_token_id, gen)
        t_gen = time.perf_counter() - t0
        tokens, lengths, old_logp = res["tokens"], res["lengths"], res["logps"]
        texts = [decode(tok, tokens[k], int(lengths[k]), tok.eos_token_id) for k in range(len(tokens))]
        truncated = res["truncated"].tolist()
        # 3. score with each env's own rubric
        t0 = time.perf_counter()
        scores: list = [None] * len(texts)
        for env_i, env in enumerate(train_envs):
            ks = [k for k in range(len(texts)) if picks[k // group][0] == env_i]
            if ks:
                got = score(env, [train_rows[env_i][picks[k // group][1]] for k in ks],
                            [texts[k] for k in ks], [truncated[k] for k in ks])
                for k, sc in zip(ks, got):
                    scores[k] = sc
        t_score = time.perf_counter() - t0
        rewards = torch.tensor([s["reward"] for s in scores]).view(len(prompts), group)
        gar_records = None
        if emb.advantage == "gar":
            adv, gar_records = grader_advantages(emb.gar, rewards, texts,
                                                 [train_rows[e][i]["prompt"] for e, i in picks])
            constant = (adv == 0).all(1)
        else:
            adv, constant = grpo.group_advantages(rewards)
        # 4. rollouts on disk before the update (the teacher reads these)
        gen_ms = t_gen * 1000 / len(texts)
        rows = [rollout_row(train_rows[picks[k // group][0]][picks[k // group][1]], texts[k],
                            truncated[k], scores[k], env_name(train_blocks[picks[k // group][0]]),
                            float(adv.view(-1)[k]), gen_ms) for k in range(len(texts))]
        if gar_records is not None:
            for k, row in enumerate(rows):
                rec = gar_records[k // group]
                row["gar"] = {**rec["candidates"][k % group], "fallback_reason": rec["fallback_reason"]}
        write_jsonl(LAYOUT.train_file(out, step), rows)
        # 5. clipped-surrogate updates over shuffled minibatches of groups
        t0 = time.perf_counter()
        model.train()
        order = torch.randperm(len(prompts), generator=torch.Generator().manual_seed(
            hash_seed(emb.seed, "minibatches", step))).tolist()
        chunks = [order[i::emb.updates_per_batch] for i in range(emb.updates_per_batch)]
        width = tokens.shape[1]
        mask = grpo.completion_mask(lengths, width)
        losses, kls = [], []
        for chunk in chunks:
            if not chunk:
                continue
            opt.zero_grad(set_to_none=True)
            for p_i in chunk:
                if constant[p_i] and anchor is None:
                    continue  # exactly zero advantage and no KL term: no gradient to compute
                rs = slice(p_i * group, (p_i + 1) * group)
                logits = grpo.shared_prefix_logits(model, prompts[p_i], tokens[rs])
                new_logp = grpo.token_logprobs(logits, tokens[rs], temperature)
                loss = grpo.clipped_surrogate(new_logp, old_logp[rs].to(device), adv[p_i].to(device),
                                              mask[rs].to(device), emb.clip_epsilon)
                if anchor is not None:
                    with torch.no_grad():
                        ref = grpo.shared_prefix_logits(anchor, prompts[p_i], tokens[rs])
                    t = temperature if temperature > 0 else 1.0
                    kl = grpo.exact_kl(logits / t, ref / t, mask[rs].to(device))
                    loss = loss + emb.kl_beta * kl
                    kls.append(kl.item())
                (loss / len(chunk)).backward()   # mean over the minibatch's prompts
                losses.append(loss.item())
            torch.nn.utils.clip_grad_norm_(model.parameters(), o.max_norm)
            opt.step()
        t_update = time.perf_counter() - t0
        progress = {"step": step, "seed": emb.seed,
                    "consumed": {env_name(b): step * c for b, c in zip(train_blocks, per_env)}}
        mean_r = float(rewards.mean())
        if gar_records is not None:
            fallbacks = sum(r["fallback_reason"] is not None for r in gar_records)
            hacks = sum(c["hack"] == "confirmed" for r in gar_records for c in r["candidates"])
            log(f"step {step} gar: {fallbacks}/{len(gar_records)} groups fell back to zero, "
                f"{hacks} confirmed hacks")
        log(f"step {step}/{cfg.max_steps} reward {mean_r:.4f} zero-variance groups "
            f"{int(constant.sum())}/{len(prompts)} truncated {sum(truncated)}/{len(truncated)} "
            f"loss {sum(losses) / max(1, len(losses)):.5f}"
            + (f" kl {sum(kls) / len(kls):.5f}" if kls else "")
            + f" | gen {t_gen:.2f}s score {t_score:.2f}s update {t_update:.2f}s "
            f"total {time.perf_counter() - t_step:.2f}s")
        if (ckpt_interval and step % ckpt_interval == 0) or step == cfg.max_steps:
            save_checkpoint(out, step, model, tok, opt, progress, model_path)
        if eval_due(step):
            evaluate(step)


def grader_advantages(gcfg, rewards, texts: list[str], prompts: list) -> tuple:
    """GAR: each group's advantages from a grader's tiers ([P, G] tensor) and its records."""
    import torch

    from embedded_trainer import gar

    n_prompts, group = rewards.shape
    out, records = [], []
    for p_i in range(n_prompts):
        r = [float(x) for x in rewards[p_i]]
        t = texts[p_i * group:(p_i + 1) * group]
        if gcfg.grader == "rule":
            def grade(r=r):
                return gar.rule_verdict(r)
        else:
            task = "\n".join(str(m.get("content", "")) for m in prompts[p_i]
                             if isinstance(m, dict) and m.get("role") == "user")

            def grade(task=task, t=t):
                return gar.llm_verdict(gcfg, task, t)
        adv, rec = gar.group_advantages(grade, r, t)
        out.append(adv)
        records.append(rec)
    return torch.tensor(out, dtype=torch.float32), records


def hash_seed(*parts) -> int:
    import hashlib

    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:15], 16)


def rollout_row(row: dict, text: str, truncated: bool, sc: dict, name: str,
                advantage: float | None, gen_ms: float) -> dict:
    """One rollout in prime-rl's classic row shape."""
    out = {"example_id": row.get("example_id"), "env_name": name, "prompt": row.get("prompt"),
           "completion": [{"role": "assistant", "content": text}], "answer": row.get("answer", ""),
           "info": row.get("info") or {}, "task": row.get("task", "default"),
           "reward": sc["reward"], "metrics": sc["metrics"], "is_completed": not truncated,
           "is_truncated": bool(truncated), "stop_condition": "max_tokens" if truncated else "eos",
           "error": None, "timing": {"generation_ms": round(gen_ms, 3),
                                     "scoring_ms": round(sc["scoring_ms"], 3),
                                     "total_ms": round(gen_ms + sc["scoring_ms"], 3)},
           "filters": {}, "is_filtered": False}
    if advantage is not None:
        out["advantage"] = advantage
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        print("\nSchema (classic prime-rl keys; [embedded] is this trainer's own table):")
        print(json.dumps(cfgmod.RLConfig.model_json_schema()["properties"], indent=1)[:4000])
        return 0
    try:
        cfg = cfgmod.load(argv)
    except cfgmod.ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if cfg.wandb is not None:
        log("note: [wandb] is accepted but the embedded trainer logs to stdout and files only")
    try:
        run(cfg)
    except TrainerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    log(FINISHED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
