"""The StockArithmetic-v1 verifier. The target comes from the problem's structure, never from
text the model wrote; no generated text is executed."""
from __future__ import annotations

import json
import re

MAX_ANSWER_CHARS = 256
SYSTEM_PROMPT = (
    "You keep a stock ledger. Read the inventory story and reply with exactly one JSON object "
    'of the form {"final_stock": <integer>} and nothing else. You may first reason inside one '
    "<think>...</think> block; only the text after it is read as your answer."
)
MAX_FINAL_STOCK = 300


def compute_final_stock(problem: dict) -> int:
    """Solver: initial + deliveries - withdrawals, applied in order, every stock >= 0."""
    if not isinstance(problem, dict) or set(problem) != {"initial", "deliveries", "withdrawals"}:
        raise ValueError("expected exactly initial, deliveries and withdrawals")
    if type(problem["initial"]) is not int or not 0 <= problem["initial"] <= 100:
        raise ValueError("initial stock must be an integer in 0..100")
    stock = problem["initial"]
    for key, sign in (("deliveries", 1), ("withdrawals", -1)):
        values = problem[key]
        if not isinstance(values, list) or len(values) != 2 or any(
            type(v) is not int or not 0 <= v <= 100 for v in values
        ):
            raise ValueError(f"exactly two integer {key} in 0..100 required")
        for v in values:
            stock += sign * v
            if stock < 0:
                raise ValueError("an intermediate stock cannot be negative")
    return stock


def normalized_problem(problem: dict) -> tuple:
    """Permutations of the same movements normalize to one key (used for deduplication)."""
    compute_final_stock(problem)
    return (problem["initial"], tuple(sorted(problem["deliveries"])),
            tuple(sorted(problem["withdrawals"])))


def _unique_object(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError("duplicate JSON field")
        out[key] = value
    return out


def _reject_constant(value):
    raise ValueError("non-finite JSON number")


def split_think(text: str) -> str | None:
    """Return the answer part of a response: the text after one leading <think>...</think>
    block, or the whole text when there is none. An unclosed think block has no answer."""
    stripped = text.lstrip()
    if stripped.startswith("<think>"):
        end = stripped.find("</think>")
        if end < 0:
            return None
        return stripped[end + len("</think>"):]
    return text


def parse_answer_json(text: str | None, truncated: bool = False) -> dict:
    """Strict parse: one complete JSON object, the text as emitted <= 256 characters, holding exactly an integer
    final_stock in 0..300. Returns {"valid", "value", "reason"}."""
    if truncated:
        return {"valid": False, "value": None, "reason": "truncated"}
    if not isinstance(text, str):
        return {"valid": False, "value": None, "reason": "no_answer"}
    # the limit applies to the text as emitted: whitespace counts (seed 003 checks the raw
    # text); json.loads itself still accepts the whitespace around one object
    if len(text) > MAX_ANSWER_CHARS:
        return {"valid": False, "value": None, "reason": "oversized"}
    try:
        obj = json.loads(text, object_pairs_hook=_unique_object, parse_constant=_reject_constant)
        if type(obj) is not dict or set(obj) != {"final_stock"}:
            raise ValueError("exactly one field, final_stock, required")
        value = obj["final_stock"]
        if type(value) is not int or not 0 <= value <= MAX_FINAL_STOCK:
            raise ValueError("final_stock must be an integer in 0..300")
        return {"valid": True, "value": value, "reason": None}
    except (ValueError, TypeError, RecursionError):
        return {"valid": False, "value": None, "reason": "invalid_json_schema"}


def score_response(text: str | None, problem: dict, truncated: bool = False) -> float:
    expected = compute_final_stock(problem)
    parsed = parse_answer_json(split_think(text) if isinstance(text, str) else None, truncated)
    return 1.0 if parsed["valid"] and parsed["value"] == expected else 0.0


_INT = re.compile(r"-?\d+")


def lenient_correct(text: str | None, problem: dict) -> float:
    """1.0 when the right number appears anywhere after the think block, in any format.
    A zero-weight metric: it tells format failures from arithmetic failures in aggregates."""
    if not isinstance(text, str):
        return 0.0
    answer = split_think(text)
    if answer is None:
        return 0.0
    expected = compute_final_stock(problem)
    return 1.0 if any(int(m) == expected for m in _INT.findall(answer)) else 0.0
