"""Can GRPO fix a weakness of *selection* (a habit the student has beside the right way) faster
than one of capability? Builds a variant of the demo student with a planted habit, then runs
bench/rl_headroom.py on it.

    python bench/selection_weakness.py [--slip-share 0.5] [--sft-steps 150] [-- RL_HEADROOM_FLAGS]

The variant: the first-stage demo student (recipe.BASE_RECIPE), SFT'd `--sft-steps` more steps
(batch 32, peak lr `--sft-lr`) on a fresh warm-start stream (`--three-digit-share`, default 35%,
of its problems reach a stock of 100; `--wide-share`, default 30%, have operands up to 100) with
a planted habit (`--habit`):
- carry: `--slip-share` of the reference completions forget the carry into the hundreds the
  first time the stock reaches 100 (112 is written 12, and the chain goes on from 12);
- peak: where the day's peak stock is at least `--habit-from`, `--slip-share` of them get the
  chain right and answer the peak instead of the closing stock (warm_start_corpus's
  peak_habit option; `--habit peak --slip-share 0.95 --habit-from 120 --sft-steps 500
  --wide-share 0.6 --three-digit-share -1 --seed 11` builds the second stage of the shipped
  demo student; the later stages, which this script does not build, are named in
  embedded_trainer/recipe.py above DEMO_RECIPE: pass a recipe to rl_headroom.py's --model).
The student then knows both ways; RL should only have to choose. No problem of any hub split is in the stream
(warm_start_corpus excludes them); the bench measures on validation and fresh sets only.

Flags after `--` go to rl_headroom.py (default: the anchor alone on 60%-three-digit rows with
online difficulty filtering, temperature 0.7, lr 1e-4).
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_FLAGS = ["--anchor-only", "--anchor-kind", "mix_three_digit", "--temperature", "0.7",
                 "--lr", "1e-4", "--filter"]


def slipped_completion(problem: dict) -> str:
    """The worked chain with the hundreds carry forgotten at the first stock of 100 or more."""
    stock, parts, slipped = problem["initial"], [str(problem["initial"])], False
    for sign, values in (("+", problem["deliveries"]), ("-", problem["withdrawals"])):
        for v in values:
            stock = stock + v if sign == "+" else stock - v
            if not slipped and stock >= 100:
                stock, slipped = stock % 100, True
            parts.append(f"{sign}{v}={stock}")
    return "<think>" + " ".join(parts) + "</think>" + json.dumps({"final_stock": stock})


def build(out: Path, steps: int, slip_share: float, lr: float, seed: int,
          three_digit_share: float, wide_share: float, habit: str = "carry",
          habit_from: int = 100) -> int:
    import torch
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    from embedded_trainer import recipe
    from stock_arithmetic.data import reference_completion
    from stock_arithmetic.warm_start import reaches_three_digits, warm_start_corpus

    from rl_headroom import default_model

    src = default_model(recipe.BASE_RECIPE)   # the first stage: no habit planted yet
    tok = PreTrainedTokenizerFast.from_pretrained(src)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    peak = {"peak_habit_share": slip_share, "peak_habit_from": habit_from} if habit == "peak" else {}
    rows = warm_start_corpus(steps * 32, seed=seed, three_digit_share=three_digit_share,
                             wide_share=wide_share, mixed_share=0.6, **peak)
    rng, slipped = random.Random(f"slip|{seed}"), 0
    for r in rows:
        p = r["info"]["problem"]
        if habit == "peak":   # planted by the corpus itself (the demo student's second stage)
            slipped += r["info"]["reference_completion"] != reference_completion(p)
        elif reaches_three_digits(p) and rng.random() < slip_share:
            r["info"]["reference_completion"] = slipped_completion(p)
            slipped += 1
    torch.set_num_threads(2)
    spec = dict(recipe.DEFAULTS, sft_steps=steps, sft_lr=lr, corpus="stream", seed=seed)
    recipe.sft(model, recipe.sft_examples(rows, tok), spec)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    shutil.copy(src / recipe.MARKER, out / recipe.MARKER)   # the tokenizer class marker
    return slipped


def main() -> None:
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else DEFAULT_FLAGS
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slip-share", type=float, default=0.5,
                    help="share of three-digit reference completions that forget the carry")
    ap.add_argument("--sft-steps", type=int, default=150, help="SFT steps on the slipped stream")
    ap.add_argument("--sft-lr", type=float, default=1e-3, help="peak SFT learning rate")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--three-digit-share", type=float, default=0.35,
                    help="share of the stream whose stock reaches 100 (negative: the natural share)")
    ap.add_argument("--wide-share", type=float, default=0.3,
                    help="share of the stream with operands up to 100")
    ap.add_argument("--habit", choices=("carry", "peak"), default="carry",
                    help="carry: the hundreds carry forgotten at the first stock of 100 or more; "
                    "peak: the chain right, the answer the day's peak stock instead of the closing one")
    ap.add_argument("--habit-from", type=int, default=100,
                    help="with --habit peak: the habit applies only where the day's peak stock is "
                    "at least this (default 100)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="save the variant student here; a later call with the same flags reuses "
                         "it instead of rebuilding (other flags are refused)")
    a = ap.parse_args(argv)
    if a.habit == "carry" and a.habit_from != 100:
        ap.error("--habit-from applies to --habit peak only: the carry slip happens where the "
                 "stock first reaches 100")
    work = Path(tempfile.mkdtemp(prefix="selection-weakness-"))
    student = a.keep or work / "student"
    recipe = {k: v for k, v in vars(a).items() if k != "keep"}   # what the variant is built from
    try:
        if (student / "variant.json").exists():
            kept = json.loads((student / "variant.json").read_text())
            if kept != recipe:
                sys.exit(f"{student} holds a variant built with {kept}, not {recipe}: pass another "
                         "--keep directory, or the flags it was built with")
            print(f"variant: reusing {student} ({kept})", flush=True)
        else:
            started = time.monotonic()
            slipped = build(student, a.sft_steps, a.slip_share, a.sft_lr, a.seed,
                            a.three_digit_share, a.wide_share, a.habit, a.habit_from)
            (student / "variant.json").write_text(json.dumps(recipe))
            print(f"variant: the demo student + {a.sft_steps} SFT steps on {a.sft_steps * 32} fresh "
                  f"rows, {slipped} of them with the {a.habit} habit "
                  f"({time.monotonic() - started:.0f} s)", flush=True)
        subprocess.run([sys.executable, str(ROOT / "bench" / "rl_headroom.py"), "--model",
                        str(student), *rest], check=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
