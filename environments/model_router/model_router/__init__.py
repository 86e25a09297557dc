"""model_router: choose which model should attempt a task, in both generations from one package.

Reward 1.0 for the oracle pick, 0.0 for another valid model, -1.0 for an unparseable answer or
an unknown model name. The answer format is `<model>NAME</model>`.

- v1 taskset (`ModelRouterTaskset` in __all__; fields `split` = train / test, `table_path`,
  `seed`, `eval_fraction`, `num_examples`).
- classic environment (`load_environment`, verifiers <= 0.3.1), imported on first call.
"""
from __future__ import annotations

from .rows import SYSTEM_PROMPT, make_row, route_reward_value  # noqa: F401  (as before)

__all__ = ["ModelRouterTaskset"]   # the taskset loader reads exactly one Taskset from it


def load_environment(table_path: str | None = None, seed: int = 0, eval_fraction: float = 0.2,
                     **kwargs):
    """The classic verifiers environment (needs verifiers <= 0.3.1)."""
    from .classic import load_environment as classic

    return classic(table_path=table_path, seed=seed, eval_fraction=eval_fraction, **kwargs)


def __getattr__(name: str):
    # the taskset on first use: verifiers.v1 takes seconds to import
    if name == "ModelRouterTaskset":
        from .taskset import ModelRouterTaskset

        return ModelRouterTaskset
    raise AttributeError(f"module 'model_router' has no attribute {name!r}")
