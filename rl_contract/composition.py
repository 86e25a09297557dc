"""prime-rl's config composition, as a pure function: `@ a.toml @ b.toml --x.y-z V ...`.

A file is TOML, or JSON where its name ends in .json (`rl` starts its servers on the JSON
subconfigs it writes: src/prime_rl/entrypoints/rl.py:46,87-95,195@559b447). Files merge left to right (tables deep-merge, lists are replaced whole), then CLI flags win;
`--flag` / `--no-flag` set booleans. The driver composes a launch's arguments with it before
launching (to check the effective config), and the embedded trainer and the test double
compose their arguments with it, so all three agree on what a launch means.
"""
from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any


class CompositionError(ValueError):
    pass


def deep_merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def compose(argv: list[str]) -> dict:
    files: dict = {}
    cli: dict = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "@":
            if i + 1 >= len(argv):
                raise CompositionError("`@` must be followed by a config file")
            path = Path(argv[i + 1])
            try:
                text = path.read_text(encoding="utf-8")
                loaded = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
            except FileNotFoundError:
                raise CompositionError(f"config file not found: {path}") from None
            except (tomllib.TOMLDecodeError, ValueError) as e:
                kind = "JSON" if path.suffix == ".json" else "TOML"
                raise CompositionError(f"{path} is not valid {kind}: {e}") from None
            if not isinstance(loaded, dict):
                raise CompositionError(f"{path} does not hold a table")
            files = deep_merge(files, loaded)
            i += 2
        elif tok.startswith("--"):
            keys = [k.replace("-", "_") for k in tok[2:].split(".")]
            takes_value = i + 1 < len(argv) and not argv[i + 1].startswith("--") and argv[i + 1] != "@"
            if takes_value:
                value: Any = argv[i + 1]
                i += 2
            elif keys[-1].startswith("no_"):
                keys[-1], value = keys[-1][3:], False
                i += 1
            else:
                value = True
                i += 1
            node = cli
            for k in keys[:-1]:
                node = node.setdefault(k, {})
                if not isinstance(node, dict):
                    raise CompositionError(f"{tok}: {k} is not a table")
            node[keys[-1]] = value
        else:
            raise CompositionError(f"unexpected argument {tok!r}: use `@ file.toml` or `--key value`")
    return deep_merge(files, cli)


def get(cfg: dict, dotted: str, default=None):
    node: Any = cfg
    for k in dotted.split("."):
        if not isinstance(node, dict) or k not in node:
            return default
        node = node[k]
    return node
