"""The demo student and a batch of the hub env's train prompts rendered for it, on 2 threads:
what the sampling benches (sampler.py, eval_pass.py) time their routes on."""
from __future__ import annotations

import json


def demo_batch(model_name: str, n: int):
    """(model in eval mode, tokenizer, the first n train prompts of stock_arithmetic as ids)."""
    import torch
    import verifiers as vf

    from embedded_trainer.common import load_model, quiet_libraries
    from embedded_trainer.sampling import render_prompt

    quiet_libraries()
    torch.set_num_threads(2)
    env = vf.load_environment("stock_arithmetic")
    rows = list(env.get_dataset())[:n]
    model, tok, _ = load_model(model_name, env, json.dumps({"id": "stock_arithmetic", "args": {}},
                                                           sort_keys=True))
    model.eval()
    return model, tok, [render_prompt(tok, r["prompt"]) for r in rows]


def alternate(routes: dict, repeats: int) -> tuple[dict, dict]:
    """Each route (name -> a function of the round) once per round, in turn, for repeats + 1
    rounds; the first round warms up and is not timed. Returns {name: [seconds]} and
    {round: [each route's output, in order]}."""
    import statistics
    import time

    times: dict = {name: [] for name in routes}
    outputs: dict = {}
    for rep in range(repeats + 1):
        for name, route in routes.items():
            t0 = time.perf_counter()
            out = route(rep)
            if rep:
                times[name].append(time.perf_counter() - t0)
            outputs.setdefault(rep, []).append(out)
    for name, ts in times.items():
        print(f"{name:<26} median {statistics.median(ts):.3f} s  (min {min(ts):.3f}, max {max(ts):.3f})")
    return times, outputs
