"""Sampling and scoring: prompts are the env's chat messages rendered with the model's chat
template; completions are scored by the env's own rubric through verifiers.

`sample_and_score` is the one pipeline (sample -> decode -> score) that training, evaluation
and the gradient probe all use; a multi-turn env's episodes (a tool-using env's too) are played
by the env's own rollout loop instead (embedded_trainer/episodes.py), and come back in the same
shape, with a mask of the model's own tokens. `rollout_row` writes its results in prime-rl's row
shape. The sampling itself is sampling.py's: imports point sampling <- episodes <- rollouts.
"""
from __future__ import annotations

import asyncio
import time

import torch

from embedded_trainer import episodes
from embedded_trainer.sampling import (Scored, buffered_cache, decode, render_prompt, sample,
                                       shares_prompt_cache)

# the sampling names callers have always imported from here
__all__ = ["Scored", "buffered_cache", "decode", "greedy_and_draws", "render_prompt", "rollout_row",
           "sample", "sample_and_score", "score", "shares_prompt_cache"]


def score(env, rows: list[dict], texts: list[str], truncated: list[bool]) -> list[dict]:
    """Score each completion with the env's own rubric (verifiers State objects)."""
    from verifiers.types import State

    async def one(row, text, trunc):
        st = State(input={"prompt": row["prompt"], "answer": row.get("answer", ""),
                          "info": row.get("info") or {}, "example_id": row["example_id"],
                          "task": row.get("task", "default")})
        st["completion"] = [{"role": "assistant", "content": text}]
        st["trajectory"] = []
        st["is_truncated"] = bool(trunc)
        t0 = time.perf_counter()
        await env.rubric.score_rollout(st)
        return {"reward": float(st["reward"]), "metrics": dict(st.get("metrics") or {}),
                "scoring_ms": (time.perf_counter() - t0) * 1000}

    async def run():
        return await asyncio.gather(*(one(r, t, tr) for r, t, tr in zip(rows, texts, truncated)))

    return asyncio.run(run())


def sample_and_score(model, tok, prompts: list[list[int]], envs: list, rows: list[dict], group: int,
                     max_new: int, temperature: float, generator, seq_len: int | None = None) -> Scored:
    """Sample `group` completions for each prompt (prompt i is rows[i] of envs[i], rendered),
    decode them, and score each with its own env's rubric (one call per env, in order). Where
    an env is multi-turn, every prompt's episodes are played by their env's own rollout loop
    (episodes.py; `max_new` is then each turn's limit and `seq_len` the episode's)."""
    if any(episodes.is_multi_turn(e) for e in dict.fromkeys(envs)):
        limit = seq_len or getattr(model.config, "max_position_embeddings", 2048)
        return episodes.play_and_score(model, tok, prompts, envs, rows, group, max_new, temperature,
                                       generator, limit)
    t0 = time.perf_counter()
    res = sample(model, prompts, group, max_new, temperature, tok.eos_token_id, tok.pad_token_id,
                 generator)
    gen_s = time.perf_counter() - t0
    n = len(res["tokens"])
    texts = [decode(tok, res["tokens"][k], int(res["lengths"][k]), tok.eos_token_id) for k in range(n)]
    truncated = res["truncated"].tolist()
    t0 = time.perf_counter()
    scores: list = [None] * n
    order = list(dict.fromkeys(map(id, envs)))   # each env once, in order of first use
    for env_key in order:
        ks = [k for k in range(n) if id(envs[k // group]) == env_key]
        env = envs[ks[0] // group]
        got = score(env, [rows[k // group] for k in ks], [texts[k] for k in ks],
                    [truncated[k] for k in ks])
        for k, sc in zip(ks, got):
            scores[k] = sc
    return Scored(res["tokens"], res["lengths"], res["logps"], truncated, texts, scores, gen_s,
                  time.perf_counter() - t0)


def greedy_and_draws(model, tok, prompts: list[list[int]], envs: tuple, rows: tuple, group: int,
                     max_new: int, temperature: float, generator) -> tuple[Scored, Scored]:
    """One split measured both ways seed 003 measures it, in one pass (sample's `greedy_slot`):
    each prompt's greedy completion, scored by envs[0] against rows[0], and its `group` draws at
    `temperature` from `generator`, scored by envs[1] against rows[1]. The draws are the ones a
    draws-only call samples; the greedy completions the ones a greedy call decodes."""
    t0 = time.perf_counter()
    res = sample(model, prompts, group, max_new, temperature, tok.eos_token_id, tok.pad_token_id,
                 generator, greedy_slot=True)
    gen_s = time.perf_counter() - t0
    per = group + 1
    out = []
    for ks, env, env_rows in ((list(range(0, len(res["tokens"]), per)), envs[0], rows[0]),
                              ([k for k in range(len(res["tokens"])) if k % per], envs[1], rows[1])):
        ix = torch.tensor(ks, dtype=torch.long)
        texts = [decode(tok, res["tokens"][k], int(res["lengths"][k]), tok.eos_token_id) for k in ks]
        truncated = res["truncated"][ix].tolist()
        t0 = time.perf_counter()
        scores = score(env, [env_rows[k // per] for k in ks], texts, truncated)
        out.append(Scored(res["tokens"][ix], res["lengths"][ix], res["logps"][ix], truncated, texts,
                          scores, gen_s * len(ks) / len(res["tokens"]), time.perf_counter() - t0))
    return out[0], out[1]


def rollout_row(row: dict, text: str, truncated: bool, sc: dict, name: str,
                advantage: float | None, gen_ms: float) -> dict:
    """One rollout in prime-rl's classic row shape."""
    episode = sc.get("completion")   # a multi-turn episode: its messages, the env's included
    out = {"example_id": row.get("example_id"), "env_name": name, "prompt": row.get("prompt"),
           "completion": episode if episode is not None else [{"role": "assistant", "content": text}],
           "answer": row.get("answer", ""),
           "info": row.get("info") or {}, "task": row.get("task", "default"),
           "reward": sc["reward"], "metrics": sc["metrics"], "is_completed": not truncated,
           "is_truncated": bool(truncated),
           "stop_condition": sc.get("stop_condition") or ("max_tokens" if truncated else "eos"),
           "error": sc.get("error"), "timing": {"generation_ms": round(gen_ms, 3),
                                     "scoring_ms": round(sc["scoring_ms"], 3),
                                     "total_ms": round(gen_ms + sc["scoring_ms"], 3)},
           "filters": {}, "is_filtered": False}
    if advantage is not None:
        out["advantage"] = advantage
    return out
