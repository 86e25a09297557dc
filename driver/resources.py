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


def toml_value(value) -> str:
    """Encode one value as TOML through tomli-w: user text is never pasted into TOML."""
    import tomli_w

    return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()


def toml_inline(table: dict) -> str:
    """An inline table, encoded by tomli-w (it writes tables inside arrays inline)."""
    import tomli_w

    line = tomli_w.dumps({"v": [table]}).splitlines()[1].strip()
    return line[:-1] if line.endswith(",") else line


def toml_array_of_tables(blocks: list[dict], prefix: str) -> str:
    """`[[prefix]]` blocks; every key and value is encoded by tomli-w."""
    out = []
    for block in blocks:
        out.append(f"[[{prefix}]]")
        for key, value in block.items():
            encoded = toml_inline(value) if isinstance(value, dict) else toml_value(value)
            out.append(f"{toml_key(key)} = {encoded}")
        out.append("")
    return "\n".join(out)


def toml_key(key: str) -> str:
    import tomli_w

    return tomli_w.dumps({key: 0}).split("=", 1)[0].strip()


@lru_cache(maxsize=1)
def jinja():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["toml"] = toml_value
    env.filters["toml_blocks"] = toml_array_of_tables
    env.filters["pyrepr"] = repr
    env.filters["tojson"] = lambda v: json.dumps(v)
    return env
