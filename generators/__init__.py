"""The library that generator scripts (iter_N/gen_dataset.py) import.

Rows are written by code, never typed by hand: a generator defines templates (one per
(domain, sub_domain)), a solver computes every answer, and a round-trip check scores each
template's reference reasoning with the hub env's own rubric before anything is written.
"""
from generators.core import RowWriter, clone_key, cold_read, round_trip, seeded_rng

__all__ = ["RowWriter", "clone_key", "cold_read", "round_trip", "seeded_rng"]
