"""Which prime-rl config key each knob sets: one table per dialect (classic.KNOB_KEYS,
current.KNOB_KEYS), read by every place a knob reaches a config: the base config iter_0 trains
on, iter_0's flags over a canonical config, every arm's config, the eval of every arm (iter_0's
eval overlay, an arm's in-run eval, the current generation's final-weights eval) and the hosted
backend's configs. A new knob is one field of the run model (driver/run/model.py) and one entry
per dialect here; nothing else names its key.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from driver.run.model import Knobs


@dataclass(frozen=True)
class KnobKey:
    knob: str                                  # the Knobs field
    key: str                                   # the dotted config key it sets
    scope: Literal["train", "eval"] = "train"  # every training config, or every eval config
    unset: Literal["skip", "write"] = "write"  # a None (or, for a flag, False) value: left out
    iter0_flag: bool = True                    # iter_0 gets it as a flag over a canonical config

    def value(self, knobs: Knobs) -> Any:
        return getattr(knobs, self.knob)

    def applies(self, knobs: Knobs) -> bool:
        v = self.value(knobs)
        return not (self.unset == "skip" and (v is None or v is False))


def put(cfg: dict, dotted: str, value: Any) -> None:
    node = cfg
    *head, last = dotted.split(".")
    for k in head:
        node = node.setdefault(k, {})
    node[last] = value


def apply(cfg: dict, table: tuple[KnobKey, ...], knobs: Knobs, scope: str,
          prefix: str = "") -> dict:
    """`cfg` with every `scope` entry of `table` set from `knobs` (under `prefix`: an evals
    config holds the eval keys without their orchestrator. prefix). Returns cfg."""
    for entry in table:
        if entry.scope == scope and entry.applies(knobs):
            key = entry.key[len(prefix):] if prefix and entry.key.startswith(prefix) else entry.key
            put(cfg, key, entry.value(knobs))
    return cfg


def flags(table: tuple[KnobKey, ...], knobs: Knobs) -> list[str]:
    """iter_0's flags for the train knobs: a canonical config's value for a knob every arm's own
    config sets is overridden in iter_0 as in every later arm (one configuration for all)."""
    out: list[str] = []
    for entry in table:
        if entry.scope == "train" and entry.iter0_flag and entry.applies(knobs):
            v = entry.value(knobs)
            *head, last = entry.key.replace("_", "-").split(".")
            if v is False:   # prime-rl's negation sits on the last part: --a.b.no-c
                last = "no-" + last
            name = "--" + ".".join([*head, last])
            out += [name] if isinstance(v, bool) else [name, str(v)]
    return out
