"""HiddenNumber-v1: find a hidden integer in a range from higher/lower feedback, within a guess
budget. A classic verifiers multi-turn environment (`load_environment`, verifiers <= 0.3.1); the
game's rules are in game.py, the env that plays them in classic.py.

Each row: `question` (the range and the budget), `answer` (the hidden number), `info` with `lo`,
`hi` (the range: the env's episode logic reads them) and `max_guesses` (the budget: the env
stops there and the reward counts guesses up to it). Reward 1 for finding it, else 0.
"""
from __future__ import annotations

from .game import SYSTEM_PROMPT, feedback, halving_moves, play, warm_start_corpus  # noqa: F401

# The embedded trainer's built-in student for this game (`driver run --backend local` takes it for
# the bare builtin:tiny-char-qwen2): the two-layer character-level Qwen2 warm-started by SFT on
# 600 x 32 fresh episodes of the halving player, a fifth of them opened with a guess at the
# range's low end; shipped prebuilt in embedded_trainer/prebuilt/.
STUDENT_RECIPE = "builtin:tiny-char-qwen2?corpus=stream&sft_steps=600&c_slip_share=0.2"


def load_environment(seed: int = 0, num_train_examples: int = -1, num_eval_examples: int = -1,
                     max_turns: int = 8, **kwargs):
    """The classic multi-turn environment (needs verifiers <= 0.3.1)."""
    from .classic import load_environment as classic

    return classic(seed=seed, num_train_examples=num_train_examples,
                   num_eval_examples=num_eval_examples, max_turns=max_turns, **kwargs)
