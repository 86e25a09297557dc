"""Let PyPI renderers==0.1.8 serve classic prime-rl (09e2977), which was written against the
renderers submodule it pins (8704f9d).

Why: 8704f9d is not on the package index. 0.1.7 (the release before it) lacks
`OverlongPromptError`, which verifiers 58b119f imports, so the first release that works is 0.1.8
— but 0.1.8 replaced the keyword API of `create_renderer` / `create_renderer_pool` with a typed
config:

    8704f9d (what classic calls)                         0.1.8
    create_renderer(tok, renderer="default",             create_renderer(tok, config=None, *,
                    tool_parser=..., reasoning_parser=...,               chat_template_kwargs=None)
                    preserve_all_thinking=...,
                    preserve_thinking_between_tool_calls=...)
    create_renderer_pool(name, renderer=..., size=...,   create_renderer_pool(name, config=None, *,
                         tool_parser=..., ...)                           size=16, chat_template_kwargs=None)

The callers with the legacy keywords (at 09e2977 / 58b119f):
    prime-rl  src/prime_rl/orchestrator/orchestrator.py:918-925   create_renderer(tokenizer, renderer=..., ...)
    prime-rl  src/prime_rl/trainer/sft/train.py:164-171          (same; not used by these tests)
    verifiers verifiers/clients/renderer_client.py:501-509        create_renderer_pool(model, renderer=..., size=...,
                                                                                     tool_parser=..., ...)
Unpatched, each raises `TypeError: create_renderer() got an unexpected keyword argument 'renderer'`.

What this does: when `renderers` has been imported (never earlier: this module is loaded from a
.pth at every start of the test interpreter, so it imports nothing heavy itself), it wraps both
functions in `renderers.base` and their re-exports on `renderers`. A call that carries legacy
keywords (or a renderer *name* as the second positional) is translated into 0.1.8's typed config:
    renderer="name"                          -> renderers.configs.config_from_name(name)
                                                ("auto" -> None, 0.1.8's auto resolution)
    tool_parser / reasoning_parser           -> the config's fields of that name, where the
                                                config has them (DefaultRendererConfig does);
                                                None is dropped
    preserve_all_thinking=True               -> thinking_retention="all"
    preserve_thinking_between_tool_calls=True-> thinking_retention="tool_cycle"
                                                (0.1.8 renamed both flags to thinking_retention,
                                                configs.py BaseRendererConfig; False = the default)
A keyword the config cannot hold with a non-default value raises TypeError, as the legacy API
would have on a bad value, rather than being dropped silently. Calls already in the typed form
pass through untouched.
"""
from __future__ import annotations

import functools
import importlib.abc
import sys

_LEGACY = ("renderer", "tool_parser", "reasoning_parser", "preserve_all_thinking",
           "preserve_thinking_between_tool_calls")
_PATCHED = "_prl_renderers_compat"


def _typed_config(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """(args, kwargs) in 0.1.8's form for a call in either form (args excludes the first
    positional: the tokenizer or the tokenizer name)."""
    name = kwargs.pop("renderer", None)
    if args and isinstance(args[0], str):
        name, args = args[0], args[1:]
    legacy = {k: kwargs.pop(k) for k in _LEGACY[1:] if k in kwargs}
    if name is None and not legacy:
        return args, kwargs
    if args or "config" in kwargs:
        raise TypeError("renderers_compat: both a typed config and legacy renderer keywords given")
    from renderers.configs import AutoRendererConfig, config_from_name

    config = config_from_name(name) if name else None
    update = {}
    for key in ("tool_parser", "reasoning_parser"):
        value = legacy.get(key)
        if value is None:
            continue
        if config is None or key not in type(config).model_fields:
            raise TypeError(f"renderers_compat: renderer {name or 'auto'!r} takes no {key} in renderers 0.1.8")
        update[key] = value
    retention = ("all" if legacy.get("preserve_all_thinking") else
                 "tool_cycle" if legacy.get("preserve_thinking_between_tool_calls") else None)
    if retention is not None:
        update["thinking_retention"] = retention
    if update:
        config = config or AutoRendererConfig()
        # a fresh construction, so the config's own validators see the new fields
        config = type(config)(**(config.model_dump(exclude_unset=True) | update))
    kwargs["config"] = config
    return (), kwargs


def _wrap(fn):
    if getattr(fn, _PATCHED, False):
        return fn

    @functools.wraps(fn)
    def wrapper(first, *args, **kwargs):
        args, kwargs = _typed_config(args, kwargs)
        return fn(first, *args, **kwargs)

    setattr(wrapper, _PATCHED, True)
    return wrapper


def patch(module=None) -> None:
    """Wrap create_renderer / create_renderer_pool in renderers.base and on renderers."""
    pkg = module or sys.modules["renderers"]
    base = sys.modules.get("renderers.base") or __import__("renderers.base").base
    for fname in ("create_renderer", "create_renderer_pool"):
        wrapped = _wrap(getattr(base, fname))
        setattr(base, fname, wrapped)
        if fname in vars(pkg):
            setattr(pkg, fname, wrapped)


class _Loader(importlib.abc.Loader):
    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        patch(module)

    def __getattr__(self, name):          # resources, get_code, ... of the real loader
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Answers only for `renderers`, through the other finders, then patches after it loads."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "renderers":
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install() -> None:
    if "renderers" in sys.modules:
        patch()
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


install()
