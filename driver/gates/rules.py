"""The row schema and every line of the dataset gate, defined once.

TEACHER.md, the LLM teacher's prompt and `driver validate --help` are rendered from these
tables, and the gate (driver.gates.dataset) names its lines from them, so a rule cannot be
enforced without being written where the teacher reads it. Thresholds live here too.
"""
from __future__ import annotations

from dataclasses import dataclass

from driver.run.arm_files import ArmFiles

MIN_ROWS, MAX_ROWS = 500, 1000
MIN_DOMAINS, MIN_SUBS_PER_DOMAIN, MIN_BUCKET_SHARE = 3, 2, 0.03
MIN_HARD, MAX_EASY = 0.40, 0.20
MIN_TWO_FEATURES, MIN_THREE_FEATURES, MIN_FEATURE_SHARE = 0.80, 0.40, 0.10
MIN_SKELETON = 0.30
MAX_DEPTH_SHARE = 0.70
MAX_ROW_CHARS = 20_000
# `med` is the procedure's spelling, `medium` the gate's; both count as the middle label
DIFFICULTY = {"easy": "easy", "med": "medium", "medium": "medium", "hard": "hard"}


@dataclass(frozen=True)
class RowField:
    name: str       # as written in a row: `question` or `info.<key>`
    kind: str       # JSON type
    allowed: str    # allowed values, in words
    meaning: str


ROW_FIELDS: tuple[RowField, ...] = (
    RowField("question", "string", "any text", "the prompt the student sees as the user turn"),
    RowField("answer", "string", "any text", "the answer the hub rubric compares against, "
             "computed by the generator's solver"),
    RowField("info.domain", "string", "a domain name of weakness.json", "the row's weakness"),
    RowField("info.sub_domain", "string", "a sub-domain name of that domain",
             "the row's bucket within its domain"),
    RowField("info.difficulty", "string", "easy, medium (or med) or hard",
             "how hard the row is for the student"),
    RowField("info.structural_features", "list of strings",
             "names defined in weakness.json's structural_features",
             "the structural features the row exercises"),
    RowField("info.source", "string", '"template:<name>" or "skeleton:train_step_<s>_idx_<i>"',
             "a skeleton row paraphrases failed train rollout <i> (its `idx` in failures.jsonl) of "
             "train step <s>; any other row names its template"),
    RowField("info.reasoning", "string; for a multi-turn env, a list of replies",
             "a full completion in the hub env's answer format; for a multi-turn env (hub_env.json's "
             "interaction.kind), the replies that win the episode, one per turn: each a string, or "
             "on a tool env a reply that calls tools, an assistant message in OpenAI's shape "
             '`{"role": "assistant", "content": null, "tool_calls": [{"id": "call_0", "type": '
             '"function", "function": {"name": "TOOL", "arguments": {"ARG": VALUE}}}]}` '
             "(a tool of hub_env.json's interaction.tools, its arguments a JSON object)",
             "a worked solution ending in the row's answer; the hub rubric scores it as a "
             "completion and must give full reward. A multi-turn env plays the replies, in order, "
             "through its own turns from the row's initial state (question and info), and the hub "
             "rubric must give that whole episode full reward; a tool env runs each reply's tool "
             "calls with the hub's own tools and puts their results in the conversation before the "
             "next reply"),
    RowField("info.reasoning_depth", "integer or string", "any label, e.g. the number of "
             "solution steps", "how many reasoning steps the row needs; within one bucket no "
             "single value may cover more than 70% of rows (a row without it counts as one "
             "value, `null`)"),
)

REQUIRED_INFO = tuple(f.name.split(".", 1)[1] for f in ROW_FIELDS
                      if f.name.startswith("info.") and f.name != "info.reasoning_depth")


@dataclass(frozen=True)
class GateLine:
    key: str
    name: str       # the line as the gate prints it
    reads: str      # the field(s) it reads
    rule: str       # the rule, in words a teacher acts on


def _pct(x: float) -> str:
    return f"{round(100 * x)}%"


LINES: tuple[GateLine, ...] = (
    GateLine("weakness", f"{ArmFiles.WEAKNESS} valid", ArmFiles.WEAKNESS,
             f"{ArmFiles.WEAKNESS} parses against its schema (every bad field is named)"),
    GateLine("well_formed", "rows well-formed", "every row",
             "each line is a JSON object with string question and answer, and info holding every "
             f"required field with its type; at most {MAX_ROW_CHARS:,} characters per row"),
    GateLine("count", f"row count in [{MIN_ROWS}, {MAX_ROWS}]", "rows",
             f"{MIN_ROWS} to {MAX_ROWS} well-formed rows"),
    GateLine("domains", f">={MIN_DOMAINS} domains", "info.domain",
             f"at least {MIN_DOMAINS} distinct domains"),
    GateLine("subs", f"every domain >={MIN_SUBS_PER_DOMAIN} sub-domains", "info.domain, info.sub_domain",
             f"each domain has rows in at least {MIN_SUBS_PER_DOMAIN} sub-domains"),
    GateLine("bucket_share", f"smallest (domain, sub_domain) >={_pct(MIN_BUCKET_SHARE)}",
             "info.domain, info.sub_domain",
             f"every (domain, sub_domain) bucket holds at least {_pct(MIN_BUCKET_SHARE)} of rows"),
    GateLine("hard", f"hard >={_pct(MIN_HARD)}", "info.difficulty",
             f"at least {_pct(MIN_HARD)} of rows are hard"),
    GateLine("easy", f"easy <={_pct(MAX_EASY)}", "info.difficulty",
             f"at most {_pct(MAX_EASY)} of rows are easy"),
    GateLine("two_features", f">=2 features (>={_pct(MIN_TWO_FEATURES)})", "info.structural_features",
             f"at least {_pct(MIN_TWO_FEATURES)} of rows list 2 or more distinct features"),
    GateLine("three_features", f">=3 features (>={_pct(MIN_THREE_FEATURES)})",
             "info.structural_features",
             f"at least {_pct(MIN_THREE_FEATURES)} of rows list 3 or more distinct features"),
    GateLine("feature_share", f"per-feature coverage (each >={_pct(MIN_FEATURE_SHARE)})",
             "info.structural_features",
             f"every feature defined in weakness.json appears on at least "
             f"{_pct(MIN_FEATURE_SHARE)} of rows"),
    GateLine("features_defined", "features defined in weakness report", "info.structural_features",
             "every feature a row lists is defined in weakness.json"),
    GateLine("skeleton", f"skeleton-source (>={_pct(MIN_SKELETON)})", "info.source",
             f'at least {_pct(MIN_SKELETON)} of rows have a source starting with "skeleton:"'),
    GateLine("buckets_known", "every bucket is in the weakness report", "info.domain, info.sub_domain",
             "every (domain, sub_domain) of a row is a bucket of weakness.json"),
    GateLine("duplicates", "no duplicate rows", "question, answer",
             "no two rows have the same question and answer"),
    GateLine("clones", "no clone pairs", "question",
             "no two questions are equal once every number (digits, with any decimal part) "
             "becomes # and every capitalised name after a lower-case word or punctuation becomes "
             "NAME, whitespace collapsed and case ignored (generators.clone_key). A number's "
             "value and its shape (digit count, sign) are both masked: two questions that differ "
             "only in numbers are clones, so structural diversity must come from the wording "
             "and the problem's structure. On a formulaic env with few wordings, plan the "
             "distinct wordings before the row count"),
    GateLine("prior_clones", "no clone of a prior iteration's row", "question",
             "no question is a clone (as above) of a row of an earlier iteration's dataset"),
    GateLine("depth", f"no reasoning depth >{_pct(MAX_DEPTH_SHARE)} within a bucket",
             "info.reasoning_depth",
             f"within each bucket, no single reasoning_depth value covers more than "
             f"{_pct(MAX_DEPTH_SHARE)} of its rows"),
    GateLine("accurate", "reasoning earns full reward (hub rubric)", "info.reasoning, answer, info",
             "the hub env's own rubric, scoring info.reasoning as the completion against the row's "
             "answer and info, gives its full reward (the sum of its positive weights) on every "
             "row; on a multi-turn env, info.reasoning's replies are played through the env's own "
             "turns and the whole episode is scored. A row without an info key the rubric reads scores less: hub_env.json's "
             "info_keys_read lists them. Where hub_env.json's reward_reads_env_state has verdict "
             "yes (the reward scores against the env's own data, not the row), that reward is the "
             "env's scorer on the row's info.entry, so every row carries its ground truth there. "
             "Failures are named by template and line, with the reward function's own error text"),
    GateLine("decontam", "no overlap with the eval split (blind)", "question",
             "no question covers most of the rare word 8-grams of any single eval row of the hub "
             "env (checked blind: only hashes of the eval split reach the driver; a reworded copy "
             "of an eval problem is caught, distinct problems in the same template are not)"),
)

LINE = {line.key: line for line in LINES}


def schema_markdown() -> str:
    """The row schema as a Markdown list (TEACHER.md, the LLM prompt, validate --help)."""
    return "\n".join(f"- `{f.name}` ({f.kind}; {f.allowed}): {f.meaning}" for f in ROW_FIELDS)


def lines_markdown() -> str:
    """Every gate line as a Markdown list: the name it prints, the field it reads, its rule."""
    return "\n".join(f"- **{g.name}** (reads `{g.reads}`): {g.rule}" for g in LINES)
