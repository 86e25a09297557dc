"""Seed 003's two measurements of a split, sampled two ways side by side: a greedy pass and a
draws pass (the route every arm's eval took before), against one pass where each prompt's
greedy completion rides in its shared cache beside the draws (`sample(..., greedy_slot=True)`,
what `embedded_trainer.rl.evaluate` does now for the driver's greedy/draws pairs). Same model,
prompts and generator seeds, alternating runs; prints each route's time, the ratio, and whether
both decoded the same greedy tokens and drew the same draws.

    python bench/eval_pass.py [--model DIR|RECIPE] [--prompts 64] [--draws 4] [--repeats 3]

Defaults are one eval batch of the demo: 64 prompts, 4 draws each at temperature 1.0, at most
96 new tokens, 2 threads. The prompts are the hub env's train prompts (an eval split's are
never read here); they have the eval prompts' shape.
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
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--draws", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--temperature", type=float, default=1.0, help="the draws' (seed 003's: 1.0)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per route, alternating")
    a = ap.parse_args()

    import torch

    from bench.demo_batch import alternate, demo_batch
    from embedded_trainer import sampling

    model, tok, prompts = demo_batch(a.model, a.prompts)
    eos, pad, k = tok.eos_token_id, tok.pad_token_id, a.draws

    def two_passes(seed: int):
        greedy = sampling.sample(model, prompts, 1, a.max_tokens, 0.0, eos, pad, None)
        drawn = sampling.sample(model, prompts, k, a.max_tokens, a.temperature, eos, pad,
                                torch.Generator().manual_seed(seed))
        return as_lists(greedy["tokens"]), as_lists(drawn["tokens"])

    def one_pass(seed: int):
        both = sampling.sample(model, prompts, k, a.max_tokens, a.temperature, eos, pad,
                               torch.Generator().manual_seed(seed), greedy_slot=True)
        rows_ = torch.arange(len(both["tokens"]))
        return as_lists(both["tokens"][rows_ % (k + 1) == 0]), as_lists(both["tokens"][rows_ % (k + 1) != 0])

    def as_lists(t):   # every row is max_new wide, padded after its end
        return [x.tolist() for x in t]

    routes = {"greedy pass + draws pass": two_passes, "one pass, greedy slot": one_pass}
    print(f"{a.prompts} prompts: greedy + {k} draws each at temperature {a.temperature}, max "
          f"{a.max_tokens} new tokens, {a.repeats} runs per route (attention: "
          f"{model.config._attn_implementation})")
    times, got = alternate(routes, a.repeats)
    same_g = all(x[0][0] == x[1][0] for x in got.values())
    same_d = all(x[0][1] == x[1][1] for x in got.values())
    ratio = statistics.median(times["one pass, greedy slot"]) / statistics.median(times["greedy pass + draws pass"])
    print(f"one pass / two passes: {ratio:.2f}; same greedy tokens: {same_g}; same draws: {same_d}")


if __name__ == "__main__":
    main()
