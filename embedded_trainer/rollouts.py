"""Sampling and scoring: prompts are the env's chat messages rendered with the model's chat
template; completions are scored by the env's own rubric through verifiers.

`sample_and_score` is the one pipeline (sample -> decode -> score) that training, evaluation
and the gradient probe all use; a multi-turn env's episodes are played by the env's own rollout
loop instead (embedded_trainer/episodes.py), and come back in the same shape, with a mask of the
model's own tokens. `rollout_row` writes its results in prime-rl's row shape.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import torch


def buffered_cache(layers: int, capacity: int):
    """A key/value cache whose layers write into buffers sized for the whole generation and hand
    attention a view of the filled part. transformers' DynamicCache concatenates the whole
    cache at every decoded token, which made that copy the largest single cost of sampling."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    class BufferLayer(DynamicLayer):
        def __init__(self):
            super().__init__()
            self.length = 0

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                b, h, _, d = key_states.shape
                self.device = key_states.device
                self.kbuf = key_states.new_zeros(b, h, capacity, d)
                self.vbuf = value_states.new_zeros(b, h, capacity, value_states.shape[-1])
                self.is_initialized = True
            n = key_states.shape[-2]
            self.kbuf[:, :, self.length:self.length + n] = key_states
            self.vbuf[:, :, self.length:self.length + n] = value_states
            self.length += n
            self.keys, self.values = self.kbuf[:, :, :self.length], self.vbuf[:, :, :self.length]
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.length

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self.length:
                self.kbuf = self.kbuf.repeat_interleave(repeats, 0)
                self.vbuf = self.vbuf.repeat_interleave(repeats, 0)
                self.keys, self.values = self.kbuf[:, :, :self.length], self.vbuf[:, :, :self.length]

    cache = DynamicCache()
    cache.layers = [BufferLayer() for _ in range(layers)]
    return cache


def render_prompt(tokenizer, messages) -> list[int]:
    text = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
    return tokenizer.encode(text, add_special_tokens=False)


@torch.no_grad()
def sample(model, prompts: list[list[int]], group: int, max_new: int, temperature: float,
           eos_id: int, pad_id: int, generator: torch.Generator | None,
           copy_prompt_cache: bool = False) -> dict:
    """KV-cached sampling of `group` completions per prompt. Each prompt is prefilled once; its
    group's completions then share that cache (see `shares_prompt_cache`) or, for an attention
    implementation that takes no custom mask (or with `copy_prompt_cache`, which the test and
    bench/sampler.py use to compare the two), get a copy each. temperature 0 means greedy.

    Returns completion ids [N*group, T] (pad after the end), their lengths, the behaviour
    log-probs of the sampled tokens under the sampling distribution (captured here and never
    recomputed), and whether each completion hit max_new without an end token."""
    device = next(model.parameters()).device
    n, width = len(prompts), max(len(p) for p in prompts)
    shared = group > 1 and not copy_prompt_cache and shares_prompt_cache(model)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((n, width), dtype=torch.long)
    for i, p in enumerate(prompts):  # left padding; positions count real tokens only
        ids[i, width - len(p):] = torch.tensor(p)
        prompt_mask[i, width - len(p):] = 1
    ids, prompt_mask = ids.to(device), prompt_mask.to(device)
    cache = buffered_cache(model.config.num_hidden_layers, width + (group if shared else 1) * max_new)
    pos = (prompt_mask.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=prompt_mask, position_ids=pos, cache=cache,
                   use_cache=True).logits[:, -1].float()
    logits = logits.repeat_interleave(group, 0)    # row i * group + j: prompt i's j-th completion
    positions = prompt_mask.sum(1, keepdim=True)   # the first completion token's position
    if shared:
        # One cache row per prompt: at step t the row takes its group's `group` new tokens, and
        # completion j attends to the prompt and to its own earlier tokens only (key slot
        # width + group * s + j for each step s <= t). The prompt's keys are read once per
        # step instead of once per completion: most of the bytes attention reads.
        mask = torch.zeros((n, 1, group, width + group * max_new), dtype=torch.bool, device=device)
        mask[..., :width] = prompt_mask.bool()[:, None, None, :]
        own = torch.arange(group, device=device)
    else:
        cache.batch_repeat_interleave(group)
        mask = torch.cat([prompt_mask, prompt_mask.new_zeros((n, max_new))], 1).repeat_interleave(group, 0)
        positions = positions.repeat_interleave(group, 0)
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
        step_in = torch.where(done, torch.full_like(nxt, pad_id), nxt)
        if shared:
            mask[:, 0, own, width + group * t + own] = True
            end = width + group * (t + 1)
            logits = model(input_ids=step_in.view(n, group), attention_mask=mask[..., :end],
                           position_ids=(positions + t).expand(n, group), cache=cache,
                           use_cache=True).logits.reshape(rows, -1).float()
        else:
            mask[:, width + t] = 1
            logits = model(input_ids=step_in[:, None], attention_mask=mask[:, :width + t + 1],
                           position_ids=positions + t, cache=cache,
                           use_cache=True).logits[:, -1].float()
    return {"tokens": tokens.cpu(), "lengths": lengths.cpu(), "logps": logps.cpu(),
            "truncated": (~done).cpu()}


def shares_prompt_cache(model) -> bool:
    """Can a group's completions share their prompt's cache? It needs an attention that takes a
    custom boolean 4D mask as given: transformers' SDPA does (torch's own convention, True =
    attend); eager attention adds the mask as floats, and flash attention takes none."""
    return getattr(model.config, "_attn_implementation", None) == "sdpa"


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


@dataclass
class Scored:
    """One batch of rollouts: rollout k answers prompt k // group."""
    tokens: torch.Tensor      # [R, T] completion ids (an episode: every token after the prompt)
    lengths: torch.Tensor     # [R] the model's own tokens
    logps: torch.Tensor       # [R, T] behaviour log-probs, as sampled (0 on the env's tokens)
    truncated: list[bool]
    texts: list[str]
    scores: list[dict]        # {"reward", "metrics", "scoring_ms"} (+ an episode's "completion")
    gen_s: float
    score_s: float
    mask: torch.Tensor | None = None   # [R, T] the model's own tokens: the loss reads only these

    def __post_init__(self):
        if self.mask is None:   # one completion each: its first `lengths` tokens
            self.mask = torch.arange(self.tokens.shape[1])[None, :] < self.lengths[:, None]

    @property
    def gen_ms_per_rollout(self) -> float:
        return self.gen_s * 1000 / max(1, len(self.texts))

    @staticmethod
    def join(parts: list["Scored"], groups: list[list[int]], group: int) -> "Scored":
        """The chosen prompt groups of batches sampled with one generation limit (so one token
        width) as one batch, in the order given (groups[i]: the prompts kept from parts[i])."""
        rows = [torch.tensor([p * group + j for p in keep for j in range(group)], dtype=torch.long)
                for keep in groups]
        pick = [(part, ix.tolist()) for part, ix in zip(parts, rows)]
        width = max(part.tokens.shape[1] for part in parts)   # episodes differ in length

        def cat(name: str, fill) -> torch.Tensor:
            return torch.cat([torch.nn.functional.pad(getattr(part, name)[ix], (0, width - part.tokens.shape[1]),
                                                      value=fill) for part, ix in zip(parts, rows)])

        return Scored(cat("tokens", 0), torch.cat([part.lengths[ix] for part, ix in zip(parts, rows)]),
                      cat("logps", 0.0),
                      [part.truncated[k] for part, ks in pick for k in ks],
                      [part.texts[k] for part, ks in pick for k in ks],
                      [part.scores[k] for part, ks in pick for k in ks],
                      sum(x.gen_s for x in parts), sum(x.score_s for x in parts), mask=cat("mask", False))


def sample_and_score(model, tok, prompts: list[list[int]], envs: list, rows: list[dict], group: int,
                     max_new: int, temperature: float, generator, seq_len: int | None = None) -> Scored:
    """Sample `group` completions for each prompt (prompt i is rows[i] of envs[i], rendered),
    decode them, and score each with its own env's rubric (one call per env, in order). Where
    an env is multi-turn, every prompt's episodes are played by their env's own rollout loop
    (episodes.py; `max_new` is then each turn's limit and `seq_len` the episode's)."""
    from embedded_trainer import episodes

    if any(episodes.is_multi_turn(e) or episodes.refusal(e) for e in dict.fromkeys(envs)):
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
