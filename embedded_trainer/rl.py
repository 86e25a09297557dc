"""The embedded trainer, top to bottom: `python -m embedded_trainer.rl @ a.toml [@ b.toml] [--flags]`.

It honours prime-rl's classic `rl` contract (config composition, absolute max_steps,
`[ckpt] resume_step`, the output layout, "RL training finished!" and a non-zero exit on
failure) so the driver launches it exactly as it launches prime-rl. One process does what
prime-rl spreads over an inference server, an orchestrator and a trainer. `run` is a setup,
then one loop whose ruled sections are the steps of GRPO:

  1. setup      environments, the student, its frozen anchor (KL), AdamW, a resume
  for each step:
  2. prompts    each train env's share of the step, from a seeded stream of its rows
  3. rollouts   a group of completions per prompt, behaviour log-probs kept; the env's rubric
                (a multi-turn or tool-using env plays each episode itself, the student's tool
                calls parsed as vLLM's hermes parser does: embedded_trainer/episodes.py)
  4. advantages group-relative (or a grader's tiers: GAR, embedded/gar.py)
  5. on disk    the step's rollout rows, before the update (the teacher reads these)
  6. update     clipped surrogate (+ exact KL) over shuffled minibatches of groups
  7. record     the log line, checkpoints, evals

Where it departs from textbook GRPO (DeepSeekMath's), and why:
- Exact KL to the starting model, summed over the whole vocabulary at every visited prefix
  (seed 003's variant), instead of the k3 estimator; off by default (kl_beta = 0).
- Loss averaged over each response's tokens, then responses, then prompts (seed 003), so a
  long response weighs no more than a short one.
- Advantages (r - mean) / (std + 1e-8) with the population std; `scale_advantages = false`
  drops the division (Dr. GRPO), which stops a rare slip of a mostly solved group from getting
  an advantage of sqrt(G - 1).
- A multi-turn episode is one sequence: the loss and its log-probs read the model's own
  tokens only (the env's feedback between turns is masked out); its reward is the rubric's
  over the whole episode.
- A zero-variance group gets exactly zero advantage and, without KL, costs no backward pass.
- Two updates per rollout batch on disjoint shuffled minibatches (`updates_per_batch`), not
  several epochs over the whole batch.
- `[orchestrator.buffer] online_difficulty_filtering` (prime-rl's classic key) refills a step
  with bounded, seeded extra draws instead of an asynchronous buffer (`sample_step`).
- `[embedded] length_normalization = "constant"` and `optimizer = "sgd"` exist for the benches
  that test them (bench/rl_headroom.py); the defaults are seed 003's and prime-rl's.
- Each prompt's KV cache is computed once and shared by its group, in sampling and in the
  update (exact: the tests compare with a full forward, logits and gradients).
- Everything random is a function of (seed, purpose, step), so an interrupted run resumed
  from a checkpoint ends bit-identical to a continuous one.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from embedded_trainer import config
from embedded_trainer.common import hash_seed, load_model, log, quiet_libraries, write_jsonl
from embedded_trainer.errors import TrainerError
from rl_contract.classic import ClassicLayout

FINISHED = "RL training finished!"
LAYOUT = ClassicLayout()   # the output layout this trainer writes is the one the driver reads


# ---- environments and prompt streams -------------------------------------------------------

def load_env(block):
    import verifiers as vf

    try:
        env = vf.load_environment(block.id, **block.args)
    except Exception as e:  # an env that is not installed, or whose loader fails
        raise TrainerError(f"cannot load environment {block.id!r} ({type(e).__name__}: {e}). "
                           f"Install it (e.g. `prime env install` or `pip install -e`) in this "
                           f"interpreter: {sys.executable}") from None
    return env


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
    missing = [str(t) for t in LAYOUT.resume_trees(out, resume_step) if not t.exists()]
    if missing:
        raise TrainerError(f"cannot resume from step {resume_step}: missing {', '.join(missing)}")
    return resume_step


# ---- the run ---------------------------------------------------------------------------------

@dataclass
class Setup:
    """Everything the loop reads, built once from the config (section 1 of `run`)."""
    cfg: config.RLConfig
    device: object
    out: Path
    model: object
    tok: object
    model_path: Path          # where the starting weights came from (its recipe marker is copied)
    anchor: object            # the frozen starting model for the KL term, or None
    opt: object
    train_blocks: list
    train_envs: list
    train_rows: list          # per train env, its rows
    per_env: list[int]        # prompts per step from each train env
    eval_blocks: list
    eval_envs: list
    start: int                # the step training resumes after (0 for a fresh run)
    group: int
    temperature: float
    max_new: int
    seq_len: int
    prompt_cache: dict


def setup(cfg: config.RLConfig) -> Setup:
    import torch
    from transformers import AutoModelForCausalLM

    from embedded_trainer import recipe

    emb, orch = cfg.embedded, cfg.orchestrator
    torch.set_num_threads(emb.threads or max(1, min(8, os.cpu_count() or 1)))
    device = torch.device("cuda" if emb.device == "cuda" or (
        emb.device == "auto" and torch.cuda.is_available()) else "cpu")
    out = Path(cfg.output_dir)
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
        {"id": warm_block.id, "args": warm_block.args}, sort_keys=True),
        progress=out / recipe.BUILD_PROGRESS)
    model.to(device)
    anchor = None
    if emb.kl_beta > 0:
        anchor = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(device).eval()
        for p in anchor.parameters():
            p.requires_grad_(False)
    if emb.freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    o = cfg.trainer.optim
    optimizer, hyper = ((torch.optim.SGD, {"momentum": o.betas1}) if emb.optimizer == "sgd" else
                        (torch.optim.AdamW, {"betas": (o.betas1, o.betas2)}))
    opt = optimizer(model.parameters(), lr=o.lr, weight_decay=o.weight_decay, **hyper)

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
            g.update(lr=o.lr, weight_decay=o.weight_decay, **hyper)
        log(f"resumed from step {start}")
    if start >= cfg.max_steps:
        raise TrainerError(f"nothing to train: the run is at step {start} and max_steps is "
                           f"{cfg.max_steps}. max_steps is absolute: set it above {start}.")

    temperature = orch.train.sampling.temperature
    run = Setup(
        cfg=cfg, device=device, out=out, model=model, tok=tok, model_path=model_path,
        anchor=anchor, opt=opt,
        train_blocks=train_blocks, train_envs=train_envs, train_rows=train_rows,
        per_env=allocate(orch.batch_size // orch.rollouts_per_example,
                         [b.ratio or 1.0 for b in train_blocks]),
        eval_blocks=eval_blocks, eval_envs=eval_envs, start=start,
        group=orch.rollouts_per_example, temperature=1.0 if temperature is None else temperature,
        max_new=orch.train.sampling.max_completion_tokens or emb.default_max_completion_tokens,
        seq_len=min(orch.seq_len or cfg.seq_len, cfg.seq_len,
                    getattr(model.config, "max_position_embeddings", cfg.seq_len)),
        prompt_cache={})
    log(f"embedded trainer: {cfg.model.name} ({sum(p.numel() for p in model.parameters()):,} "
        f"params) on {device}, {torch.get_num_threads()} threads; steps {start + 1}..{cfg.max_steps}, "
        f"{sum(run.per_env)} prompts x {run.group} completions, max {run.max_new} new tokens, lr {o.lr}; train "
        + ", ".join(f"{env_name(b)} ({c}/step)" for b, c in zip(train_blocks, run.per_env))
        + (f"; eval {', '.join(env_name(b) for b in eval_blocks)}" if eval_blocks else ""))
    return run


def prompt_ids(run: Setup, env_i: int, idx: int) -> list[int]:
    """A train row's rendered prompt, checked once against seq_len and cached."""
    from embedded_trainer.rollouts import render_prompt

    key = (env_i, idx)
    if key not in run.prompt_cache:
        ids = render_prompt(run.tok, run.train_rows[env_i][idx]["prompt"])
        if len(ids) + run.max_new > run.seq_len:
            raise TrainerError(
                f"a prompt of {env_name(run.train_blocks[env_i])} is {len(ids)} tokens; with "
                f"max_completion_tokens {run.max_new} it exceeds seq_len {run.seq_len}")
        run.prompt_cache[key] = ids
    return run.prompt_cache[key]


def step_picks(run: Setup, step: int, draw_i: int) -> list[tuple[int, int]]:
    """(env index, row index) of one draw of a step's prompts. Draw 0 is each env's share from
    its seeded stream; a refill draw k > 0 (online difficulty filtering) is a seeded sample of
    the same size keyed on (step, k), so a resumed run draws exactly what a continuous one did."""
    picks = []
    for env_i, (block, count) in enumerate(zip(run.train_blocks, run.per_env)):
        if count:
            n_rows, name = len(run.train_rows[env_i]), env_name(block)
            idxs = (draw(n_rows, run.cfg.embedded.seed, name, (step - 1) * count, count) if draw_i == 0
                    else draw(n_rows, run.cfg.embedded.seed, f"{name}|refill|{step}|{draw_i}", 0, count))
            picks += [(env_i, i) for i in idxs]
    return picks


def sample_step(run: Setup, step: int, gen) -> tuple:
    """Sections 2 and 3 of a step: draw prompts, sample a group for each, score it.

    With prime-rl's `[orchestrator.buffer] online_difficulty_filtering`, a group whose mean
    reward is 0.0 or 1.0 (no gradient) is left out of the batch and up to `embedded.max_refills`
    further draws fill its place, so the update sees as many live groups as the batch holds.
    Returns the batch (Scored), its picks, and the rollout rows of the groups left out
    (is_filtered, advantage 0), which still go on disk: the teacher reads every failure."""
    from embedded_trainer.rollouts import Scored, rollout_row, sample_and_score

    emb, group = run.cfg.embedded, run.group
    filtering = run.cfg.orchestrator.buffer.online_difficulty_filtering
    want = sum(run.per_env)
    parts, kept, batch_picks, dropped = [], [], [], []
    for draw_i in range(1 + (emb.max_refills if filtering else 0)):
        picks = step_picks(run, step, draw_i)
        rows = [run.train_rows[e][i] for e, i in picks]
        got = sample_and_score(run.model, run.tok, [prompt_ids(run, e, i) for e, i in picks],
                               [run.train_envs[e] for e, _ in picks], rows, group, run.max_new,
                               run.temperature, gen, run.seq_len)
        keep = []
        for p_i, pick in enumerate(picks):
            mean = sum(sc["reward"] for sc in got.scores[p_i * group:(p_i + 1) * group]) / group
            reason = ("online_difficulty" if filtering and mean in (0.0, 1.0) else
                      "batch_full" if len(batch_picks) >= want else None)
            if reason is None:
                keep.append(p_i)
                batch_picks.append(pick)
                continue
            for k in range(p_i * group, (p_i + 1) * group):
                row = rollout_row(rows[p_i], got.texts[k], got.truncated[k], got.scores[k],
                                  env_name(run.train_blocks[pick[0]]), 0.0, got.gen_ms_per_rollout)
                row.update(filters={reason: True}, is_filtered=True)
                dropped.append(row)
        parts.append(got)
        kept.append(keep)
        if len(batch_picks) >= want:
            break
    return Scored.join(parts, kept, group), batch_picks, dropped


def evaluate(run: Setup, step: int) -> None:
    """Every eval env's examples into the step's eval rollout file. An env of one rollout per
    example is sampled at the eval temperature (greedy unless one is set); an env of several is
    seed 003's stochastic draws, sampled as one group per example at the draw temperature
    (embedded.eval_draw_temperature), the random numbers of each batch drawn from a seed fixed
    by the env and the batch, never by the step or the weights, so every arm's draws of an
    example are sampled from the same random numbers (paired comparisons then differ by the
    policy alone). A greedy env and a draws env of the same examples (the driver's pairs: each
    split measured both ways) are sampled in one pass that reads each prompt's cache once for
    both (`eval_pairs`); what each gets is what it would get alone."""
    import torch

    from embedded_trainer.rollouts import (greedy_and_draws, render_prompt, rollout_row,
                                           sample_and_score)

    orch, emb = run.cfg.orchestrator, run.cfg.embedded
    limit = orch.eval.sampling.max_completion_tokens or emb.default_max_completion_tokens
    blocks, envs = run.eval_blocks, run.eval_envs
    examples = [eval_examples(run, b, e) for b, e in zip(blocks, envs)]
    pairs = eval_pairs(run, examples)      # {greedy env's index: its draws twin's}
    made: dict[int, list[dict]] = {}       # a draws env's rows, made beside its greedy twin
    rows_out = []
    run.model.eval()

    def rows(i: int, chunk: list[dict], got, rpe: int) -> list[dict]:
        return [rollout_row(chunk[k // rpe], got.texts[k], got.truncated[k], got.scores[k],
                            env_name(blocks[i]), None, got.gen_ms_per_rollout)
                for k in range(len(got.texts))]

    def sample_env(i: int) -> list[dict]:
        """Env i's rows; where it is a greedy env with a draws twin, the twin's rows too (kept
        in `made`). The draws' random numbers come from a seed of (draws env, batch) either way."""
        block, d = blocks[i], pairs.get(i)
        rpe, temp = block.rollouts_per_example, orch.eval.sampling.temperature
        temp = emb.eval_draw_temperature if rpe > 1 else (0.0 if temp is None else temp)
        seed_name, out = env_name(blocks[i if d is None else d]), []
        for s in range(0, len(examples[i]), 64):
            chunk = examples[i][s:s + 64]
            prompts = [render_prompt(run.tok, r["prompt"]) for r in chunk]
            gen = torch.Generator(device=run.device).manual_seed(hash_seed(emb.seed, "eval", seed_name, s))
            if d is None:
                got = sample_and_score(run.model, run.tok, prompts, [envs[i]] * len(chunk), chunk,
                                       rpe, limit, temp, gen, run.seq_len)
            else:
                twin, k = examples[d][s:s + 64], blocks[d].rollouts_per_example
                got, drawn = greedy_and_draws(run.model, run.tok, prompts, (envs[i], envs[d]),
                                              (chunk, twin), k, limit, emb.eval_draw_temperature, gen)
                made.setdefault(d, []).extend(rows(d, twin, drawn, k))
            out += rows(i, chunk, got, rpe)
        return out

    for i, block in enumerate(blocks):
        out = made.pop(i, None)
        if out is None:
            out = sample_env(i)
        rows_out += out
        log(f"eval step {step} {env_name(block)}: mean reward "
            f"{sum(r['reward'] for r in out) / max(1, len(out)):.4f} over {len(out)} rollouts")
    write_jsonl(LAYOUT.eval_file(run.out, step), rows_out)


def eval_examples(run: Setup, block, env) -> list[dict]:
    ds = list(env.get_eval_dataset())
    n = block.num_examples if block.num_examples > 0 else (run.cfg.orchestrator.eval.num_examples or -1)
    return ds[:n] if n > 0 else ds


def eval_pairs(run: Setup, examples: list[list[dict]]) -> dict[int, int]:
    """{greedy env's index: its draws twin's index}: a draws env after a greedy one of the same
    env id and arguments and the same examples (prompts compared), the greedy one at eval
    temperature 0. The greedy completions then ride in the draws' pass (a greedy slot in each
    prompt's shared cache), which needs SDPA attention and single-turn episodes; anything else
    is sampled env by env."""
    from embedded_trainer import episodes
    from embedded_trainer.rollouts import shares_prompt_cache

    if not shares_prompt_cache(run.model) or (run.cfg.orchestrator.eval.sampling.temperature or 0) > 0:
        return {}
    blocks, pairs = run.eval_blocks, {}
    for d, db in enumerate(blocks):
        if db.rollouts_per_example < 2 or episodes.is_multi_turn(run.eval_envs[d]):
            continue
        twin = next((g for g, gb in enumerate(blocks[:d])
                     if g not in pairs and gb.rollouts_per_example == 1 and (gb.id, gb.args) == (db.id, db.args)
                     and [r["prompt"] for r in examples[g]] == [r["prompt"] for r in examples[d]]), None)
        if twin is not None:
            pairs[twin] = d
    return pairs


def eval_due(run: Setup, step: int) -> bool:
    if not run.eval_blocks:
        return False
    if step == run.cfg.max_steps:
        return True
    intervals = {b.interval or run.cfg.orchestrator.eval.interval for b in run.eval_blocks}
    return any(step % i == 0 for i in intervals)


def run(cfg: config.RLConfig) -> None:
    import torch

    from embedded_trainer import grpo
    from embedded_trainer.rollouts import rollout_row

    # ---- 1. setup: environments, the student, its anchor, the optimiser, a resume -----------
    quiet_libraries()
    r = setup(cfg)
    emb, o = cfg.embedded, cfg.trainer.optim
    model, tok, group, device = r.model, r.tok, r.group, r.device
    if r.eval_blocks and ((r.start == 0 and cfg.orchestrator.eval.eval_base_model) or
                          (r.start > 0 and not cfg.orchestrator.eval.skip_eval_on_resume)):
        evaluate(r, r.start)
    ckpt_interval = cfg.ckpt.interval if cfg.ckpt and cfg.ckpt.interval else None
    filtering = cfg.orchestrator.buffer.online_difficulty_filtering

    for step in range(r.start + 1, cfg.max_steps + 1):
        t_step = time.perf_counter()
        gen = torch.Generator(device=device).manual_seed(hash_seed(emb.seed, "train", step))

        # ---- 2. prompts: each env's share of the step, from its seeded stream ---------------
        # ---- 3. rollouts: a group per prompt (behaviour log-probs kept), each env's rubric --
        model.eval()
        got, picks, dropped = sample_step(r, step, gen)
        prompts, rows = [prompt_ids(r, e, i) for e, i in picks], [r.train_rows[e][i] for e, i in picks]
        rewards = torch.tensor([sc["reward"] for sc in got.scores]).view(len(prompts), group)

        # ---- 4. advantages: group-relative (GRPO), or a grader's tiers (GAR) ----------------
        gar_records = None
        if emb.advantage == "gar":
            adv, gar_records = grader_advantages(emb.gar, rewards, got.texts, [x["prompt"] for x in rows])
            constant = (adv == 0).all(1)
        else:
            adv, constant = grpo.group_advantages(rewards, scale=emb.scale_advantages)

        # ---- 5. rollouts on disk before the update (the teacher reads these) ---------------
        out_rows = [rollout_row(rows[k // group], got.texts[k], got.truncated[k], got.scores[k],
                                env_name(r.train_blocks[picks[k // group][0]]),
                                float(adv.view(-1)[k]), got.gen_ms_per_rollout)
                    for k in range(len(got.texts))]
        if gar_records is not None:
            for k, row in enumerate(out_rows):
                rec = gar_records[k // group]
                row["gar"] = {**rec["candidates"][k % group], "fallback_reason": rec["fallback_reason"]}
        # filed where prime-rl files it: the batch of step s under rollouts/step_{s-1}
        write_jsonl(LAYOUT.train_file(r.out, LAYOUT.rows_step(step)), out_rows + dropped)

        # ---- 6. clipped-surrogate updates over shuffled minibatches of groups --------------
        t0 = time.perf_counter()
        model.train()
        order = torch.randperm(len(prompts), generator=torch.Generator().manual_seed(
            hash_seed(emb.seed, "minibatches", step))).tolist()
        chunks = [order[i::emb.updates_per_batch] for i in range(emb.updates_per_batch)]
        mask = got.mask   # the model's own tokens (an episode's env feedback is masked out)
        losses, kls, grad_norms = [], [], []
        for chunk in chunks:
            if not chunk:
                continue
            r.opt.zero_grad(set_to_none=True)
            for p_i in chunk:
                if constant[p_i] and r.anchor is None:
                    continue  # exactly zero advantage and no KL term: no gradient to compute
                rs = slice(p_i * group, (p_i + 1) * group)
                logits = grpo.shared_prefix_logits(model, prompts[p_i], got.tokens[rs])
                new_logp = grpo.token_logprobs(logits, got.tokens[rs], r.temperature)
                loss = grpo.clipped_surrogate(
                    new_logp, got.logps[rs].to(device), adv[p_i].to(device), mask[rs].to(device),
                    emb.clip_epsilon, r.max_new if emb.length_normalization == "constant" else None)
                if r.anchor is not None:
                    with torch.no_grad():
                        ref = grpo.shared_prefix_logits(r.anchor, prompts[p_i], got.tokens[rs])
                    t = r.temperature if r.temperature > 0 else 1.0
                    kl = grpo.exact_kl(logits / t, ref / t, mask[rs].to(device))
                    loss = loss + emb.kl_beta * kl
                    kls.append(kl.item())
                (loss / len(chunk)).backward()   # mean over the minibatch's prompts
                losses.append(loss.item())
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), o.max_norm)))
            r.opt.step()
        t_update = time.perf_counter() - t0

        # ---- 7. the step's log line, checkpoint and eval ------------------------------------
        progress = {"step": step, "seed": emb.seed,
                    "consumed": {env_name(b): step * c for b, c in zip(r.train_blocks, r.per_env)}}
        if gar_records is not None:
            fallbacks = sum(x["fallback_reason"] is not None for x in gar_records)
            hacks = sum(c["hack"] == "confirmed" for x in gar_records for c in x["candidates"])
            log(f"step {step} gar: {fallbacks}/{len(gar_records)} groups fell back to zero, "
                f"{hacks} confirmed hacks")
        # reward: over every rollout the step sampled (filtered groups too), what the student scores
        sampled = [float(x) for x in rewards.view(-1)] + [x["reward"] for x in dropped]
        log(f"step {step}/{cfg.max_steps} reward {sum(sampled) / max(1, len(sampled)):.4f} zero-variance groups "
            f"{int(constant.sum())}/{len(prompts)} truncated {sum(got.truncated)}/{len(got.truncated)} "
            + (f"filtered {len(dropped) // group} " if filtering else "")
            + f"loss {sum(losses) / max(1, len(losses)):.5f}"
            + (f" kl {sum(kls) / len(kls):.5f}" if kls else "")
            + f" grad_norm {max(grad_norms, default=0.0):.4f}"
            + f" | gen {got.gen_s:.2f}s score {got.score_s:.2f}s update {t_update:.2f}s "
            f"total {time.perf_counter() - t_step:.2f}s")
        if (ckpt_interval and step % ckpt_interval == 0) or step == cfg.max_steps:
            save_checkpoint(r.out, step, model, tok, r.opt, progress, r.model_path)
        if eval_due(r, step):
            evaluate(r, step)


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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        print("\nSchema (classic prime-rl keys; [embedded] is this trainer's own table):")
        print(json.dumps(config.RLConfig.model_json_schema()["properties"], indent=1)[:4000])
        return 0
    try:
        cfg = config.load(argv)
    except config.ConfigError as e:
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
