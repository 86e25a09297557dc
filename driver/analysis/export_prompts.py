"""Rollouts -> a verifiers dataset of prompts.

The rollouts themselves are off-policy for any other model, so only prompts are exported; the
trainer samples its own rollouts (rollouts_per_example). Two filters keep the gradient honest:
one phrasing per situation (a situation written three ways would otherwise get three times the
weight), and no seed probes (rows whose prompt is a spec's own situation description, a
third-person scenario rather than something a user would type).
"""
from __future__ import annotations

import json
from pathlib import Path

# where a row names its situation; without one, each distinct prompt is its own situation
SITUATION_KEYS = ("situation_id", "situation")


def _norm(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def user_text(prompt) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "\n".join(str(m.get("content") or "") for m in prompt
                         if isinstance(m, dict) and m.get("role") == "user")
    return ""


def situation_of(row: dict):
    info = row.get("info") if isinstance(row.get("info"), dict) else {}
    for k in SITUATION_KEYS:
        for src in (info, row):
            if src.get(k) is not None:
                return json.dumps(src[k], sort_keys=True, default=str)
    return None


def spec_situations(spec: Path) -> set[str]:
    """A spec's situation texts: `{"situations": ["...", {"text"|"description"|"situation": "..."}]}`."""
    data = json.loads(Path(spec).read_text(encoding="utf-8"))
    out = set()
    for s in (data.get("situations") or []) if isinstance(data, dict) else []:
        if isinstance(s, str):
            out.add(_norm(s))
        elif isinstance(s, dict):
            for k in ("text", "description", "situation"):
                if isinstance(s.get(k), str):
                    out.add(_norm(s[k]))
    return out


def export(rows: list[dict], seeds: set[str] = frozenset(), keep_seeds: bool = False,
           keep_phrasings: bool = False) -> tuple[list[dict], dict]:
    kept, seen_prompts, seen_situations = [], set(), set()
    counts = {"prompts": 0, "kept": 0, "dropped_seed": 0, "dropped_duplicate_phrasing": 0}
    for row in rows:
        prompt = row.get("prompt", row.get("question"))
        text = user_text(prompt) if not isinstance(prompt, str) else prompt
        key = json.dumps(prompt, sort_keys=True, default=str)
        if key in seen_prompts:          # the other rollouts of the same prompt: one prompt
            continue
        seen_prompts.add(key)
        counts["prompts"] += 1
        if not keep_seeds and _norm(text) in seeds:
            counts["dropped_seed"] += 1
            continue
        sit = situation_of(row)
        if sit is not None and not keep_phrasings:
            if sit in seen_situations:
                counts["dropped_duplicate_phrasing"] += 1
                continue
            seen_situations.add(sit)
        out = {"prompt": prompt} if isinstance(prompt, list) else {"question": prompt}
        if row.get("answer") not in (None, ""):
            out["answer"] = row["answer"]
        out["info"] = row.get("info") if isinstance(row.get("info"), dict) else {}
        kept.append(out)
    counts["kept"] = len(kept)
    return kept, counts
