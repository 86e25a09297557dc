"""The dataset gate: the seed's four-pillar lines plus size, bucket, duplicate and clone checks.

Each check is one named line that is True or False; a dataset passes only when every line is
True. The bar is never lowered to let a dataset through.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path

from driver.envside.rows import reply_problem
from driver.gates import accuracy, decontam, rules, weakness
from driver.run.files import iter_jsonl
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


_INFO_TYPES = {k: list if k == "structural_features" else str for k in rules.REQUIRED_INFO}


def info_problems(info: dict, multi_turn: bool = False) -> str:
    """'' when info has every required field with its type, else what is wrong. info.reasoning
    is a string, or a list of strings (a multi-turn env's replies, one per turn); on a
    multi-turn env (`multi_turn`), only the list: the gate plays each reply as one turn, and one
    string would be played as a single reply."""
    for key, kind in _INFO_TYPES.items():
        value = info.get(key)
        if key == "reasoning" and isinstance(value, list):
            if not value:
                return "field info.reasoning as a list must hold one reply (a string) per turn"
            # a reply is a string or an assistant message with tool calls (rows.reply_problem)
            bad = next((f"info.reasoning[{k}]: {why}" for k, x in enumerate(value) if (why := reply_problem(x))), "")
            if bad:
                return bad
            continue
        if key == "reasoning" and multi_turn:
            return (f"field info.reasoning must be a list of replies on a multi-turn env, one string "
                    f"per turn in the order the env asks for them (e.g. [\"25\", \"12\"]), got "
                    f"{type(value).__name__ if not isinstance(value, str) else 'one string'}")
        if not isinstance(value, kind):
            return f"field info.{key} must be a {kind.__name__}, got {type(value).__name__}"
    if info["difficulty"] not in rules.DIFFICULTY:
        return f"info.difficulty {info['difficulty']!r} is not easy, medium (or med) or hard"
    if not all(isinstance(f, str) for f in info["structural_features"]):
        return "info.structural_features must be a list of names"
    return ""


def row_problem(obj, multi_turn: bool = False) -> str:
    """'' for a well-formed row, else what is wrong with it (`multi_turn`: the hub env's
    episodes are multi-turn, so info.reasoning is a list of replies)."""
    if obj is None:
        return "not JSON"
    if not isinstance(obj, dict) or not isinstance(obj.get("question"), str) \
            or not isinstance(obj.get("answer"), str) or not isinstance(obj.get("info"), dict):
        return "needs string question, string answer and an info object"
    bad = info_problems(obj["info"], multi_turn)
    if bad:
        return bad
    size = len(obj["question"]) + len(obj["answer"]) + len(str(obj["info"].get("reasoning", "")))
    if size > rules.MAX_ROW_CHARS:
        return (f"{size:,} characters (limit {rules.MAX_ROW_CHARS:,}); no prompt that long fits a "
                "training sequence")
    return ""


def load_rows(path: Path, with_lines: bool = False, multi_turn: bool = False):
    """(rows, problems): the well-formed rows and a "line N: what is wrong" per other line.
    with_lines: rows come as (line number, row) pairs."""
    rows, problems = [], []
    for n, obj in iter_jsonl(path):
        bad = row_problem(obj, multi_turn)
        if bad:
            problems.append(f"line {n}: {bad}")
        else:
            rows.append((n, obj) if with_lines else obj)
    return rows, problems


def _detail(line: str, what: str = "", at: list[int] = ()) -> str:
    """A failing line's detail: the field it read, what failed (every bucket, not the first),
    and up to five line numbers of rows that made it fail."""
    parts = [f"reads {rules.LINE[line].reads}"] + ([what] if what else [])
    if at:
        parts.append("lines " + ", ".join(map(str, sorted(at)[:5])) + (" ..." if len(at) > 5 else ""))
    return "; ".join(parts)


def check(dataset: Path, weakness_json: dict, prior: list[Path] = (),
          eval_fingerprints: dict | None = None, scored: dict | None = None,
          multi_turn: bool = False) -> GateReport:
    """Every line of the gate (driver.gates.rules names them). eval_fingerprints (from
    decontam.eval_fingerprints) enables the blind decontamination line and `scored` (from
    accuracy.score_rows) the accuracy line; without them that line is False and says how to
    get them. `multi_turn`: the hub env is multi-turn (hub_env.json's interaction), so a row's
    info.reasoning must be its list of replies (describe.multi_turn)."""
    L = rules.LINE
    rep = GateReport()
    bad_fields = weakness.problems(weakness_json)
    rep.add(L["weakness"].name, not bad_fields, "; ".join(bad_fields[:8]))
    numbered, problems = load_rows(dataset, with_lines=True, multi_turn=multi_turn)
    at = [n for n, _ in numbered]                    # the file line of each well-formed row
    rows = [r for _, r in numbered]
    rep.rows = len(rows)
    rep.add(L["well_formed"].name, not problems, "; ".join(problems[:5]))
    T = max(len(rows), 1)
    info = [r["info"] for r in rows]
    bucket = [(i.get("domain"), i.get("sub_domain")) for i in info]
    level = [rules.DIFFICULTY.get(i.get("difficulty")) for i in info]
    doms = collections.Counter(i.get("domain") for i in info)
    subs = collections.Counter(bucket)
    feats = [set(i.get("structural_features") or []) for i in info]
    per_feat = collections.Counter(f for fs in feats for f in fs)
    skel = [str(i.get("source", "")).startswith("skeleton:") for i in info]
    if bad_fields:   # the lines below still run, against an empty report
        weakness_json = {}
    defined = {f["name"] for f in weakness_json.get("structural_features", [])}
    buckets = {(d["name"], s["name"]) for d in weakness_json.get("domains", []) for s in d.get("sub_domains", [])}

    def share_line(key: str, ok_row, bound: float, at_least: bool, label: str) -> None:
        """A share-of-rows line: `ok_row[k]` says whether row k counts toward the share."""
        share = sum(ok_row) / T
        ok = share >= bound if at_least else share <= bound
        offenders = [at[k] for k, good in enumerate(ok_row) if good != at_least]
        rep.add(L[key].name, ok, _detail(key, f"{share:.3f} {label}", [] if ok else offenders))

    rep.add(L["count"].name, rules.MIN_ROWS <= len(rows) <= rules.MAX_ROWS, f"{len(rows)} rows")
    rep.add(L["domains"].name, len(doms) >= rules.MIN_DOMAINS,
            _detail("domains", f"{len(doms)} domains: " + ", ".join(map(str, sorted(doms, key=str)))))
    thin = sorted((d for d in doms if sum(1 for (x, _) in subs if x == d) < rules.MIN_SUBS_PER_DOMAIN), key=str)
    rep.add(L["subs"].name, not thin, _detail("subs", "domains with fewer: " + ", ".join(map(str, thin))))
    small = sorted((b for b, c in subs.items() if c / T < rules.MIN_BUCKET_SHARE), key=str)
    rep.add(L["bucket_share"].name, bool(subs) and not small,
            _detail("bucket_share", (f"smallest {min(subs.values()) / T:.3f}; under "
                                     f"{rules.MIN_BUCKET_SHARE}: " + ", ".join(f"{d}/{s} ({subs[(d, s)]} rows)"
                                                                           for d, s in small))
                    if subs else "no buckets"))
    share_line("hard", [lv == "hard" for lv in level], rules.MIN_HARD, True, "hard")
    share_line("easy", [lv == "easy" for lv in level], rules.MAX_EASY, False, "easy")
    share_line("two_features", [len(f) >= 2 for f in feats], rules.MIN_TWO_FEATURES, True,
               "with >=2 features")
    share_line("three_features", [len(f) >= 3 for f in feats], rules.MIN_THREE_FEATURES, True,
               "with >=3 features")
    low = sorted(f for f in (defined or per_feat) if per_feat.get(f, 0) / T < rules.MIN_FEATURE_SHARE)
    rep.add(L["feature_share"].name, not low,
            _detail("feature_share", "under the bar: " + ", ".join(
                f"{f} ({per_feat.get(f, 0) / T:.3f})" for f in low)))
    undefined = sorted(set(per_feat) - defined) if defined else []
    rep.add(L["features_defined"].name, not undefined,
            _detail("features_defined", "not defined: " + ", ".join(undefined),
                    [at[k] for k, fs in enumerate(feats) if fs & set(undefined)]))
    share_line("skeleton", skel, rules.MIN_SKELETON, True, "skeleton")
    stray = sorted((b for b in subs if b not in buckets), key=str)
    rep.add(L["buckets_known"].name, not stray,
            _detail("buckets_known", "not in weakness.json: " + ", ".join(f"{d}/{s}" for d, s in stray),
                    [at[k] for k, b in enumerate(bucket) if b in stray]))

    first: dict = {}
    dup_at = []
    for k, r in enumerate(rows):
        if first.setdefault((r["question"], r["answer"]), k) != k:
            dup_at.append(at[k])
    rep.add(L["duplicates"].name, not dup_at, _detail("duplicates", f"{len(dup_at)} duplicates", dup_at))
    # clones among distinct rows (an exact duplicate is reported by the line above)
    keys = [clone_key(r["question"]) for r in rows]
    seen_key: set = set()
    clone_at = []
    for k, key in enumerate(keys):
        if first[(rows[k]["question"], rows[k]["answer"])] != k:
            continue
        if key in seen_key:
            clone_at.append(at[k])
        seen_key.add(key)
    rep.add(L["clones"].name, not clone_at,
            _detail("clones", f"{len(clone_at)} clones (each line is a clone of an earlier row)", clone_at))
    prior_keys: set[str] = set()
    for p in prior:
        prior_rows, _ = load_rows(p)
        prior_keys |= {clone_key(r["question"]) for r in prior_rows}
    cross_at = [at[k] for k, key in enumerate(keys) if key in prior_keys]
    rep.add(L["prior_clones"].name, not cross_at,
            _detail("prior_clones", f"{len(cross_at)} clones", cross_at))
    by_bucket: dict = collections.defaultdict(collections.Counter)
    for b, i in zip(bucket, info):
        by_bucket[b][i.get("reasoning_depth")] += 1
    heavy = {}
    for b, c in sorted(by_bucket.items(), key=lambda kv: str(kv[0])):
        depth, count = c.most_common(1)[0]
        if count / sum(c.values()) > rules.MAX_DEPTH_SHARE:
            heavy[b] = (depth, count / sum(c.values()))
    rep.add(L["depth"].name, not heavy, _detail(
        "depth", "; ".join(f"{d}/{s}: reasoning_depth {v[0]!r} on {v[1]:.2f}" for (d, s), v in heavy.items())
        + ("" if all(v[0] is not None for v in heavy.values()) else
           " (None: the rows have no info.reasoning_depth)"),
        [at[k] for k, (b, i) in enumerate(zip(bucket, info))
         if b in heavy and i.get("reasoning_depth") == heavy[b][0]]))
    if scored is None:
        rep.add(L["accurate"].name, False, "not scored: run inside a run directory or pass --env ENV")
    else:
        lines = set(at)   # the well-formed rows only: the others fail "rows well-formed"
        mine = {**scored, "rows": [r for r in scored["rows"] if r["line"] in lines]}
        n_bad, detail = accuracy.failures(mine)
        unscored = len(rows) - len(mine["rows"])
        rep.add(L["accurate"].name, n_bad == 0 and unscored == 0,
                f"{n_bad} of {len(mine['rows'])} rows below full reward: {detail}" if n_bad else
                f"{unscored} rows not scored (the scores are of another file)")
    if eval_fingerprints is None:
        rep.add(L["decontam"].name, False,
                "no eval fingerprints: run inside a run directory or pass --env ENV")
    else:
        hits = [at[i - 1] for i in decontam.overlapping_rows(rows, eval_fingerprints)]
        rep.add(L["decontam"].name, not hits,
                f"{len(hits)} of our rows cover most of one eval row's rare "
                f"{eval_fingerprints['n']}-grams: lines " + ", ".join(map(str, hits[:10]))
                if hits else "")
    return rep
