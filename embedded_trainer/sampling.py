"""Sampling from the student: prompts rendered with its chat template, KV-cached sampling of a
group of completions per prompt with their behaviour log-probs, and `Scored`, the batch of
rollouts every caller gets back. It knows no environment: single-turn scoring and rollout rows
are rollouts.py's, an env's episodes episodes.py's; both import this module, and it imports
neither.
"""
from __future__ import annotations

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
           copy_prompt_cache: bool = False, greedy_slot: bool = False) -> dict:
    """KV-cached sampling of `group` completions per prompt. Each prompt is prefilled once; its
    group's completions then share that cache (see `shares_prompt_cache`) or, for an attention
    implementation that takes no custom mask (or with `copy_prompt_cache`, which the test and
    bench/sampler.py use to compare the two), get a copy each. temperature 0 means greedy.

    Returns completion ids [N*group, T] (N*(group+1) with a greedy slot; pad after the end),
    their lengths, the behaviour log-probs of the sampled tokens under the sampling distribution
    (captured here and never recomputed), and whether each completion hit max_new without an
    end token.

    `greedy_slot` adds a greedy completion in front of each prompt's group, in the prompt's
    shared cache: rows i * (group + 1) + 0 are greedy, the next `group` are sampled at
    `temperature` by `generator` exactly as a call without it samples them (the same random
    numbers, drawn over the same rows). Seed 003 measures a policy both ways on one split; this
    reads each prompt's keys once for both instead of once for the greedy pass and once for the
    draws."""
    device = next(model.parameters()).device
    n, width = len(prompts), max(len(p) for p in prompts)
    k, group = group, group + int(greedy_slot)   # k draws; `group` from here counts greedy's slot too
    shared = group > 1 and not copy_prompt_cache and shares_prompt_cache(model)
    if greedy_slot and (not shared or temperature <= 0):
        raise ValueError("a greedy slot rides on sampled draws in a shared prompt cache (SDPA "
                         "attention, temperature > 0)")
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
        if greedy_slot:
            slots = logits.view(n, group, -1)
            g_next, g_lp = next_token(slots[:, 0], 0.0, None)
            d_next, d_lp = next_token(slots[:, 1:].reshape(n * k, -1), temperature, generator)
            nxt = torch.cat([g_next[:, None], d_next.view(n, k)], 1).reshape(rows)
            chosen = torch.cat([g_lp[:, None], d_lp.view(n, k)], 1).reshape(rows)
        else:
            nxt, chosen = next_token(logits, temperature, generator)
        live = ~done
        tokens[live, t] = nxt[live]
        logps[live, t] = chosen[live]
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


def next_token(logits: torch.Tensor, temperature: float, generator: torch.Generator | None):
    """Each row's next token (sampled at `temperature`, or its argmax at 0) and its log-prob
    under the distribution it was drawn from."""
    if temperature > 0:
        lp = torch.log_softmax(logits / temperature, -1)
        nxt = torch.multinomial(lp.exp(), 1, generator=generator).squeeze(1)
    else:
        lp = torch.log_softmax(logits, -1)
        nxt = lp.argmax(-1)
    return nxt, lp.gather(1, nxt[:, None]).squeeze(1)


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
