"""Small builders shared by tests."""
from __future__ import annotations


def weakness_json() -> dict:
    """A valid weakness.json for the StockArithmetic family's buckets."""
    from generators.stock_arithmetic import BUCKETS, FEATURE_DEFINITIONS

    domains = list(dict.fromkeys(d for d, _ in BUCKETS))
    return {
        "prev_eval_acc": 0.2, "reward_by_length_quartile": [0.4, 0.3, 0.3, 0.2],
        "domains": [{"name": d, "severity": "high", "evidence": "failed train stories",
                     "sub_domains": [{"name": s} for d2, s in BUCKETS if d2 == d]} for d in domains],
        "allocations": {f"{d} / {s}": 100 for d, s in BUCKETS},
        "structural_features": [{"name": k, "definition": v} for k, v in FEATURE_DEFINITIONS.items()],
    }
