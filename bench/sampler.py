"""The sampler's two cache layouts side by side: a group's completions sharing their prompt's
cache (one row per prompt, a 4D mask) against a copy of the prompt's cache per completion (what
an attention without custom masks gets). Same model, prompts and generator seeds, alternating
runs; prints each layout's time per batch, the ratio, and whether they drew the same tokens.

    python bench/sampler.py [--model DIR|RECIPE] [--prompts 16] [--group 4] [--repeats 6]

Defaults are one training step of the demo: 16 of the hub env's train prompts x 4 completions,
temperature 0.7, at most 96 new tokens, 2 threads.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="builtin:tiny-char-qwen2")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--repeats", type=int, default=6, help="runs per layout, alternating")
    a = ap.parse_args()

    import torch

    from bench.demo_batch import alternate, demo_batch
    from embedded_trainer import rollouts

    model, tok, prompts = demo_batch(a.model, a.prompts)
    layouts = {"shared prompt cache": False, "copied per completion": True}   # copy_prompt_cache
    print(f"{a.prompts} prompts x {a.group}, max {a.max_tokens} new tokens, temperature "
          f"{a.temperature}, {a.repeats} runs per layout (attention: {model.config._attn_implementation}; "
          f"shares the prompt cache: {rollouts.shares_prompt_cache(model)})")

    def route(copy: bool):
        def run(rep: int):
            out = rollouts.sample(model, prompts, a.group, a.max_tokens, a.temperature, tok.eos_token_id,
                                  tok.pad_token_id, torch.Generator().manual_seed(rep), copy_prompt_cache=copy)
            return out["tokens"], out["logps"]
        return run

    times, drawn = alternate({name: route(copy) for name, copy in layouts.items()}, a.repeats)
    same = all(torch.equal(x[0][0], x[1][0]) for x in drawn.values())
    diff = max(float((x[0][1] - x[1][1]).abs().max()) for x in drawn.values())
    ratio = statistics.median(times["shared prompt cache"]) / statistics.median(times["copied per completion"])
    print(f"shared / copied: {ratio:.2f}; same tokens drawn: {same}; largest log-prob difference {diff:.1e}")


if __name__ == "__main__":
    main()
