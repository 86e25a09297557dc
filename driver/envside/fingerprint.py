"""Decontamination fingerprints: hashes of word 8-grams, the only thing of an eval row that
leaves the training interpreter.

One copy for both sides: the env-side jobs hash the eval split with it (fingerprint_rows), and
the driver's gate (driver/gates/decontam.py) imports `grams` and `row_text` to hash its own
rows, so the two always hash identically. Standard library only.
"""
from __future__ import annotations

import collections
import hashlib
import re

N = 8


def grams(text) -> set[str]:
    """The 16-hex-digit hashes of the text's word N-grams (lower-cased, punctuation dropped)."""
    toks = re.sub(r"[^a-z0-9]+", " ", str(text).lower()).split()
    return {hashlib.sha1(" ".join(toks[i:i + N]).encode()).hexdigest()[:16]
            for i in range(max(0, len(toks) - N + 1))}


def row_text(row: dict) -> str:
    """A row's question, else the content of its prompt's last user message."""
    if row.get("question"):
        return row["question"]
    msgs = [m for m in (row.get("prompt") or []) if isinstance(m, dict) and m.get("role") == "user"]
    return msgs[-1].get("content", "") if msgs else ""


def fingerprint_rows(ds) -> dict:
    """{"n", "eval_rows", "rows"}: per eval row (dicts with a question or a prompt), the sorted
    hashes of its rare N-grams. An N-gram in more than 1% of the rows (at least 2) is template
    boilerplate and is dropped; a row left with none is left out."""
    df: collections.Counter = collections.Counter()
    for row in ds:
        df.update(grams(row_text(row)))
    limit = max(2, len(ds) // 100)
    rows = [sorted(h for h in grams(row_text(row)) if df[h] <= limit) for row in ds]
    return {"n": N, "eval_rows": len(ds), "rows": [r for r in rows if r]}
