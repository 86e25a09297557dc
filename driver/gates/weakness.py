"""weakness.json: the machine-readable twin of weakness_report.md, validated field by field.

The dataset gate reads its domains, buckets and structural features; a malformed report is
sent back to the teacher with every bad field named, before any generator runs.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from driver.gates.rules import MAX_ROWS, MIN_BUCKET_SHARE, MIN_ROWS
from driver.run.arm_files import ArmFiles


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")   # teachers may add their own numbers


class SubDomain(_Open):
    name: str = Field(min_length=1, max_length=80)


class Domain(_Open):
    name: str = Field(min_length=1, max_length=60)
    severity: Literal["high", "med", "low"]
    evidence: str = Field(min_length=1)
    sub_domains: list[SubDomain] = Field(min_length=2, max_length=5)

    @field_validator("name")
    @classmethod
    def _short_label(cls, v: str) -> str:
        if len(v.split()) > 6:
            raise ValueError("a domain label is a few words (at most 6)")
        return v


class Feature(_Open):
    name: str = Field(min_length=1)
    definition: str = Field(min_length=1)


class WeaknessSpec(_Open):
    prev_eval_acc: float | None = Field(ge=0, le=1)
    reward_by_length_quartile: list[float | None] = Field(min_length=4, max_length=4)
    domains: list[Domain] = Field(min_length=3, max_length=6)
    allocations: dict[str, int]
    structural_features: list[Feature] = Field(min_length=4, max_length=6)

    @model_validator(mode="after")
    def _buckets(self):
        buckets = {f"{d.name} / {s.name}" for d in self.domains for s in d.sub_domains}
        unknown = sorted(set(self.allocations) - buckets)
        if unknown:
            raise ValueError(f"allocations name buckets not in domains: {', '.join(unknown[:5])}")
        total = sum(self.allocations.values())
        if not MIN_ROWS <= total <= MAX_ROWS:
            raise ValueError(f"allocations sum to {total}, not within [{MIN_ROWS}, {MAX_ROWS}]")
        small = sorted(k for k, v in self.allocations.items() if v < MIN_BUCKET_SHARE * total)
        if small:
            raise ValueError(f"allocations below 3% of {total}: {', '.join(small[:5])}")
        names = [f.name for f in self.structural_features]
        if len(set(names)) != len(names):
            raise ValueError("structural_features names repeat")
        return self


def problems(data: object) -> list[str]:
    """Every bad field, named by its path (empty when the report is valid)."""
    if isinstance(data, str):   # from load(): the file was not JSON
        return [data]
    try:
        WeaknessSpec.model_validate(data)
        return []
    except ValidationError as e:
        out = []
        for err in e.errors():
            where = ".".join(str(p) for p in err["loc"]) or ArmFiles.WEAKNESS
            out.append(f"{where}: {err['msg'].removeprefix('Value error, ')}")
        return out


def load(path) -> object:
    """weakness.json's content, or a string saying why it is not JSON (the gate's first line
    then names it; a teacher gets it back instead of the driver stopping)."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return f"weakness.json is not JSON ({e})"
