"""Auxiliary rewards: allowed only through an explicit list that this gate checks.

A teacher may add `aux_rewards.py` next to its generator, declaring
`AUX_REWARDS = [("fn_name", weight, "failure mode from the weakness report"), ...]`. The file is
read as text (parsed with ast, never imported by the driver). Each function must have the
signature `async def fn(completion, answer, info=None, state=None, **kwargs) -> float`, at most
10 lines, weight <= 0.2 (<= 0.3 in total), name a failure mode of the weakness report, and import
nothing that makes it non-deterministic or reach outside (random, time, os, network, ...).
"""
from __future__ import annotations

import ast
from pathlib import Path

from driver.gates.dataset import GateReport

MAX_WEIGHT, MAX_TOTAL, MAX_LINES = 0.2, 0.3, 10
FORBIDDEN_MODULES = {"random", "time", "datetime", "os", "sys", "subprocess", "socket", "urllib",
                     "requests", "httpx", "secrets", "uuid", "numpy.random", "shutil", "pathlib"}
SIGNATURE = (["completion", "answer", "info", "state"], "kwargs")


def _failure_modes(weakness: dict) -> set[str]:
    modes = set()
    for d in weakness.get("domains", []):
        modes.add(d.get("name"))
        modes |= {s.get("name") for s in d.get("sub_domains", [])}
    return {m for m in modes if m}


def check(path: Path, weakness: dict) -> GateReport:
    rep = GateReport()
    try:
        tree = ast.parse(Path(path).read_text())
    except SyntaxError as e:
        rep.add("aux rewards parse", False, str(e))
        return rep
    decl = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "AUX_REWARDS" for t in node.targets):
            try:
                decl = ast.literal_eval(node.value)
            except ValueError:
                decl = None
    ok_decl = isinstance(decl, list) and all(
        isinstance(e, tuple) and len(e) == 3 and isinstance(e[0], str)
        and isinstance(e[1], (int, float)) and isinstance(e[2], str) for e in decl)
    rep.add("AUX_REWARDS is a literal list of (name, weight, failure mode)", ok_decl)
    if not ok_decl:
        return rep
    funcs = {n.name: n for n in tree.body if isinstance(n, (ast.AsyncFunctionDef, ast.FunctionDef))}
    rep.add("each aux weight <= 0.2", all(0 < w <= MAX_WEIGHT for _, w, _ in decl),
            ", ".join(f"{n}={w}" for n, w, _ in decl if not 0 < w <= MAX_WEIGHT))
    rep.add("aux weights total <= 0.3", sum(w for _, w, _ in decl) <= MAX_TOTAL + 1e-9)
    modes = _failure_modes(weakness)
    rep.add("each aux reward names a failure mode of the weakness report",
            all(m in modes for _, _, m in decl), ", ".join(m for _, _, m in decl if m not in modes))
    bad_sig, long_fn = [], []
    for name, _, _ in decl:
        fn = funcs.get(name)
        a = fn.args if fn else None
        if not isinstance(fn, ast.AsyncFunctionDef) or [x.arg for x in a.args] != SIGNATURE[0] \
                or len(a.defaults) != 2 or any(getattr(d, "value", 0) is not None for d in a.defaults) \
                or not a.kwarg or a.kwarg.arg != SIGNATURE[1]:
            bad_sig.append(name)
            continue
        if fn.end_lineno - fn.lineno + 1 > MAX_LINES:
            long_fn.append(name)
    rep.add("aux signature async def fn(completion, answer, info=None, state=None, **kwargs)",
            not bad_sig, ", ".join(bad_sig))
    rep.add("aux functions <= 10 lines", not long_fn, ", ".join(long_fn))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    bad = sorted(m for m in imported if m in FORBIDDEN_MODULES or m.split(".")[0] in FORBIDDEN_MODULES)
    rep.add("aux rewards import nothing non-deterministic or outward-facing", not bad, ", ".join(bad))
    return rep
