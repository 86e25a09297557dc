"""The library that generator scripts (iter_N/gen_dataset.py) import.

Rows are written by code, never typed by hand: a generator defines templates (one per
(domain, sub_domain)), a solver computes every answer, and a round-trip check scores each
template's reference reasoning with the hub env's own rubric before anything is written.

The row schema and every gate line are defined once, in driver.gates.rules; `driver validate
--help` prints them. Each row is {question, answer, info: {domain, sub_domain, difficulty,
structural_features, source, reasoning, reasoning_depth, ...}}.
"""
import importlib

from generators.core import (
    RowWriter,
    clone_key,
    cold_read,
    module_name,
    round_trip,
    seeded_rng,
)
from generators.family import Family

__all__ = ["FAMILIES", "Family", "RowWriter", "clone_key", "cold_read", "family_for", "family_of",
           "module_name", "round_trip", "seeded_rng"]

# hub env module -> the module of its built-in family generator, whose FAMILY (a
# generators.family.Family) the built-in teacher and control C use
FAMILIES = {"stock_arithmetic": "generators.stock_arithmetic",
            "model_router": "generators.model_router",
            "hidden_number": "generators.hidden_number",
            "tool_calculator": "generators.tool_calculator"}


def family_of(hub: dict) -> str:
    """The hub env's module name, the key of FAMILIES."""
    return module_name(hub.get("env_id", ""))


def family_for(hub: dict) -> Family | None:
    """The hub env's built-in family generator, or None where it has none. The family's module
    is imported only now (model_router's imports the env package)."""
    name = FAMILIES.get(family_of(hub))
    return importlib.import_module(name).FAMILY if name else None
