"""Sampling and scoring: prompts are the env's chat messages rendered with the model's chat
template; completions are scored by the env's own rubric through verifiers."""
from __future__ import annotations

import asyncio
import time

import torch


def render_prompt(tokenizer, messages) -> list[int]:
    text = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
    return tokenizer.encode(text, add_special_tokens=False)


@torch.no_grad()
def sample(model, prompts: list[list[int]], group: int, max_new: int, temperature: float,
           eos_id: int, pad_id: int, generator: torch.Generator | None) -> dict:
    """KV-cached sampling of `group` completions per prompt. Each prompt is prefilled once and
    its cache repeated for its group. temperature 0 means greedy.

    Returns completion ids [N*group, T] (pad after the end), their lengths, the behaviour
    log-probs of the sampled tokens under the sampling distribution (captured here and never
    recomputed), and whether each completion hit max_new without an end token."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    n, width = len(prompts), max(len(p) for p in prompts)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    for i, p in enumerate(prompts):  # left padding; positions count real tokens only
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)
    cache = DynamicCache()
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, cache=cache,
                   use_cache=True).logits[:, -1].float()
    if group > 1:
        cache.batch_repeat_interleave(group)
        mask = mask.repeat_interleave(group, 0)
        logits = logits.repeat_interleave(group, 0)
    rows = n * group
    tokens = torch.full((rows, max_new), pad_id, dtype=torch.long, device=device)
    logps = torch.zeros((rows, max_new), dtype=torch.float32, device=device)
    lengths = torch.zeros(rows, dtype=torch.long, device=device)
    done = torch.zeros(rows, dtype=torch.bool, device=device)
    for t in range(max_new):
        if temperature > 0:
            lp = torch.log_softmax(logits / temperature, -1)
            nxt = torch.multinomial(lp.exp(), 1, generator=generator).squeeze(1)
        else:
            lp = torch.log_softmax(logits, -1)
            nxt = lp.argmax(-1)
        live = ~done
        tokens[live, t] = nxt[live]
        logps[live, t] = lp.gather(1, nxt[:, None]).squeeze(1)[live]
        lengths += live.long()
        done |= nxt == eos_id
        if bool(done.all()) or t == max_new - 1:
            break
        mask = torch.cat([mask, torch.ones((rows, 1), dtype=mask.dtype, device=device)], 1)
        step_in = torch.where(done, torch.full_like(nxt, pad_id), nxt)
        logits = model(input_ids=step_in[:, None], attention_mask=mask,
                       position_ids=(mask.sum(1, keepdim=True) - 1), cache=cache,
                       use_cache=True).logits[:, -1].float()
    return {"tokens": tokens.cpu(), "lengths": lengths.cpu(), "logps": logps.cpu(),
            "truncated": (~done).cpu()}


def decode(tokenizer, tokens: torch.Tensor, length: int, eos_id: int) -> str:
    ids = tokens[:length].tolist()
    if ids and ids[-1] == eos_id:
        ids = ids[:-1]
    return tokenizer.decode(ids, skip_special_tokens=False)


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
