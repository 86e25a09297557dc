"""Everything that differs between library generations sits behind one small interface.

The rest of the driver asks `get(run.json's dialect)` for one and never branches on versions.
WINDOWS is the one place that says which prime-rl versions each dialect speaks; the backend
picks the dialect from the checkout's version with `for_version` before a run directory exists.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from driver.errors import UsageError

if TYPE_CHECKING:
    from driver.dialects.base import Dialect

# prime-rl versions (PEP 440, from the checkout's git tag) each dialect's configs and layout
# are written for. classic: [[orchestrator.train.env]] arrived in v0.5.1.dev55 and dev226 renamed
# rollouts_per_example to group_size. current: [resume]/[run] arrived in v0.8.1.dev26, v1
# tasksets only from dev8, and from dev57 the only loadable weights are broadcasts/step_N (no
# weights/ dir), which is the layout this dialect reads; dev67 is the newest release checked.
WINDOWS: dict[str, tuple[str, str]] = {
    "classic": ("0.5.1.dev55", "0.5.1.dev225"),
    "current": ("0.8.1.dev57", "0.8.1.dev67"),
}
# the tag each window was verified on (what a refusal suggests checking out)
VERIFIED = {"classic": "0.5.1.dev209", "current": "0.8.1.dev67"}
# pyproject.toml says 0.8.0 from v0.8.0 through at least v0.8.1.dev67: no dialect can be told
# from it, only from the tag
AMBIGUOUS_PYPROJECT = {"0.8.0"}
VERSION_VAR = "DRIVER_PRIME_RL_VERSION"


def _window_text(name: str) -> str:
    first, last = WINDOWS[name]
    return f"{name}: v{first} .. v{last}"


def for_version(version: str, source: str) -> str:
    """The dialect that speaks prime-rl `version` (read from `source`), or a UsageError that
    names the nearest supported tags and what to do."""
    from packaging.version import InvalidVersion, Version

    windows = "; ".join(_window_text(n) for n in WINDOWS)
    if source == "pyproject.toml" and version in AMBIGUOUS_PYPROJECT:
        raise UsageError(
            f"prime-rl's pyproject.toml says {version}, which it says from v0.8.0 through "
            f"v0.8.1.dev67, so the config schema cannot be told from it (supported: {windows}). "
            f"Fetch the checkout's tags (`git fetch --tags`) or set {VERSION_VAR} to its "
            "`git describe --tags` version.")
    try:
        v = Version(version)
    except InvalidVersion:
        raise UsageError(f"prime-rl version {version!r} (from {source}) is not a version; set "
                         f"{VERSION_VAR} to the checkout's `git describe --tags` version") from None
    for name, (first, last) in WINDOWS.items():
        if Version(first) <= v <= Version(last):
            return name
    ordered = sorted(WINDOWS.items(), key=lambda kv: Version(kv[1][0]))
    older = [(n, last) for n, (_, last) in ordered if Version(last) < v]
    newer = [(n, first) for n, (first, _) in ordered if Version(first) > v]
    near = ([older[-1]] if older else []) + ([newer[0]] if newer else [])
    why = ("its configs use [[orchestrator.env]] and [orchestrator.sampling]" if not older else
           "its config schema is between the two generations (group_size with "
           "[[orchestrator.train.env]], or tasksets with [ckpt] resume_step and a weights/ dir)"
           if newer else "it is newer than any checked release; its schema may have moved on")
    checkouts = " or ".join(f"`git checkout v{VERIFIED[n]} && uv sync` ({n})" for n, _ in near)
    raise UsageError(
        f"prime-rl {version} (from {source}) is outside every supported window ({windows}): "
        f"{why}, so the rendered configs would fail after the GPUs are allocated. Nearest "
        f"supported tags: {', '.join(f'v{t} ({n})' for n, t in near)}. Check out one "
        f"({checkouts}), or use --backend local. If you have checked this version's schema "
        f"yourself, set {VERSION_VAR} to a version inside a window.")


def get(name: str) -> "Dialect":
    """The dialect a run speaks (run.json's `dialect`): the one registry of this seam."""
    from driver.dialects.classic import ClassicDialect
    from driver.dialects.current import CurrentDialect

    # typed with the protocol: the type checker holds both implementations to it
    dialects: dict[str, type[Dialect]] = {"classic": ClassicDialect, "current": CurrentDialect}
    try:
        return dialects[name]()
    except KeyError:
        raise ValueError(f"unknown dialect {name!r}; known: {', '.join(dialects)}") from None
