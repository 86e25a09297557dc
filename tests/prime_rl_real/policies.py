"""Reply policies for the inference stand-in (PRL_STANDIN_POLICY=policies:NAME) on the project's
own envs: what a student would answer, right about half the time, so GRPO groups carry
advantages and an eval a mean strictly between 0 and 1.

A policy is `f(messages, index) -> str`: the chat messages of the request and the choice's index
within it. The choice between right and wrong is a hash of both, so a replayed request gets the
same reply (a resumed run, the same eval twice).
"""
from __future__ import annotations

import hashlib
import json
import re

_NUMBERS = re.compile(r"\d+")


def _last_user(messages: list[dict]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            c = m.get("content")
            return c if isinstance(c, str) else " ".join(p.get("text", "") for p in c or [] if isinstance(p, dict))
    return ""


def _coin(messages: list[dict], index: int) -> bool:
    h = hashlib.sha256(json.dumps([messages, index], sort_keys=True, default=str).encode()).digest()
    return h[0] % 2 == 0


def stock_arithmetic(messages: list[dict], index: int) -> str:
    """StockArithmetic-v1: the question's five numbers are initial, two deliveries, two
    withdrawals (environments/stock_arithmetic/stock_arithmetic/data.py render_question); the
    reply is the env's strict JSON answer, right or off by one."""
    nums = [int(n) for n in _NUMBERS.findall(_last_user(messages))]
    if len(nums) < 5:
        return json.dumps({"final_stock": 0})
    initial, d1, d2, w1, w2 = nums[-5:]
    stock = initial + d1 + d2 - w1 - w2
    return json.dumps({"final_stock": stock if _coin(messages, index) else stock + 1})


def says_yes_or_no(messages: list[dict], index: int) -> str:
    """The tests' echo envs: "yes" scores 1, anything else 0."""
    return "yes" if _coin(messages, index) else "no"
