"""Files shipped with the driver: templates, built-in environments, SKILL.md.

An editable install reads them from the checkout; a wheel carries them under driver/_data.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

_PKG = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"{name} is missing from this installation; reinstall the driver")


def templates_dir() -> Path:
    return _find("templates")


def environments_dir() -> Path:
    return _find("environments")


def skill_md() -> Path:
    return _find("SKILL.md")


@lru_cache(maxsize=1)
def jinja():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["pyrepr"] = repr
    env.filters["tojson"] = lambda v: json.dumps(v)
    return env
