"""The interface of a built-in family generator: what the built-in teacher reads from a family
(driver/teachers/builtin.py) and what control C draws its untargeted rows from.

Each family module (generators/stock_arithmetic.py, generators/model_router.py) exposes one
`FAMILY = Family(...)`; `generators.family_for(hub)` finds the hub env's. The required members
say how a train rollout maps to a problem and which buckets exist; the optional ones default to
a family without surface styles, surface features drawn at a rate, magnitudes or untargeted rows.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Bucket = tuple[str, str]            # (domain, sub_domain)


@dataclass(frozen=True)
class Family:
    # ---- required
    module: str
    """The family's module: the generator script imports `generate` from it."""
    buckets: Mapping[Bucket, Callable[[dict], bool]]
    """Each (domain, sub_domain) bucket as a constraint on a problem's structure."""
    feature_definitions: Mapping[str, str]
    """Every structural feature the family's rows can carry, with its definition."""
    structure_of: Callable[[dict], dict | None]
    """A train rollout's info -> the problem the buckets test (None: not one of this family's)."""
    skeleton: Callable[[str, dict], dict]
    """(source, a failed rollout's info) -> the skeleton `generate` paraphrases."""
    data_plan: str
    """The scratchpad's plan for the data, in words."""
    generate: Callable[..., list[dict]]
    """generate(weakness, skeletons, out=, seed=, prior=, [style=, surface=]) -> rows written."""
    # ---- optional
    styles: tuple[str, ...] = ()
    """Surface styles, the default first; () for a family with one unnamed style."""
    surface_shares: Mapping[str, float] = field(default_factory=dict)
    """The surface features drawn per row at a rate (the rest come from the problem), with
    their default rates: the teacher may turn one down where the probe never saw it solved."""
    magnitudes: Mapping[str, Callable[[dict], float]] = field(default_factory=dict)
    """Magnitudes of a problem along which the teacher looks for a failing range."""
    untargeted: Callable[..., list[dict]] | None = None
    """untargeted(count, out=, seed=, [style=, surface=]) -> control C's rows, drawn without
    aim; None: control C resamples the hub's train rows instead."""
    shares_in_style: Callable[[str | None, dict | None], dict] | None = None
    """(style, overrides) -> the surface shares rows of that style get; None: the defaults
    with the overrides."""
    features_in_style: Callable[[str | None, dict | None], dict] | None = None
    """(style, surface overrides) -> the feature definitions rows of that style can carry;
    None: all of feature_definitions."""

    def shares(self, style: str | None, surface: dict | None = None) -> dict[str, float]:
        """The surface shares rows of `style` get, with `surface` overriding the defaults."""
        if self.shares_in_style is not None:
            return self.shares_in_style(style, surface)
        return {**self.surface_shares, **(surface or {})}

    def features(self, style: str | None, surface: dict | None = None) -> dict[str, str]:
        """The structural features (name -> definition) rows of `style` and `surface` can carry."""
        if self.features_in_style is not None:
            return self.features_in_style(style, surface)
        return dict(self.feature_definitions)
