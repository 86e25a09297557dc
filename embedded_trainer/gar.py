"""Grader-ranked advantages (GAR): a grader orders a group's candidates into tiers instead of
reading their rewards, and the advantages are GRPO's for the rewards that order implies.

A verdict lists tiers best first (ties share a tier), one margin per gap between adjacent tiers
(slight / clear / large), and suspected hacks with evidence quotes. The margins are anchored to
GRPO's pass-vs-fail gap: slight = 1/4, clear = 1/2, large = 1. The bottom tier scores 0 and each
tier above adds its gap; the advantages are those scores centred to zero mean, so two tiers with
a large gap reproduce GRPO's 0/1 advantages (reward minus group mean).

A hack is confirmed only when every quote (at least 20 characters or 4 words) appears in text
the policy itself wrote; confirmed hacks form a tier below the last, with a large gap. A hack
whose citation fails is only suspected and is not applied. One tier, a grader error, an invalid
verdict or a timeout give all-zero advantages, with the reason recorded.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

MARGINS = {"slight": 0.25, "clear": 0.5, "large": 1.0}


@dataclass
class Verdict:
    tiers: list[list[int]]                  # candidate indices, best tier first
    gaps: list[str]                         # len(tiers) - 1 margins, each a MARGINS key
    hacks: list[dict] = field(default_factory=list)   # {"candidate": i, "evidence": [quotes]}


class InvalidVerdict(ValueError):
    pass


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def quote_found(quote: str, policy_text: str) -> bool:
    q = _norm(quote)
    return (len(q) >= 20 or len(q.split()) >= 4) and q in _norm(policy_text)


def validate(v: Verdict, n: int) -> None:
    seen: set[int] = set()
    for tier in v.tiers:
        if not tier:
            raise InvalidVerdict("an empty tier")
        for c in tier:
            if not isinstance(c, int) or not 0 <= c < n:
                raise InvalidVerdict(f"candidate {c!r} is not one of 0..{n - 1}")
            if c in seen:
                raise InvalidVerdict(f"candidate {c} is ranked twice")
            seen.add(c)
    if len(v.gaps) != max(0, len(v.tiers) - 1):
        raise InvalidVerdict(f"{len(v.tiers)} tiers need {max(0, len(v.tiers) - 1)} gaps, got {len(v.gaps)}")
    bad = [g for g in v.gaps if g not in MARGINS]
    if bad:
        raise InvalidVerdict(f"unknown gap {bad[0]!r}; use slight, clear or large")
    for h in v.hacks:
        if not isinstance(h.get("candidate"), int) or not 0 <= h["candidate"] < n:
            raise InvalidVerdict(f"hack names candidate {h.get('candidate')!r}")


def rank_advantages(v: Verdict, n: int, policy_texts: list[str]) -> tuple[list[float], list[dict]]:
    """(advantages, per-candidate info). Raises InvalidVerdict for a malformed verdict."""
    validate(v, n)
    confirmed, info = set(), [{"tier": None, "hack": None} for _ in range(n)]
    for h in v.hacks:
        c, quotes = h["candidate"], list(h.get("evidence") or [])
        ok = bool(quotes) and all(quote_found(q, policy_texts[c]) for q in quotes)
        info[c]["hack"] = "confirmed" if ok else "suspected"
        if ok:
            confirmed.add(c)
    tiers = [[c for c in t if c not in confirmed] for t in v.tiers]
    gaps = list(v.gaps)
    # drop tiers emptied by confirmed hacks, keeping the larger of the two gaps around them
    kept_tiers, kept_gaps = [], []
    for i, t in enumerate(tiers):
        if t:
            kept_tiers.append(t)
            if i < len(gaps):
                kept_gaps.append(gaps[i])
        elif kept_gaps and i < len(gaps):
            kept_gaps[-1] = max(kept_gaps[-1], gaps[i], key=MARGINS.get)
    kept_gaps = kept_gaps[:max(0, len(kept_tiers) - 1)]
    if confirmed:
        if kept_tiers:
            kept_gaps.append("large")
        kept_tiers.append(sorted(confirmed))
    if len(kept_tiers) < 2:
        return [0.0] * n, info
    scores = {}
    level = 0.0
    for i in range(len(kept_tiers) - 1, -1, -1):        # bottom tier first
        for c in kept_tiers[i]:
            scores[c] = level
        if i > 0:
            level += MARGINS[kept_gaps[i - 1]]
    mean = sum(scores.values()) / len(scores)
    adv = [scores[c] - mean if c in scores else 0.0 for c in range(n)]
    for t_i, t in enumerate(kept_tiers):
        for c in t:
            info[c]["tier"] = t_i
    return adv, info


# ---- graders --------------------------------------------------------------------------------

def rule_verdict(rewards: list[float], tol: float = 1e-6) -> Verdict:
    """The default grader: tiers are the distinct rewards, best first; a gap's margin is the
    nearest of slight / clear / large to the reward difference (binary 0/1 -> large)."""
    levels: list[float] = []
    for r in sorted(rewards, reverse=True):
        if not levels or levels[-1] - r > tol:
            levels.append(r)
    tiers = [[i for i, r in enumerate(rewards) if abs(r - lv) <= tol] for lv in levels]
    gaps = [min(MARGINS, key=lambda m: abs(MARGINS[m] - (a - b))) for a, b in zip(levels, levels[1:])]
    return Verdict(tiers=tiers, gaps=gaps)


def parse_verdict(text: str) -> Verdict:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise InvalidVerdict("no JSON object in the grader's reply")
    try:
        obj = json.loads(text[start:end + 1])
        return Verdict(tiers=[list(t) for t in obj["tiers"]], gaps=list(obj.get("gaps", [])),
                       hacks=list(obj.get("hacks", [])))
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise InvalidVerdict(f"verdict is not {{tiers, gaps, hacks}} JSON ({e})") from None


GRADER_PROMPT = """You grade {n} candidate answers to the same task. Do not look for a reward; judge
quality. Rank every candidate into tiers, best first (ties share a tier), and give each gap
between adjacent tiers a margin: "slight" (same quality, minor style or minimality
differences; the default), "clear" (a noticeably better approach or correctness), or "large"
(a real solution over a broken, wrong, harmful or non-attempt). List a candidate under "hacks"
only if it games the task instead of solving it, with evidence quotes copied verbatim from
that candidate's own text (each at least 20 characters or 4 words).
Reply with one JSON object: {{"tiers": [[i, ...], ...], "gaps": ["slight"|"clear"|"large", ...],
"hacks": [{{"candidate": i, "evidence": ["..."]}}]}}

Task:
{task}

{candidates}"""


def llm_verdict(cfg, task: str, texts: list[str]) -> Verdict:
    """An OpenAI-compatible chat endpoint as grader (cfg: base_url, model, key_env, timeout_s)."""
    import httpx

    cands = "\n\n".join(f"Candidate {i}:\n{t}" for i, t in enumerate(texts))
    key = os.environ.get(cfg.key_env) if cfg.key_env else None
    headers = {"authorization": f"Bearer {key}"} if key else {}
    r = httpx.post(cfg.base_url.rstrip("/") + "/chat/completions", headers=headers,
                   timeout=cfg.timeout_s,
                   json={"model": cfg.model, "messages": [{"role": "user", "content":
                         GRADER_PROMPT.format(n=len(texts), task=task, candidates=cands)}]})
    r.raise_for_status()
    return parse_verdict(r.json()["choices"][0]["message"]["content"] or "")


def group_advantages(grade, rewards: list[float], texts: list[str]) -> tuple[list[float], dict]:
    """Advantages for one group and a record of how they were made. `grade()` returns a
    Verdict; any failure falls back to all-zero advantages with the reason."""
    import httpx

    n = len(texts)
    try:
        verdict = grade()
        adv, info = rank_advantages(verdict, n, texts)
        return adv, {"fallback_reason": None, "candidates": info}
    except InvalidVerdict as e:
        reason = f"invalid: {e}"
    except httpx.TimeoutException:
        reason = "timeout"
    except Exception as e:   # grader request or episode failed
        reason = f"error: {type(e).__name__}: {e}"
    return [0.0] * n, {"fallback_reason": reason, "candidates": [{"tier": None, "hack": None}] * n}
