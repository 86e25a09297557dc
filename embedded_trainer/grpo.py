"""GRPO pieces, each a pure function so it can be checked on small tensors.

Conventions: a group is one prompt's completions; `mask` marks real completion tokens (the end
token included, padding excluded); log-probs are under the sampling temperature.
"""
from __future__ import annotations

import torch


def group_advantages(rewards: torch.Tensor, scale: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """rewards [P, G] -> advantages r - mean, divided by (std + 1e-8) with the population std
    when `scale` (seed 003's GRPO), and a [P] mask of zero-variance groups. A zero-variance
    group gets exactly zero advantage (float noise in the mean must not turn into a gradient).

    `scale=False` is Dr. GRPO's choice: dividing by the std gives a group with one odd
    rollout out of G an advantage of sqrt(G-1) on it (1.7 at G=4, 2.6 at G=8), so a student
    that nearly always solves a problem is pushed hardest on its rare sampling slips, and on
    every correct step that follows them."""
    rewards = rewards.double()
    mean = rewards.mean(1, keepdim=True)
    constant = (rewards == rewards[:, :1]).all(1)
    adv = rewards - mean
    if scale:
        adv = adv / (rewards.std(1, unbiased=False, keepdim=True) + 1e-8)
    adv[constant] = 0.0
    return adv.float(), constant


def clipped_surrogate(new_logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor,
                      mask: torch.Tensor, eps: float, length_norm: float | None = None) -> torch.Tensor:
    """-min(rho*A, clip(rho, 1-eps, 1+eps)*A) with rho = exp(new - old), averaged over each
    response's tokens, then over the group's responses. new/old/mask [G, T], adv [G].

    `length_norm` replaces each response's own token count by one constant (Dr. GRPO's choice,
    with the generation limit as the constant): under a per-response mean, a token shared by a
    group's short wrong answer and its long right ones gets a net push of A_wrong/L_short +
    sum(A_right)/L_long, which is not zero, so the correct steps before a slip that shortened
    the answer are pushed down; under a constant every token weighs the same."""
    ratio = torch.exp(new_logp - old_logp)
    a = adv[:, None]
    per_token = -torch.minimum(ratio * a, ratio.clamp(1 - eps, 1 + eps) * a)
    m = mask.to(per_token.dtype)
    denom = m.sum(1).clamp(min=1) if length_norm is None else float(length_norm)
    per_response = (per_token * m).sum(1) / denom
    return per_response.mean()


def exact_kl(policy_logits: torch.Tensor, anchor_logits: torch.Tensor, mask: torch.Tensor,
             block: int = 256) -> torch.Tensor:
    """KL(policy || anchor) per token, summed exactly over the whole vocabulary with full
    log-sum-exp normalisation, in blocks of rows to bound memory; averaged over each response's
    tokens, then over responses. logits [G, T, V], mask [G, T]."""
    g, t, v = policy_logits.shape
    p_flat, q_flat = policy_logits.reshape(-1, v), anchor_logits.reshape(-1, v)
    pieces = []
    for s in range(0, p_flat.shape[0], block):
        logp = torch.log_softmax(p_flat[s:s + block], -1)
        logq = torch.log_softmax(q_flat[s:s + block], -1)
        pieces.append((logp.exp() * (logp - logq)).sum(-1))
    per_token = torch.cat(pieces).reshape(g, t)
    m = mask.to(per_token.dtype)
    return ((per_token * m).sum(1) / m.sum(1).clamp(min=1)).mean()


def shared_prefix_logits(model, prefix: list[int], suffixes: torch.Tensor) -> torch.Tensor:
    """Logits that predict each suffix token after a shared prefix, [B, S, V]. The prefix runs
    once (batch 1) and its key/value cache is shared by the batch; gradients flow through it,
    so this equals a full forward of each prefix+suffix (checked in the tests) at a fraction of
    the cost. Suffixes may be right-padded: causal attention never lets a real token see one."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    b = suffixes.shape[0]
    prefix_cache = DynamicCache()
    head = model(input_ids=torch.tensor([prefix], device=device), cache=prefix_cache, use_cache=True)
    kv = [(layer.keys.expand(b, -1, -1, -1), layer.values.expand(b, -1, -1, -1))
          for layer in prefix_cache.layers]
    pos = torch.arange(len(prefix), len(prefix) + suffixes.shape[1], device=device)
    tail = model(input_ids=suffixes.to(device), cache=DynamicCache(ddp_cache_data=kv),
                 position_ids=pos[None].expand(b, -1), use_cache=False)
    return torch.cat([head.logits[:, -1:].expand(b, -1, -1), tail.logits[:, :-1]], 1).float()


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float) -> torch.Tensor:
    scaled = logits / temperature if temperature > 0 else logits
    return torch.log_softmax(scaled, -1).gather(-1, tokens[..., None].to(logits.device)).squeeze(-1)


def completion_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    return torch.arange(width)[None, :] < lengths[:, None]
