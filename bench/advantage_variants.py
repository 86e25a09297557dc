"""Does GRPO's negative half hurt the demo student? Two arms side by side from the same student,
on the same stream of fresh train-range rows (60% reaching a stock of 100, the planted
weakness), with the same sampling seeds:

  standard       group-normalised advantages, as the embedded trainer uses them
  positive-only  the same advantages with every negative one set to zero: only rollouts that
                 beat their group's mean are pushed up (rejection-sampling fine-tuning with
                 GRPO's weights), so a correct digit after an earlier slip is never pushed down

Each arm: one optimiser step per batch of P prompts x G completions, the trainer's clipped
surrogate and shared-prefix forward. Greedy accuracy on two fixed held-out sets of fresh
problems (none in any hub split; the test split is never read): three-digit stocks (the planted
skill) and two-digit ones (what the student already solves, so a loss there shows damage).

    python bench/advantage_variants.py                    # the prebuilt demo student, ~5 min
    python bench/advantage_variants.py --lr 3e-4 --steps 20
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="student directory or recipe (default: the prebuilt)")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--every", type=int, default=10, help="evaluate every N steps")
    a = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    import headroom_env as he
    import stock_arithmetic as sa
    from driver.analysis.evaluation import wilson_interval
    from driver.analysis.stats import paired
    from embedded_trainer import grpo
    from embedded_trainer.rollouts import decode, render_prompt, sample
    from generators import stock_arithmetic
    from rl_headroom import resolve_model
    from stock_arithmetic.verifier import score_response

    torch.set_num_threads(2)
    path = resolve_model(a.model)
    tok = PreTrainedTokenizerFast.from_pretrained(path)
    held = {"three": he.probe_rows("three", 120, seed=99),
            "two": [r for r in he.fresh_rows(400, 77, "fresh")
                    if max(stock_arithmetic.running(r["info"]["problem"])) < 100][:80]}
    train = he.fresh_rows(a.prompts * a.steps, 1234, "mix_three_digit")

    def prompt(q: str) -> list[int]:
        return render_prompt(tok, [{"role": "system", "content": sa.SYSTEM_PROMPT},
                                   {"role": "user", "content": q}])

    def scores(model, rows, group, temperature, gen) -> tuple[dict, list[list[float]]]:
        out = sample(model, [prompt(r["question"]) for r in rows], group, 96, temperature,
                     tok.eos_token_id, tok.pad_token_id, gen)
        r = [[float(score_response(decode(tok, out["tokens"][i * group + j],
                                          int(out["lengths"][i * group + j]), tok.eos_token_id),
                                   rows[i]["info"]["problem"], bool(out["truncated"][i * group + j])))
              for j in range(group)] for i in range(len(rows))]
        return out, r

    def greedy(model) -> dict[str, dict[str, int]]:
        model.eval()
        return {name: {str(i): int(g[0]) for i, g in enumerate(scores(model, rows, 1, 0.0, None)[1])}
                for name, rows in held.items()}

    def run_arm(negative: float) -> list[tuple[int, dict]]:
        model = AutoModelForCausalLM.from_pretrained(path)
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.99), weight_decay=0.0)
        history = [(0, greedy(model))]
        for step in range(1, a.steps + 1):
            rows = train[(step - 1) * a.prompts: step * a.prompts]
            model.eval()
            out, r = scores(model, rows, a.group, a.temperature, torch.Generator().manual_seed(step))
            adv, const = grpo.group_advantages(torch.tensor(r))
            adv = torch.where(adv < 0, adv * negative, adv)
            mask = grpo.completion_mask(out["lengths"], out["tokens"].shape[1])
            model.train()
            opt.zero_grad()
            for i in [i for i in range(len(rows)) if not const[i]]:   # as the trainer: mean over prompts
                span = slice(i * a.group, (i + 1) * a.group)
                logits = grpo.shared_prefix_logits(model, prompt(rows[i]["question"]), out["tokens"][span])
                new = grpo.token_logprobs(logits, out["tokens"][span], a.temperature)
                loss = grpo.clipped_surrogate(new, out["logps"][span], adv[i], mask[span], 0.2) / len(rows)
                loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if step % a.every == 0 or step == a.steps:
                history.append((step, greedy(model)))
        return history

    t0 = time.time()
    arms = {"standard": run_arm(1.0), "positive-only": run_arm(0.0)}
    print(f"student {path.name}; {a.steps} steps x {a.prompts} prompts x {a.group}, lr {a.lr}, "
          f"temperature {a.temperature}; held-out greedy accuracy, n = "
          f"{len(held['three'])} three-digit / {len(held['two'])} two-digit ({time.time() - t0:.0f} s)")
    print(f"{'step':>5}  " + "".join(f"{name + ' three':>22}{name + ' two':>20}" for name in arms))
    for k, (step, _) in enumerate(arms["standard"]):
        cells = ""
        for hist in arms.values():
            res = hist[k][1]
            cells += "".join(f"{100 * sum(res[s].values()) / len(res[s]):>{w}.1f}"
                             for s, w in (("three", 22), ("two", 20)))
        print(f"{step:>5}  {cells}")
    start = arms["standard"][0][1]
    for name, hist in arms.items():
        end = hist[-1][1]
        for s in ("three", "two"):
            k, n = sum(end[s].values()), len(end[s])
            lo, hi = wilson_interval(k, n)
            d = paired(start[s], end[s])
            print(f"{name:>13} {s:>5}: {100 * k / n:.1f} [{100 * lo:.1f}, {100 * hi:.1f}], lift vs "
                  f"the student {100 * d['lift']:+.1f} [{100 * d['lift_ci'][0]:+.1f}, "
                  f"{100 * d['lift_ci'][1]:+.1f}], McNemar p = {d['p_value']:.3g}")
    pos, std = arms["positive-only"][-1][1]["three"], arms["standard"][-1][1]["three"]
    d = paired(std, pos)
    print(f"positive-only vs standard, three-digit: {100 * d['lift']:+.1f} "
          f"[{100 * d['lift_ci'][0]:+.1f}, {100 * d['lift_ci'][1]:+.1f}], McNemar p = {d['p_value']:.3g}")


if __name__ == "__main__":
    main()
