"""StockArithmetic-v1 in both generations from one package.

- v1 taskset (`StockArithmeticTaskset`, exported in __all__ as prime-rl >= v0.8.1 requires):
  config fields `split` (train / validation / test / selection), `seed`, `num_examples`.
- classic environment (`load_environment`, verifiers <= 0.3.1): imported on first call, so
  this package imports under verifiers 0.4.0, which has no classic API.

The answer is one JSON object `{"final_stock": <int>}`, optionally after one leading
`<think>...</think>` block; reward 1 for a correct answer, 0 otherwise (0 when cut at the token
limit). `lenient_correct` reports the right number in any format; `population_ID50` and
`population_OOD100` label each row's population (the driver's population_<NAME> rule).
"""
from __future__ import annotations


__all__ = ["StockArithmeticTaskset"]


def load_environment(seed: int = 0, eval_split: str = "test", num_train_examples: int = -1,
                     num_eval_examples: int = -1, **kwargs):
    """The classic verifiers environment (needs verifiers <= 0.3.1); eval_split is "test",
    "validation" (seed 003's, all ID50) or "selection" (this project's, drawn like the test
    split, on which a best checkpoint is chosen)."""
    from .classic import load_environment as classic

    return classic(seed=seed, eval_split=eval_split, num_train_examples=num_train_examples,
                   num_eval_examples=num_eval_examples, **kwargs)


def __getattr__(name: str):
    # imported on first use: verifiers.v1 takes seconds to import, the classic form needs
    # verifiers <= 0.3.1, and the warm start needs neither
    if name == "StockArithmeticTaskset":
        from .taskset import StockArithmeticTaskset

        return StockArithmeticTaskset
    if name in ("correct_final_stock", "lenient_correct", "population_ID50", "population_OOD100",
                "StockAnswerParser", "SYSTEM_PROMPT"):
        from . import classic

        return getattr(classic, name)
    if name == "warm_start_corpus":
        from .warm_start import warm_start_corpus

        return warm_start_corpus
    raise AttributeError(f"module 'stock_arithmetic' has no attribute {name!r}")
