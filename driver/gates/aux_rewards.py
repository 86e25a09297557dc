"""Auxiliary rewards: allowed only through an explicit list that this gate checks.

A teacher may add `aux_rewards.py` next to its generator, declaring
`AUX_REWARDS = [("fn_name", weight, "failure mode from the weakness report"), ...]`. The file is
read as text (parsed with ast, never imported by the driver). Each function must have the
signature `async def fn(completion, answer, info=None, state=None, **kwargs) -> float`, at most
10 lines, weight <= 0.2 (<= 0.3 in total), name a failure mode of the weakness report, and import
nothing that makes it non-deterministic or reach outside (random, time, os, network, ...).

An aux function reads only its `completion`, `answer` and `info` (READS_LINE, checked on the
text): never `state` or `kwargs`, no `global`/`nonlocal`, no name of the file's module level but
its imports, functions and constants, no builtin that reaches names or frames indirectly
(locals, eval, getattr, ...), no frame or dunder attribute, no introspection module. Once every
line above passes, `check_rows` runs each declared function on every generated row in the
training interpreter (driver/envside/aux.py) and RANGE_LINE holds only when each returns a
number in [0, 1] on each row: a value of 10 at weight 0.2 would outweigh the hub reward. (At
training time the generated env's own wrapper, templates/classic/env_module.py.j2, is the
second guard.)
"""
from __future__ import annotations

import ast
import builtins
import subprocess
from pathlib import Path

from driver.envs import envside
from driver.gates.dataset import GateReport

MAX_WEIGHT, MAX_TOTAL, MAX_LINES = 0.2, 0.3, 10
FORBIDDEN_MODULES = {"random", "time", "datetime", "os", "sys", "subprocess", "socket", "urllib",
                     "requests", "httpx", "secrets", "uuid", "numpy.random", "shutil", "pathlib"}
SIGNATURE = (["completion", "answer", "info", "state"], "kwargs")

READS_LINE = "aux functions read only completion, answer and info"
RANGE_LINE = "each aux reward returns a number in [0, 1] on every row"
UNREAD = ("state", "kwargs")   # parameters an aux function takes but may not read
# builtins that read names, frames or attributes by other means than plain reads
BANNED_BUILTINS = {"locals", "vars", "globals", "eval", "exec", "compile", "__import__", "open",
                   "input", "breakpoint", "getattr", "setattr", "delattr"}
BUILTINS = {n for n in dir(builtins) if not n.startswith("_")} - BANNED_BUILTINS
INTROSPECTION = {"inspect", "gc", "builtins", "ctypes", "importlib", "traceback"}
FRAME_ATTRS = ("f_", "tb_", "gi_", "cr_", "ag_")   # frame, traceback, generator, coroutine


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
    declared = {name for name, _, _ in decl}
    top = _module_names(tree)
    reads = [f"{name}: {', '.join(p)}" for name, fn in funcs.items()
             if (p := _read_problems(fn, name in declared, top))]
    rep.add(READS_LINE, not reads, "; ".join(reads))
    return rep


def _scope_walk(nodes):
    """Every node under `nodes`, not descending into function, lambda or class bodies."""
    todo = list(nodes)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def _import_names(node) -> dict[str, str]:
    """{name bound: module} of an import statement."""
    if isinstance(node, ast.Import):
        return {(a.asname or a.name.split(".")[0]): a.name for a in node.names}
    if isinstance(node, ast.ImportFrom):
        return {(a.asname or a.name): node.module or "" for a in node.names}
    return {}


def _module_names(tree: ast.Module) -> dict[str, str]:
    """The names the file's module level binds: {name: its module} for an import, {name: ""}
    for a function, class or constant."""
    names: dict[str, str] = {}
    for node in _scope_walk(tree.body):
        names.update(_import_names(node))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = ""
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.setdefault(node.id, "")
    return names


def _bound(fn) -> set[str]:
    """Every name the function binds anywhere inside it: parameters (its own and nested ones),
    assignments, loop and comprehension targets, except and match names, imports, nested
    definitions."""
    out: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            out.add(node.rest)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not fn:
            out.add(node.name)
        out |= set(_import_names(node))
    return out


def _read_problems(fn, declared: bool, top: dict[str, str]) -> list[str]:
    """What `fn` reads beyond its completion, answer and info (and its own locals, builtins, the
    file's imports, functions and constants), in words; [] when nothing. `declared`: an aux
    reward of AUX_REWARDS, which may not touch `state` or `kwargs` (a helper never gets them)."""
    bound, out = _bound(fn), []
    for node in ast.walk(fn):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            out.append(f"declares {type(node).__name__.lower()} {', '.join(node.names)}")
        elif isinstance(node, ast.Name):
            if declared and node.id in UNREAD:
                out.append(f"reads `{node.id}`")
            elif node.id in bound or not isinstance(node.ctx, ast.Load):
                continue
            elif node.id in top:
                if top[node.id].split(".")[0] in INTROSPECTION:
                    mod = top[node.id]
                    out.append(f"uses `{node.id}`" + (f" ({mod})" if mod != node.id else ""))
            elif node.id in BANNED_BUILTINS:
                out.append(f"calls `{node.id}`")
            elif node.id not in BUILTINS:
                out.append(f"reads `{node.id}`, a name it does not define")
        elif isinstance(node, ast.Attribute) and (
                node.attr.startswith(FRAME_ATTRS) or node.attr.startswith("__")):
            out.append(f"reads `.{node.attr}`")
        elif (mods := _import_names(node)) and any(m.split(".")[0] in INTROSPECTION for m in mods.values()):
            out.append(f"imports {', '.join(sorted(set(mods.values())))}")
    return list(dict.fromkeys(out))


def check_rows(python: str, path: Path, dataset: Path, timeout: float = 600,
               call_timeout: float | None = None) -> GateReport:
    """RANGE_LINE: every declared aux function called on every row of `dataset` in `python` (the
    training interpreter) returns a number in [0, 1]. A failure names the function, the value
    it returned (or the exception it raised) and up to five row line numbers. `call_timeout`:
    seconds per call (AuxRequest's, which TEACHER.md states, by default)."""
    rep = GateReport()
    request = envside.AuxRequest(aux_file=str(path), dataset=str(dataset),
                                 **({} if call_timeout is None else {"call_timeout": call_timeout}))
    try:
        got = envside.call(python, envside.AUX_CHECK, request, timeout=timeout)
    except envside.EnvsideError as e:
        rep.add(RANGE_LINE, False, f"the functions could not be run on the rows: {e.tail(4)}")
        return rep
    except subprocess.TimeoutExpired:
        rep.add(RANGE_LINE, False, f"the functions did not finish on the rows within {timeout:g} s")
        return rep
    if got.load_error:
        rep.add(RANGE_LINE, False, f"aux_rewards.py did not load: {got.load_error}")
        return rep
    words = {"value": "returned {} (not a number in [0, 1])", "error": "raised {}",
             "timeout": "{}", "missing": "{}"}
    parts = []
    for f in got.faults:
        lines = ", ".join(map(str, f.lines)) + (" ..." if f.count > len(f.lines) else "")
        where = (f" on {f.count} row{'s' * (f.count != 1)}, line{'s' * (len(f.lines) != 1)} {lines}"
                 if f.lines else "")
        parts.append(f"{f.name} {words.get(f.kind, '{}').format(f.detail)}{where}")
    rep.add(RANGE_LINE, not parts, "; ".join(parts))
    return rep


def check_with_rows(python: str, path: Path, weakness: dict, dataset: Path) -> GateReport:
    """The static lines (`check`), then, when every one passes, RANGE_LINE (`check_rows`): a file
    the text check refuses is never run."""
    rep = check(path, weakness)
    if rep.passed:
        rep.lines += check_rows(python, path, dataset).lines
    else:
        rep.add(RANGE_LINE, False, "not run: the functions run on the rows once the aux lines "
                                   "above pass")
    return rep
