"""Flags generated from the run model: every RunConfig field is one `driver run` flag, with the
field's help text, bounds and default (a backend-dependent default shown per backend). Parsing
turns text into values only; the run model checks them, so a bound or a rule across flags is
stated once (driver/run/model.py)."""
from __future__ import annotations

import argparse
import json
import re
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

EXIT_CODES = """exit codes:
  0  finished (or, for read commands, success)
  1  failure: the run stopped cleanly and can be resumed once the cause is fixed
  2  usage or bad input: nothing was started or changed
  3  waiting for the teacher: read iter_N/TEACHER.md, write the files, then `driver resume`"""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([hms]?)\s*$")
_UNITS = {"h": 3600, "m": 60, "s": 1, "": 1}


def parse_duration(text: str) -> float:
    m = _DURATION.match(str(text))
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: use Nh, Nm or Ns (e.g. 10h, 30m)")
    return float(m.group(1)) * _UNITS[m.group(2)]


def duration(seconds: float) -> str:
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size:g}{unit}"
    return f"{seconds:g}s"


def json_object(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"difficulty\": \"hard\"}'")
    return value


def plain_name(text: str) -> str:
    """Model names and hub ids: printable, one line. They are TOML-encoded, never pasted."""
    if not text or any(ord(c) < 32 or ord(c) == 127 for c in text) or len(text) > 300:
        raise argparse.ArgumentTypeError(
            f"{text!r}: must be one printable line (no newlines or control characters)")
    return text


def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


PARSERS = {"duration": parse_duration, "json": json_object, "name": plain_name}


def _extra(field: FieldInfo) -> dict:
    return dict(field.json_schema_extra) if isinstance(field.json_schema_extra, dict) else {}


def _base_type(annotation: Any) -> Any:
    """int for `int | None`, the Literal for a Literal, the model class for a nested model."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _base_type(args[0]) if len(args) == 1 else str
    return annotation


def flag_of(name: str, field: FieldInfo, prefix: str = "") -> str:
    return str(_extra(field).get("flag") or "") or f"--{prefix}{name.replace('_', '-')}"


def _show(value: Any, parse: str | None) -> str:
    if value is None:
        return "unset"
    return duration(value) if parse == "duration" else str(value)


def _default_text(field: FieldInfo) -> str:
    extra = _extra(field)
    if extra.get("by_backend") is not None:
        return "default by backend: " + ", ".join(
            f"{b}: {_show(v, extra.get('parse'))}" for b, v in extra["by_backend"].items())
    if field.default_factory is not None:
        return f"default: {json.dumps(field.get_default(call_default_factory=True))}"
    if field.default is None or field.default is False:
        return ""
    return f"default: {_show(field.default, extra.get('parse'))}"


def add_model_flags(p: argparse.ArgumentParser, model: type[BaseModel], *, prefix: str = "",
                    resumable_only: bool = False, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Add one flag per field of `model` (a nested model's fields get its flag as prefix, e.g.
    --llm-model); every flag defaults to None (not given). Returns {dotted field: flag}."""
    flags: dict[str, str] = {}
    for name, field in model.model_fields.items():
        extra = _extra(field)
        if name in skip or (resumable_only and not extra.get("resumable")):
            continue
        kind = _base_type(field.annotation)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            nested_prefix = (extra.get("flag") or f"--{name}-").removeprefix("--")
            for sub, flag in add_model_flags(p, kind, prefix=nested_prefix,
                                             resumable_only=resumable_only).items():
                flags[f"{name}.{sub}"] = flag
            continue
        flag = flag_of(name, field, prefix)
        flags[name] = flag
        shown = _default_text(field)
        help_text = (field.description or "") + (f" ({shown})" if shown else "")
        kwargs: dict[str, Any] = {"dest": f"{prefix.replace('-', '_')}{name}", "default": None,
                                  "help": help_text.replace("%", "%%")}
        if kind is bool:
            p.add_argument(flag, action="store_true", **kwargs)
            continue
        if typing.get_origin(kind) is typing.Literal:
            kwargs["choices"] = list(typing.get_args(kind))
        elif extra.get("parse"):
            kwargs["type"] = PARSERS[extra["parse"]]
            kwargs["metavar"] = {"duration": "DURATION", "json": "JSON"}.get(extra["parse"])
        elif kind in (int, float, str):
            kwargs["type"] = integer if kind is int else kind
        p.add_argument(flag, **kwargs)
    return flags


def given_values(args: argparse.Namespace, model: type[BaseModel], *, prefix: str = "") -> dict:
    """The fields the user gave (flags left at None are absent, so the model's defaults apply);
    a nested model's fields are gathered under its own name."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        kind = _base_type(field.annotation)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            nested_prefix = (_extra(field).get("flag") or f"--{name}-").removeprefix("--")
            sub = given_values(args, kind, prefix=nested_prefix)
            if sub:
                out[name] = sub
            continue
        value = getattr(args, f"{prefix.replace('-', '_')}{name}", None)
        if value is not None:
            out[name] = value
    return out
