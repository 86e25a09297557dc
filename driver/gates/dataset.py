"""The dataset gate: the seed's four-pillar lines plus size, bucket, duplicate and clone checks.

Each check is one named line that is True or False; a dataset passes only when every line is
True. The bar is never lowered to let a dataset through.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path

MIN_ROWS, MAX_ROWS = 500, 1000
from driver.gates import decontam
from driver.gates import weakness as weakness_schema
from driver.state import iter_jsonl
from generators.core import clone_key


@dataclass
class GateReport:
    lines: list[tuple[str, bool, str]] = field(default_factory=list)
    rows: int = 0

    def add(self, name: str, ok: bool, detail: str = "") -> None:
        self.lines.append((name, bool(ok), detail))

    @property
    def passed(self) -> bool:
        return bool(self.lines) and all(ok for _, ok, _ in self.lines)

    def failures(self) -> list[str]:
        return [f"{n}: False ({d})" if d else f"{n}: False" for n, ok, d in self.lines if not ok]

    def to_json(self) -> dict:
        return {"passed": self.passed, "rows": self.rows,
                "lines": [{"name": n, "ok": ok, "detail": d} for n, ok, d in self.lines]}

    def render(self) -> str:
        return "\n".join(f"{n}: {ok}" + (f"  ({d})" if d and not ok else "")
                         for n, ok, d in self.lines)


MAX_ROW_CHARS = 20_000
_INFO_TYPES = {"domain": str, "sub_domain": str, "difficulty": str, "source": str,
               "reasoning": str, "structural_features": list}


def info_problems(info: dict) -> str:
    """'' when info has every required field with its type, else what is wrong."""
    for key, kind in _INFO_TYPES.items():
        if not isinstance(info.get(key), kind):
            return f"field {key!r} must be a {kind.__name__}, got {type(info.get(key)).__name__}"
    if info["difficulty"] not in ("easy", "medium", "hard"):
        return f"difficulty {info['difficulty']!r} is not easy, medium or hard"
    if not all(isinstance(f, str) for f in info["structural_features"]):
        return "structural_features must be a list of names"
    return ""


def row_problem(obj) -> str:
    """'' for a well-formed row, else what is wrong with it."""
    if obj is None:
        return "not JSON"
    if not isinstance(obj, dict) or not isinstance(obj.get("question"), str) \
            or not isinstance(obj.get("answer"), str) or not isinstance(obj.get("info"), dict):
        return "needs string question, string answer and an info object"
    bad = info_problems(obj["info"])
    if bad:
        return f"info {bad}"
    size = len(obj["question"]) + len(obj["answer"]) + len(str(obj["info"].get("reasoning", "")))
    if size > MAX_ROW_CHARS:
        return (f"{size:,} characters (limit {MAX_ROW_CHARS:,}); no prompt that long fits a "
                "training sequence")
    return ""


def load_rows(path: Path) -> tuple[list[dict], list[str]]:
    rows, problems = [], []
    for n, obj in iter_jsonl(path):
        bad = row_problem(obj)
        if bad:
            problems.append(f"line {n}: {bad}")
        else:
            rows.append(obj)
    return rows, problems


def check(dataset: Path, weakness: dict, prior: list[Path] = (),
          eval_fingerprints: dict | None = None) -> GateReport:
    """Every line of the gate. eval_fingerprints (from decontam.eval_fingerprints) enables the
    blind decontamination line; without them that line is False and says how to get them."""
    rep = GateReport()
    bad_fields = weakness_schema.problems(weakness)
    rep.add("weakness.json valid", not bad_fields, "; ".join(bad_fields[:8]))
    rows, problems = load_rows(dataset)
    rep.rows = len(rows)
    rep.add("rows well-formed", not problems, "; ".join(problems[:5]))
    T = max(len(rows), 1)
    info = [r["info"] for r in rows]
    doms = collections.Counter(i.get("domain") for i in info)
    subs = collections.Counter((i.get("domain"), i.get("sub_domain")) for i in info)
    diff = collections.Counter(i.get("difficulty") for i in info)
    feats = [i.get("structural_features") or [] for i in info]
    per_feat = collections.Counter(f for fs in feats for f in set(fs))
    n2 = sum(len(set(f)) >= 2 for f in feats)
    n3 = sum(len(set(f)) >= 3 for f in feats)
    n_skel = sum(str(i.get("source", "")).startswith("skeleton:") for i in info)
    if bad_fields:   # the lines below still run, against an empty report
        weakness = {}
    defined = {f["name"] for f in weakness.get("structural_features", [])}
    buckets = {(d["name"], s["name"]) for d in weakness.get("domains", []) for s in d.get("sub_domains", [])}

    rep.add(f"row count in [{MIN_ROWS}, {MAX_ROWS}]", MIN_ROWS <= len(rows) <= MAX_ROWS, f"{len(rows)} rows")
    rep.add(">=3 domains", len(doms) >= 3, f"{len(doms)}")
    rep.add("every domain >=2 sub-domains",
            all(sum(1 for (d, _) in subs if d == dom) >= 2 for dom in doms))
    rep.add("smallest (domain, sub_domain) >=3%", bool(subs) and min(subs.values()) / T >= 0.03,
            f"{min(subs.values()) / T:.3f}" if subs else "no buckets")
    rep.add("hard >=40%", diff.get("hard", 0) / T >= 0.40, f"{diff.get('hard', 0) / T:.3f}")
    rep.add("easy <=20%", diff.get("easy", 0) / T <= 0.20, f"{diff.get('easy', 0) / T:.3f}")
    rep.add(">=2 features (>=80%)", n2 / T >= 0.80, f"{n2 / T:.3f}")
    rep.add(">=3 features (>=40%)", n3 / T >= 0.40, f"{n3 / T:.3f}")
    low = sorted(f for f in (defined or per_feat) if per_feat.get(f, 0) / T < 0.10)
    rep.add("per-feature coverage (each >=10%)", not low, ", ".join(low))
    undefined = sorted(set(per_feat) - defined) if defined else []
    rep.add("features defined in weakness report", not undefined, ", ".join(undefined[:5]))
    rep.add("skeleton-source (>=30%)", n_skel / T >= 0.30, f"{n_skel / T:.3f}")
    stray = sorted({f"{d}/{s}" for (d, s) in subs if (d, s) not in buckets})
    rep.add("every bucket is in the weakness report", not stray, ", ".join(stray[:5]))

    exact = collections.Counter((r["question"], r["answer"]) for r in rows)
    dups = sum(c - 1 for c in exact.values() if c > 1)
    rep.add("no duplicate rows", dups == 0, f"{dups} duplicates")
    # clones among distinct rows (an exact duplicate is reported by the line above)
    distinct = {(r["question"], r["answer"]): r for r in rows}.values()
    keys = collections.Counter(clone_key(r["question"]) for r in distinct)
    clones = sum(c - 1 for c in keys.values() if c > 1)
    rep.add("no clone pairs", clones == 0, f"{clones} clones")
    prior_keys: set[str] = set()
    for p in prior:
        prior_rows, _ = load_rows(p)
        prior_keys |= {clone_key(r["question"]) for r in prior_rows}
    cross = sum(1 for k in keys if k in prior_keys)
    rep.add("no clone of a prior iteration's row", cross == 0, f"{cross} clones")
    depth_ok, worst = True, ""
    by_bucket: dict = collections.defaultdict(collections.Counter)
    for i in info:
        by_bucket[(i.get("domain"), i.get("sub_domain"))][i.get("reasoning_depth")] += 1
    for b, c in by_bucket.items():
        share = max(c.values()) / sum(c.values())
        if share > 0.70:
            depth_ok, worst = False, f"{b[0]}/{b[1]}: {share:.2f}"
            break
    rep.add("no reasoning depth >70% within a bucket", depth_ok, worst)
    if eval_fingerprints is None:
        rep.add("no overlap with the eval split (blind)", False,
                "no eval fingerprints: run inside a run directory or pass --env ENV")
    else:
        hits = decontam.overlapping_rows(rows, eval_fingerprints)
        rep.add("no overlap with the eval split (blind)", not hits,
                f"{len(hits)} of our rows share an eval {eval_fingerprints['n']}-gram: lines "
                + ", ".join(map(str, hits[:10])) if hits else "")
    return rep
