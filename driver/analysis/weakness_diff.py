"""Did a named weakness shrink after training on it?

Iteration n's brief (n >= 2) states, for each (domain, sub_domain) bucket of the weakness report
of the last iteration k that trained, how often the student failed that bucket's rows of iter_k's
generated dataset *before* iter_k trained on them and *after*. Train rollouts only, never an eval
row; a rollout counts for the bucket its row's `info.domain` / `info.sub_domain` name.

- Before: the gradient probe's rollouts (iter_k/probe_rollouts.jsonl: the anchor, iter_0's
  checkpoint, on a sample of those rows) where the probe ran, else the arm's first train step
  (sampled by the anchor too: no update from these rows had happened yet).
- After: the arm's last train steps, the window the teacher's train sample holds, less the first
  step when the arm is that short.

A rollout fails at a reward below SUCCESS_THRESHOLD. Each window gives its counts and a 95% Wilson
interval, so a change is judged against its noise: a bucket `shrank` only where the after
interval lies wholly below the before interval.
"""
from __future__ import annotations


from driver.analysis.evaluation import wilson_interval
from driver.envside.rows import info_of
from rl_contract.classic import SUCCESS_THRESHOLD   # a rollout passes at a reward >= this

FILE = "weakness_diff.json"   # in iter_n/teacher_input/
SHRANK, GREW, UNCLEAR = "shrank", "grew", "unclear"


def buckets(weakness: dict) -> list[tuple[str, str]]:
    """The (domain, sub_domain) buckets a weakness.json names, in its order."""
    return [(d.get("name"), s.get("name")) for d in weakness.get("domains") or []
            for s in d.get("sub_domains") or []]


def window(rollouts: int, failed: int) -> dict:
    """One bucket's numbers in one window: counts, failure rate and its 95% Wilson interval."""
    if rollouts == 0:
        return {"rollouts": 0, "failed": 0, "failure_rate": None, "ci95": None}
    lo, hi = wilson_interval(failed, rollouts)
    return {"rollouts": rollouts, "failed": failed, "failure_rate": round(failed / rollouts, 4),
            "ci95": [round(lo, 4), round(hi, 4)]}


def counts(rows, keys: list[tuple[str, str]]) -> dict[tuple[str, str], dict]:
    """Each bucket's window over `rows` (train rollout rows: `info`, `reward`)."""
    tally = {k: [0, 0] for k in keys}
    for r in rows:
        info = info_of(r)
        key = (info.get("domain"), info.get("sub_domain"))
        if key in tally:
            tally[key][0] += 1
            tally[key][1] += float(r.get("reward") or 0.0) < SUCCESS_THRESHOLD
    return {k: window(n, f) for k, (n, f) in tally.items()}


def verdict(before: dict, after: dict) -> str:
    """`shrank` / `grew` where the two 95% intervals do not overlap, else `unclear`."""
    if not before["rollouts"] or not after["rollouts"]:
        return UNCLEAR
    if after["ci95"][1] < before["ci95"][0]:
        return SHRANK
    if after["ci95"][0] > before["ci95"][1]:
        return GREW
    return UNCLEAR


def compute(weakness: dict, before_rows, after_rows, *, iteration: int, before: dict,
            after: dict) -> dict:
    """The diff for the buckets of iteration `iteration`'s weakness.json. `before` and `after`
    describe the windows (their source and steps) and are stored as given, with row counts."""
    keys = buckets(weakness)
    before_rows, after_rows = list(before_rows), list(after_rows)
    b, a = counts(before_rows, keys), counts(after_rows, keys)
    rows = []
    for key in keys:
        rate_b, rate_a = b[key]["failure_rate"], a[key]["failure_rate"]
        rows.append({"domain": key[0], "sub_domain": key[1], "before": b[key], "after": a[key],
                     "change": None if rate_a is None or rate_b is None else round(rate_a - rate_b, 4),
                     "verdict": verdict(b[key], a[key])})
    return {"iteration": iteration, "failure": f"reward < {SUCCESS_THRESHOLD}",
            "before": {**before, "rollouts": len(before_rows)},
            "after": {**after, "rollouts": len(after_rows)}, "buckets": rows}


def _cell(w: dict) -> str:
    if not w["rollouts"]:
        return "no rollouts"
    lo, hi = w["ci95"]
    return f"{w['failed']} / {w['rollouts']} = {w['failure_rate']:.2f} [{lo:.2f}, {hi:.2f}]"


def _steps(s: list[int]) -> str:
    return f"step {s[0]}" if len(s) == 1 else f"steps {s[0]}-{s[-1]}"


def describe(diff: dict) -> str:
    """One sentence naming the two windows."""
    k, b, a = diff["iteration"], diff["before"], diff["after"]
    before = (f"the gradient probe's {b['rollouts']} rollouts (the anchor, iter_0's checkpoint, "
              f"on a sample of iter_{k}'s rows)" if b["source"] == "probe" else
              f"iter_{k}'s first train {_steps(b['steps'])} ({b['rollouts']} rollouts, sampled "
              "before any update)")
    after = (f"iter_{k}'s last train {_steps(a['steps'])} ({a['rollouts']} rollouts)"
             if a.get("steps") else "none (the arm trained a single step)")
    return (f"Before training: {before}. After: {after}. A rollout failed at {diff['failure']}; "
            "train rollouts only. Each cell: failed / rollouts = failure rate [95% Wilson "
            "interval]; `shrank` or `grew` only where the two intervals do not overlap.")


def table_markdown(diff: dict) -> str:
    """The diff as a markdown table, one row per bucket, then the sentence naming the windows."""
    k = diff["iteration"]
    lines = [f"| iter_{k} bucket | before training | after training | change | verdict |",
             "|---|---|---|---|---|"]
    for r in diff["buckets"]:
        change = "-" if r["change"] is None else f"{r['change']:+.2f}"
        lines.append(f"| {r['domain']} / {r['sub_domain']} | {_cell(r['before'])} | "
                     f"{_cell(r['after'])} | {change} | {r['verdict']} |")
    return "\n".join(lines) + "\n\n" + describe(diff) + "\n"


def brief_lines(diff: dict) -> list[str]:
    """One line per bucket, for the scratchpad."""
    def rate(w):
        return "-" if w["failure_rate"] is None else f"{w['failure_rate']:.2f} ({w['failed']}/{w['rollouts']})"
    return [f"- {r['domain']} / {r['sub_domain']}: failure rate {rate(r['before'])} -> "
            f"{rate(r['after'])}, {r['verdict']}" for r in diff["buckets"]]
