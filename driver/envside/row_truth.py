"""Ground truth outside the row: a hub reward that scores a completion against the env's own state.

Some classic envs keep their ground truth in an object they hold, not in the row: verifiers'
ReasoningGymEnv stores `answer` as an index into its reasoning-gym dataset, and its reward does
`entry = self.rg_dataset[int(answer)]; rg_dataset.score_answer(answer=parsed, entry=entry)`. A
generated row's answer is no index into that data, so such a reward cannot score it.

The contract, for such an env:
- introspection (`detect`) finds the reward functions that read the env's state: on a few train
  rows, the function's value does not change when the question changes, it scores the row's own
  answer, and it raises on an answer that is not one of the env's own (a fresh string) while an
  out-of-range index also raises or the env's scorer object holds the row at `int(answer)`;
- the env holds its scorer as an attribute: an object with `score_answer(answer, entry)` (and,
  for the check, `obj[int(answer)]` giving a train row's entry), as ReasoningGymEnv's
  `rg_dataset` does;
- a generated row carries its ground truth as `info.entry`: the object that scorer takes (for
  reasoning-gym: `{"question", "answer", "metadata"}`);
- the generated env (and the gate's scoring) replace each such function, under its own name and
  weight, with one that parses the completion with the hub's parser
  (`str(parser.parse_answer(completion)).strip()`) and returns
  `scorer.score_answer(answer=that, entry=info["entry"])`. The other functions are the hub's.

This file is copied into a generated package that needs it (driver/envs/packages.py write_package)
and imported by classic.py's jobs; it imports no driver module.
"""
from __future__ import annotations

import asyncio
import copy
import inspect
import json
import logging
import re

ENTRY = "entry"                          # the info key a generated row's ground truth goes in
FRESH = "not-one-of-this-env's-answers"  # a foreign answer: no index, no key
FAR = "1000000007"                       # a foreign answer: an index past any dataset here
OTHER_QUESTION = "An unrelated question: what colour is the sky on a clear day?"
SAMPLE_ROWS = 3


class MissingEntry(ValueError):
    """A row without info.entry reached a reward that reads it."""


def scorer_of(env) -> str | None:
    """The attribute of `env` holding its scorer: an object with a callable `score_answer`
    (the env's own instance attributes, in their order); None when there is none."""
    for name, value in list(getattr(env, "__dict__", {}).items()):
        if name.startswith("__") or isinstance(value, (str, bytes, int, float, dict, list, tuple)):
            continue
        if callable(getattr(value, "score_answer", None)):
            return name
    return None


def entry_of(env, attr: str, answer):
    """The scorer object's entry for a row of the env's own (its answer an index or a key)."""
    obj = getattr(env, attr)
    try:
        return obj[int(answer)]
    except (TypeError, ValueError):
        return obj[answer]


def plain(entry):
    """`entry` as JSON would hold it (a row's info.entry)."""
    return json.loads(json.dumps(entry, default=str))


def _formatted(parser, text: str) -> str:
    """A completion whose parsed answer is `text`, in the parser's format when it has one."""
    fields = getattr(parser, "get_fields", None)
    if callable(fields) and callable(getattr(parser, "format", None)):
        names = fields()
        field = getattr(parser, "answer_field", None) or ("answer" if "answer" in names else names[-1])
        try:
            return parser.format(**{field: text})
        except Exception:  # noqa: BLE001 - an odd parser: the bare text
            return text
    return text


def _funcs_of(rubric) -> list:
    if hasattr(rubric, "rubrics"):
        return [f for r in rubric.rubrics for f in _funcs_of(r)]
    return list(getattr(rubric, "funcs", getattr(rubric, "reward_funcs", [])))


class _Errors(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _score(env, row: dict, text: str, errors: _Errors) -> tuple[dict, set]:
    """({func name: value}, {names of the funcs that raised}) for `text` as the completion (the
    messages verifiers' own objects, as a rollout hands them to a reward)."""
    from verifiers.types import State
    from verifiers.utils.message_utils import normalize_messages

    system = [{"role": "system", "content": env.system_prompt}] if getattr(env, "system_prompt", None) else []
    st = State(input={"prompt": normalize_messages(system + [{"role": "user", "content": str(row.get("question", ""))}]),
                      "answer": str(row.get("answer", "")), "info": copy.deepcopy(row.get("info") or {}),
                      "example_id": 0, "task": "default"})
    st["completion"] = normalize_messages([{"role": "assistant", "content": text}])
    st["trajectory"] = []
    errors.messages = []
    asyncio.run(env.rubric.score_rollout(st))
    raised = {m.group(1) for msg in errors.messages
              for m in [re.search(r"reward function (\S+?):", msg)] if m}
    return dict(st.get("metrics") or {}), raised


def question_of(row: dict) -> str:
    """A row's question: its `question`, else its prompt's last user message."""
    q = row.get("question")
    if q is None:
        users = [m for m in row.get("prompt") or [] if m.get("role") == "user"]
        q = users[-1]["content"] if users else ""
    return str(q)


def detect(env, train) -> dict:
    """hub_env.json's `reward_reads_env_state`: {"verdict": "yes" | "no" | "undetermined",
    "funcs": the reward functions that read the env's own state, "evidence": in words,
    "scorer": {"attr", "method", "entry_keys", "entry_example"} or None}. Never raises."""
    try:
        return _detect(env, train)
    except Exception as e:  # noqa: BLE001 - an odd env: say so, never stop introspection
        return {"verdict": "undetermined", "funcs": [], "scorer": None,
                "evidence": f"the check could not run on this env: {type(e).__name__}: {e}"[:400]}


def _detect(env, train) -> dict:
    n = min(SAMPLE_ROWS, len(train))
    if not n:
        return {"verdict": "undetermined", "funcs": [], "scorer": None, "evidence": "no train rows to score"}
    names = [getattr(f, "__name__", repr(f)) for f in _funcs_of(env.rubric)]
    attr = scorer_of(env)
    errors = _Errors()
    loggers = [logging.getLogger(), *(logging.getLogger(k) for k in list(logging.root.manager.loggerDict)
                                      if k.startswith("verifiers"))]
    for lg in loggers:
        lg.addHandler(errors)
    try:
        candidates = set(names)
        far_raises, holds_row = set(names), attr is not None
        for i in range(n):
            row = {**train[i], "question": question_of(train[i])}
            entry = None
            if attr is not None:
                try:
                    entry = entry_of(env, attr, row.get("answer"))
                    holds_row = holds_row and isinstance(entry, dict) and entry.get("question") == row["question"]
                except Exception:  # noqa: BLE001 - the object has no entry for this row
                    holds_row = False
            ref = (row.get("info") or {}).get("reference_completion")
            if isinstance(entry, dict) and "answer" in entry:
                text = _formatted(env.parser, str(entry["answer"]))
            elif ref:
                text = str(ref)
            else:
                text = _formatted(env.parser, str(row.get("answer", "")))
            own, own_raised = _score(env, row, text, errors)
            moved, _ = _score(env, {**row, "question": OTHER_QUESTION}, text, errors)
            _, fresh_raised = _score(env, {**row, "answer": FRESH}, text, errors)
            _, far_raised = _score(env, {**row, "answer": FAR}, text, errors)
            candidates &= {f for f in names if f not in own_raised and f in fresh_raised
                           and own.get(f) == moved.get(f)}
            far_raises &= far_raised
    finally:
        for lg in loggers:
            lg.removeHandler(errors)
    funcs = [f for f in names if f in candidates and (f in far_raises or holds_row)]
    if not funcs:
        return {"verdict": "no", "funcs": [], "scorer": None,
                "evidence": (f"on {n} train rows every reward function scores from the row: none both ignores "
                             "the question and raises on an answer that is not one of the env's own")}
    why = ("an out-of-range index raised too" if set(funcs) <= far_raises else
           f"and {type(env).__name__}.{attr}[int(answer)] holds each row's question")
    scorer = None
    if attr is not None:
        example = plain(entry_of(env, attr, train[0].get("answer")))
        scorer = {"attr": attr, "method": "score_answer", "info_key": ENTRY,
                  "call": f"env.{attr}.score_answer(answer=<the parsed completion>, entry=info['{ENTRY}'])",
                  "entry_keys": sorted(example) if isinstance(example, dict) else None,
                  "entry_example": example}
    return {"verdict": "yes", "funcs": funcs, "scorer": scorer,
            "evidence": (f"the reward reads the env's own state: on {n} train rows "
                         f"{', '.join(funcs)} gave the same value with the question changed, and raised on "
                         f"an answer that is not one of the env's own ({FRESH!r}); {why}. Its ground "
                         "truth is not in the row, so a generated row must carry it as info."
                         f"{ENTRY}" + (f" for {type(env).__name__}.{attr}.score_answer" if attr else
                                       " and the env must expose a scorer (it holds none)"))}


def _parse(parser, completion) -> str:
    return str(parser.parse_answer(completion)).strip()


def _row_reward(name: str, scorer, parser, env_name: str, attr: str):
    """A reward under `name`: the hub's scorer on the row's info.entry."""
    async def reward(completion, info=None, **kwargs) -> float:
        entry = (info or {}).get(ENTRY) if hasattr(info, "get") else None
        if isinstance(entry, str):
            entry = json.loads(entry)
        if not isinstance(entry, dict):
            raise MissingEntry(f"no info.{ENTRY}: {env_name} scores against its own data, so a row carries "
                               f"its ground truth as info.{ENTRY}, the object {attr}.score_answer(answer, "
                               "entry) takes (see hub_env.json reward_reads_env_state.scorer.entry_example)")
        value = scorer(answer=_parse(parser, completion), entry=entry)
        if inspect.isawaitable(value):
            value = await value
        return float(value)

    reward.__name__ = reward.__qualname__ = name
    return reward


def swap(hub, rubric, record: dict):
    """`rubric` (the hub's own, freshly loaded) with each function of record["funcs"] replaced,
    in place, by the row-truth reward under the same name and weight. Returns it."""
    attr = record["scorer"]["attr"]
    scorer = getattr(getattr(hub, attr), record["scorer"].get("method") or "score_answer")
    names = set(record["funcs"])

    def walk(r):
        if hasattr(r, "rubrics"):
            for sub in r.rubrics:
                walk(sub)
            return
        key = "funcs" if hasattr(r, "funcs") else "reward_funcs"
        setattr(r, key, [_row_reward(f.__name__, scorer, hub.parser, type(hub).__name__, attr)
                         if getattr(f, "__name__", None) in names else f for f in getattr(r, key)])
    walk(rubric)
    return rubric


def pack(info: dict) -> dict:
    """A generated row's info as the generated env's dataset holds it: the entry as a JSON string
    (a table column cannot hold entries whose shapes differ); the reward reads either form."""
    if isinstance(info, dict) and isinstance(info.get(ENTRY), (dict, list)):
        return {**info, ENTRY: json.dumps(info[ENTRY])}
    return info
