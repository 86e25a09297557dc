"""The library that generator scripts (iter_N/gen_dataset.py) import.

Rows are written by code, never typed by hand: a generator defines templates (one per
(domain, sub_domain)), a solver computes every answer, and a round-trip check scores each
template's reference reasoning with the hub env's own rubric before anything is written.

The row schema and every gate line are defined once, in driver.gates.rules; `driver validate
--help` prints them. Each row is {question, answer, info: {domain, sub_domain, difficulty,
structural_features, source, reasoning, reasoning_depth, ...}}.
"""
from generators.core import RowWriter, clone_key, cold_read, module_name, round_trip, seeded_rng

__all__ = ["FAMILIES", "RowWriter", "clone_key", "cold_read", "family_of", "module_name", "round_trip",
           "seeded_rng"]

# hub env module -> its family generator (a module with BUCKETS, FEATURE_DEFINITIONS,
# structure_of, skeleton, DATA_PLAN and generate; and `untargeted`, control C's rows, where it
# has a plain distribution to draw from)
FAMILIES = {"stock_arithmetic": "generators.stock_arithmetic",
            "model_router": "generators.model_router"}


def family_of(hub: dict) -> str:
    """The hub env's module name, the key of FAMILIES."""
    return module_name(hub.get("env_id", ""))
