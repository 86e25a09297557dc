"""A legacy (verifiers 0.1.x / prime-rl classic) environment for prime-rl's CPU tests.

prime-rl 09e2977 loads `[[orchestrator.train.env]] id = "prl_cpu_env_legacy"` with
`verifiers.load_environment(id, **args)`; an id without "/" is imported as a module, never
installed from the hub (src/prime_rl/utils/utils.py:234-259@09e2977), so this file only has to
be on PYTHONPATH (the env-server children inherit it).

`load_environment()` returns a `vf.SingleTurnEnv` over in-memory questions (16 train, 8 eval by
default), answered with "yes" or "no"; the rubric scores 1.0 when the reply contains "yes".

Knobs for the eval-row tests:
  raise_on_eval=k      the reward function raises for eval question k (verifiers' Rubric
                       catches it and scores 0: rubrics/rubric.py:215-233@58b119f);
                       also env PRL_CPU_ENV_RAISE_ON_EVAL
  fail_eval_reply, constant_fail_eval_reply
                       stand-in reply policies (PRL_STANDIN_POLICY=prl_cpu_env_legacy:fail_eval_reply):
                       raises (an HTTP 500 from the stand-in) for the eval question whose text
                       carries FAIL_MARKER, answers like the stand-in's `mixed` otherwise
"""
from __future__ import annotations

import hashlib
import os

import verifiers as vf
from datasets import Dataset

SYSTEM = "Answer the question with yes or no."
FAIL_MARKER = "[fail-me]"


def _rows(prefix: str, n: int, mark: int | None = None) -> list[dict]:
    return [{"question": f"{prefix} question {i}: is {i} a number?" + (f" {FAIL_MARKER}" if i == mark else ""),
             "answer": "yes", "info": {"index": i}} for i in range(n)]


def _reply_text(completion) -> str:
    if isinstance(completion, str):
        return completion
    for m in reversed(completion or []):
        if m.get("role") == "assistant":
            c = m.get("content")
            return c if isinstance(c, str) else " ".join(str(p.get("text", "")) for p in c or [])
    return ""


def load_environment(num_train: int = 16, num_eval: int = 8, raise_on_eval: int | None = None,
                     fail_marker_on_eval: int | None = None, **kwargs) -> vf.Environment:
    if raise_on_eval is None and os.environ.get("PRL_CPU_ENV_RAISE_ON_EVAL"):
        raise_on_eval = int(os.environ["PRL_CPU_ENV_RAISE_ON_EVAL"])

    def says_yes(completion, prompt=None, **_) -> float:
        if raise_on_eval is not None and f"eval question {raise_on_eval}:" in str(prompt):
            raise RuntimeError(f"prl_cpu_env_legacy: reward raises for eval question {raise_on_eval}")
        return 1.0 if "yes" in _reply_text(completion).lower() else 0.0

    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(_rows("train", num_train)),
        eval_dataset=Dataset.from_list(_rows("eval", num_eval, fail_marker_on_eval)),
        system_prompt=SYSTEM,
        rubric=vf.Rubric(funcs=[says_yes]),
        **kwargs,
    )


def fail_eval_reply(messages: list[dict], index: int) -> str:
    """Stand-in reply policy: raise for the marked eval question, else "yes"/"no" alternating."""
    text = " ".join(str(m.get("content")) for m in messages)
    if FAIL_MARKER in text:
        raise RuntimeError("prl_cpu_env_legacy.fail_eval_reply: refusing the marked eval question")
    h = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
    return "yes" if (h + index) % 2 == 0 else "no"


def constant_fail_eval_reply(messages: list[dict], index: int) -> str:
    """Stand-in reply policy: "yes" always (zero advantage, like the stand-in's `constant`), but
    raise for the marked eval question (an HTTP 500 for that request)."""
    if FAIL_MARKER in " ".join(str(m.get("content")) for m in messages):
        raise RuntimeError("prl_cpu_env_legacy.constant_fail_eval_reply: refusing the marked eval question")
    return "yes"
