"""canary_stock with a selection split: its loader takes `eval_split`, so the driver finds the
validation split and evaluates it as the selection split beside the test split, and the canary
is planted in every prompt and answer of both (tests only). The train split carries none.
"""
import verifiers as vf
from canary_stock import CANARY, load_environment as load_canary_stock

__all__ = ["CANARY", "load_environment"]


def load_environment(eval_split: str = "test", **kwargs) -> vf.Environment:
    return load_canary_stock(eval_split=eval_split, **kwargs)
