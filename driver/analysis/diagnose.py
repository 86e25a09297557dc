"""Does a rollout file carry GRPO gradient? Four numbers and a verdict.

Mean reward says little on its own. GRPO scores a rollout against the other rollouts of its
prompt, so what matters is that every prompt has the same group size (uniformity), that many
groups have outcomes that differ (the live fraction: an all-pass or all-fail group has zero
advantage everywhere), and that effort is not punished (a negative correlation of reward with
tool calls or completion length means the cheapest policy wins, and training will find it).

Rows are graded rollouts in prime-rl's classic shape, grouped by `example_id`. Only numeric
fields are read, plus the completion's length, tool calls and how the rollout stopped.

A multi-turn episode's length is the env's: the env decides when it ends (a win ends a game
early, a loss runs to the turn limit), so the number of replies correlates with the reward by
the game's own structure. There effort is read per reply (the mean length of the policy's
replies), never per episode. A truncated rollout is read for its cause, and the advice follows
it: an episode cut by the student's context (verifiers' `prompt_too_long`), a reply that ran on
past its closing tag to the completion limit (the answer was written; the student did not
stop), or a reply cut before it ended (the limit is too short for the task).
"""
from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from pathlib import Path

from driver.run.files import iter_jsonl
from rl_contract.classic import SUCCESS_THRESHOLD   # a rollout passes at a reward >= this

# Thresholds (documented in `driver diagnose --help`)
FLOAT_TOLERANCE = 1e-6    # rewards closer than this are equal (float noise)
MIN_LIVE_FRACTION = 0.25  # fewer live groups than this: FAIL (too little gradient)
MIN_EFFORT_CORR = -0.2    # a correlation below this: FAIL ("effort buys risk")
MAX_TRUNCATION = 0.2      # more truncated rollouts than this: FAIL


def read_rows(path: Path) -> list[dict]:
    rows = []
    for n, row in iter_jsonl(path):
        if row is None:
            raise ValueError(f"{path}:{n} is not JSON")
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{n} is not a JSON object")
        rows.append(row)
    return rows


def _reward(row: dict) -> float:
    r = row.get("reward")
    if isinstance(r, bool) or not isinstance(r, (int, float)):
        raise ValueError(f"row with example_id {row.get('example_id')!r} has no numeric reward")
    return float(r)


def tool_calls(row: dict) -> int | None:
    """Tool calls the policy made, when the row records any; None for a text-only row."""
    comp = row.get("completion")
    if not isinstance(comp, list):
        return None
    calls = [m for m in comp if isinstance(m, dict) and m.get("tool_calls")]
    if not calls and not any(isinstance(m, dict) and m.get("role") == "tool" for m in comp):
        return None
    return sum(len(m["tool_calls"]) for m in calls)


def completion_length(row: dict) -> int:
    """The policy's own text: a multi-turn episode's replies, not the env's messages between them."""
    comp = row.get("completion")
    if isinstance(comp, str):
        return len(comp)
    return sum(len(str(m.get("content") or "")) for m in comp or []
               if isinstance(m, dict) and m.get("role", "assistant") == "assistant")


def replies(row: dict) -> list[str]:
    """The policy's replies: each assistant message's text (a string completion is one)."""
    comp = row.get("completion")
    if isinstance(comp, str):
        return [comp]
    return [str(m.get("content") or "") for m in comp or []
            if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]


def is_episode(row: dict) -> bool:
    """A multi-turn episode: its completion holds the env's messages between the replies."""
    comp = row.get("completion")
    return isinstance(comp, list) and any(
        isinstance(m, dict) and m.get("role") in ("user", "tool") for m in comp)


def reply_length(row: dict) -> float:
    """The mean length of the policy's replies in the rollout (0 without one)."""
    rs = replies(row)
    return sum(map(len, rs)) / len(rs) if rs else 0.0


CONTEXT, PAST_TAG, REPLY_LIMIT = "context", "past_closing_tag", "reply_limit"
_CLOSING_TAG = re.compile(r"</([A-Za-z_][\w-]*)>")


def truncation_cause(row: dict) -> str | None:
    """Why a truncated rollout was cut (None: it was not): the student's context (verifiers'
    `prompt_too_long`), its last reply running on past a closing tag to the completion limit,
    or a reply cut before it ended."""
    if row.get("stop_condition") == "prompt_too_long":
        return CONTEXT
    if not row.get("is_truncated"):
        return None
    last = next((r for r in reversed(replies(row)) if r), "")
    m = _CLOSING_TAG.search(last)
    return PAST_TAG if m and last[m.end():].strip() else REPLY_LIMIT


def closing_tags(rows: list[dict]) -> list[str]:
    """The closing tags the replies that ran on past one closed, most frequent first."""
    tags: Counter = Counter()
    for r in rows:
        if truncation_cause(r) == PAST_TAG:
            last = next((x for x in reversed(replies(r)) if x), "")
            tags[f"</{_CLOSING_TAG.search(last).group(1)}>"] += 1
    return [t for t, _ in tags.most_common(3)]


TRUNCATION_ADVICE = {
    CONTEXT: "episodes ended prompt_too_long: the student's context filled before the env ended "
             "them (its turn limit or a result), so they score as losses whatever the policy. Give "
             "the student a longer context (--seq-len; the built-in student's max_positions), "
             "shorter replies (--max-completion-tokens), or use an env with fewer turns",
    PAST_TAG: "replies ran on past their closing tag ({tags}) to the completion limit: the answer "
              "was written and the student did not stop. A larger completion limit will not help; "
              "a student warm-started on replies that end at the tag (or a stop at it) will",
    REPLY_LIMIT: "replies were cut before they ended: raise the completion limit "
                 "(--max-completion-tokens) or shorten the task",
}


def _pearson(xs: list[float], ys: list[float]) -> float | None:
    if len(xs) < 3 or statistics.pstdev(xs) == 0 or statistics.pstdev(ys) == 0:
        return None
    return statistics.correlation(xs, ys)


def diagnose(rows: list[dict], success_threshold: float = SUCCESS_THRESHOLD,
             tolerance: float = FLOAT_TOLERANCE) -> dict:
    if not rows:
        raise ValueError("no rollout rows to diagnose")
    rewards = [_reward(r) for r in rows]
    groups: dict = {}
    for i, (r, reward) in enumerate(zip(rows, rewards)):
        key = r.get("example_id", f"row-{i}")
        groups.setdefault(json.dumps(key, sort_keys=True, default=str), []).append(reward)
    sizes = Counter(len(g) for g in groups.values())
    passes = [{x >= success_threshold for x in g} for g in groups.values()]
    live_outcome = sum(1 for p in passes if len(p) > 1) / len(groups)
    live_reward = sum(1 for g in groups.values() if max(g) - min(g) > tolerance) / len(groups)
    tools = [tool_calls(r) for r in rows]
    if all(t is not None for t in tools):
        effort_kind, effort = "tool_calls", [float(t) for t in tools]
    elif any(is_episode(r) for r in rows):   # an episode's length is the env's: read per reply
        effort_kind, effort = "reply_length", [reply_length(r) for r in rows]
    else:
        effort_kind, effort = "completion_length", [float(completion_length(r)) for r in rows]
    corr = _pearson(effort, rewards)
    causes = Counter(c for c in map(truncation_cause, rows) if c)
    truncated = sum(1 for r in rows if r.get("is_truncated") or truncation_cause(r)) / len(rows)
    reasons = []
    if len(sizes) > 1:
        reasons.append("group sizes differ: " + json.dumps(dict(sorted(sizes.items())))
                       + " (GRPO needs one group size; key the rollout budget by prompt)")
    if live_outcome < MIN_LIVE_FRACTION:
        reasons.append(f"live fraction {live_outcome:.3f} < {MIN_LIVE_FRACTION}: too few groups "
                       "whose outcome varies carry gradient")
    if corr is not None and corr < MIN_EFFORT_CORR:
        reasons.append(f"effort correlation {corr:+.3f} < {MIN_EFFORT_CORR} ({effort_kind}): "
                       "effort buys risk, so the cheapest policy wins")
    if truncated > MAX_TRUNCATION:
        tags = ", ".join(closing_tags(rows))
        reasons.append(f"truncation rate {truncated:.3f} > {MAX_TRUNCATION}: " + "; ".join(
            f"{causes[c]} of {len(rows)} {TRUNCATION_ADVICE[c].format(tags=tags)}"
            for c in (CONTEXT, PAST_TAG, REPLY_LIMIT) if causes[c]))
    notes = []
    if causes[CONTEXT] and truncated <= MAX_TRUNCATION:   # below the bar, still named
        notes.append(f"{causes[CONTEXT]} of {len(rows)} episodes ended prompt_too_long: the "
                     "student's context filled before the env ended them")
    return {
        "rows": len(rows), "groups": len(groups),
        "group_sizes": {str(k): v for k, v in sorted(sizes.items())},
        "uniform_groups": len(sizes) == 1,
        "live_fraction_outcome": round(live_outcome, 4),
        "live_fraction_reward": round(live_reward, 4),
        "groups_all_pass": sum(1 for p in passes if p == {True}),
        "groups_none_pass": sum(1 for p in passes if p == {False}),
        "effort_kind": effort_kind,
        "effort_correlation": None if corr is None else round(corr, 4),
        "mean_reward": round(statistics.fmean(rewards), 4),
        "truncation_rate": round(truncated, 4),
        # why the truncated rollouts were cut: context (prompt_too_long), past_closing_tag,
        # reply_limit (truncation_cause)
        "truncation_causes": {c: causes[c] for c in (CONTEXT, PAST_TAG, REPLY_LIMIT)},
        "verdict": "FAIL" if reasons else "PASS",
        "reasons": reasons,
        "notes": notes,
    }


def render(d: dict) -> str:
    sizes = ", ".join(f"{k}: {v}" for k, v in d["group_sizes"].items())
    corr = "n/a (no variance)" if d["effort_correlation"] is None else f"{d['effort_correlation']:+.3f}"
    lines = [
        f"rows {d['rows']} · groups {d['groups']}",
        f"group uniformity     {'uniform' if d['uniform_groups'] else 'MIXED'} ({{{sizes}}})",
        f"live fraction        {d['live_fraction_outcome']:.3f} on pass/fail · "
        f"{d['live_fraction_reward']:.3f} on raw reward",
        f"effort correlation   {corr} (reward vs {d['effort_kind']})",
        f"mean reward          {d['mean_reward']:.4f}",
        f"truncation rate      {d['truncation_rate']:.3f}"
        + (" (" + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in d["truncation_causes"].items() if v)
           + ")" if any(d["truncation_causes"].values()) else ""),
        f"verdict              {d['verdict']}",
    ]
    lines += [f"  - {r}" for r in d["reasons"]]
    lines += [f"  note: {n}" for n in d["notes"]]
    return "\n".join(lines)
