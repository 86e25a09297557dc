"""The pre-training gradient probe: does a dataset carry GRPO gradient for *this* student?

    python -m embedded_trainer.probe --model DIR --env-id ID [--env-args JSON] --prompts N
        --k K --max-tokens T [--temperature 1.0] [--seed S] [--min-live F] --output FILE

Samples K completions on N seeded train rows of the environment with the given model (a Hugging
Face directory, e.g. iter_0's `weights/step_N`, or the built-in recipe), scores them with the
environment's own rubric, and writes classic rollout rows to FILE. It trains nothing. The driver
runs `driver diagnose`'s numbers on the file: a dataset the student always solves, or never
solves, has no live groups and goes back to the teacher before any GPU time is spent on it.

With `--min-live F` (the driver's threshold) it samples CHUNK prompts at a time and stops as
soon as the live fraction's Wilson 95% interval lies wholly above or below F: a clear verdict
does not pay for all N prompts. A chunk is one sampling batch; the driver's 32 prompts are at
most two of them, and the earliest verdict comes after the first.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path


CHUNK = 16   # prompts per sampling batch


def clear(live: int, n: int, threshold: float) -> bool:
    """Is the live fraction's Wilson 95% interval after `n` groups wholly on one side?"""
    z = 1.96
    centre = (live + z * z / 2) / (n + z * z)
    half = z * ((live * (n - live) / n + z * z / 4) ** 0.5) / (n + z * z)
    return centre - half > threshold or centre + half < threshold


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m embedded_trainer.probe", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--env-id", required=True)
    p.add_argument("--env-args", default="{}")
    p.add_argument("--prompts", type=int, required=True)
    p.add_argument("--k", type=int, required=True)
    p.add_argument("--max-tokens", type=int, required=True)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--min-live", type=float, default=None,
                   help="stop early once the live fraction is clearly above or below this")
    p.add_argument("--output", required=True)
    a = p.parse_args(argv)

    from embedded_trainer.errors import TrainerError
    from embedded_trainer.common import (check_model_name, hash_seed, load_model, log, quiet_libraries,
                                         write_jsonl)

    try:
        check_model_name(a.model)
    except TrainerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    import torch

    from embedded_trainer.rollouts import render_prompt, rollout_row, sample_and_score
    from rl_contract.classic import SUCCESS_THRESHOLD

    quiet_libraries()
    torch.set_num_threads(a.threads or max(1, min(8, os.cpu_count() or 1)))
    try:
        import verifiers as vf

        env_args = json.loads(a.env_args)
        env = vf.load_environment(a.env_id, **env_args)
        rows = list(env.get_dataset())
        if not rows:
            raise TrainerError(f"{a.env_id} has no train rows to probe")
        picks = random.Random(a.seed).sample(range(len(rows)), min(a.prompts, len(rows)))
        model, tok, _ = load_model(a.model, env, json.dumps({"id": a.env_id, "args": env_args},
                                                            sort_keys=True))
        model.eval()
        t0 = time.perf_counter()
        gen = torch.Generator().manual_seed(hash_seed(a.seed, "probe"))
        out_rows, live = [], 0
        for s in range(0, len(picks), CHUNK):
            if a.min_live is not None and s >= CHUNK and clear(live, s, a.min_live):
                break
            chunk = [rows[i] for i in picks[s:s + CHUNK]]
            got = sample_and_score(model, tok, [render_prompt(tok, r["prompt"]) for r in chunk],
                                   [env] * len(chunk), chunk, a.k, a.max_tokens, a.temperature, gen)
            out_rows += [rollout_row(chunk[j // a.k], got.texts[j], got.truncated[j], got.scores[j],
                                     a.env_id, None, got.gen_ms_per_rollout)
                         for j in range(len(got.texts))]
            live += sum(len({sc["reward"] >= SUCCESS_THRESHOLD for sc in got.scores[j:j + a.k]}) > 1
                        for j in range(0, len(got.scores), a.k))
    except TrainerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    write_jsonl(Path(a.output), out_rows)
    mean = sum(r["reward"] for r in out_rows) / len(out_rows)
    log(f"probe: {len(out_rows) // a.k} of {len(picks)} prompts x {a.k} on {a.env_id}, mean reward {mean:.4f}, "
        f"{time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
