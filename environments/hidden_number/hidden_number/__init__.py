"""HiddenNumber-v1: find a hidden integer in a range from higher/lower feedback, within a guess
budget. A classic verifiers multi-turn environment (`load_environment`, verifiers <= 0.3.1); the
game's rules are in game.py, the env that plays them in classic.py.

Each row: `question` (the range and the budget), `answer` (the hidden number), `info` with `lo`,
`hi` (the range: the env's episode logic reads them) and `max_guesses` (the budget: the env
stops there and the reward counts guesses up to it). Reward 1 for finding it, else 0.
"""
from __future__ import annotations

from .game import SYSTEM_PROMPT, feedback, halving_moves, play, warm_start_corpus  # noqa: F401


def load_environment(seed: int = 0, num_train_examples: int = -1, num_eval_examples: int = -1,
                     max_turns: int = 8, **kwargs):
    """The classic multi-turn environment (needs verifiers <= 0.3.1)."""
    from .classic import load_environment as classic

    return classic(seed=seed, num_train_examples=num_train_examples,
                   num_eval_examples=num_eval_examples, max_turns=max_turns, **kwargs)
