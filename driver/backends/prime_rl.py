"""prime-rl on the user's GPUs: `uv run rl @ rl.toml ...` inside a prime-rl checkout.

DRIVER_RL_COMMAND replaces the `rl` command (a wrapper script, or the test suite's trainer
double); it then runs in the current directory with the driver's interpreter loading
environments. Either way the dialect follows the checkout's version (or DRIVER_PRIME_RL_VERSION);
a stand-in with neither speaks the classic dialect.
"""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from driver.backends.base import Command, Probe
from driver.backends.process import ProcessRunner
from driver.dialects import VERSION_VAR
from driver.errors import UsageError

RL_COMMAND_VAR = "DRIVER_RL_COMMAND"
EVALS_COMMAND_VAR = "DRIVER_EVALS_COMMAND"   # stands in for the final-weights eval, beside it
PROBE_COMMAND_VAR = "DRIVER_PROBE_COMMAND"
CHECKOUT_VAR = "PRIME_RL_DIR"


def checkout_dir(given: str | None) -> Path | None:
    """The prime-rl checkout: --prime-rl-dir, else $PRIME_RL_DIR (the one place either is read)."""
    root = given or os.environ.get(CHECKOUT_VAR)
    return Path(root).expanduser().resolve() if root else None


def probe_override(cwd: str | None = None) -> Probe | None:
    cmd = os.environ.get(PROBE_COMMAND_VAR)
    return Probe("command", tuple(shlex.split(cmd)), cwd=cwd) if cmd else None


@dataclass(frozen=True)
class PrimeRL:
    """The prime_rl backend (a checkout, or a stand-in for its `rl`)."""
    rl: Command
    python: str
    dialect: str = "classic"
    prime_rl_version: str | None = None
    version_source: str | None = None
    stand_in: str | None = None
    evaluator: Command | None = None
    probe_command: Probe | None = None
    name: str = "prime_rl"

    def trainer(self) -> Command:
        return self.rl

    def final_evaluator(self) -> Command | None:
        return self.evaluator

    def runner(self) -> ProcessRunner:
        return ProcessRunner()

    def probe(self) -> Probe | None:
        # prime-rl samples through its vLLM server, which runs inside `rl`: the probe is a
        # one-step `rl` launch from iter_0's checkpoint, unless DRIVER_PROBE_COMMAND names
        # another sampler
        return self.probe_command or Probe("launch")

    def seed_args(self, seed: int) -> list[str]:
        return []

    def ports(self, cfg: dict) -> list[int]:
        """The inference server's ports (rl_contract/launch.py): an `rl` launch's from its
        [inference] table; the final-weights eval's server at its client's port."""
        from urllib.parse import urlparse

        from rl_contract import launch

        if "orchestrator" in cfg or "trainer" in cfg:
            return launch.server_ports(cfg, self.dialect)
        client = (cfg.get("eval") or {}).get("client") or {}
        urls = [client.get("base_url", "http://localhost:8000/v1"), *(client.get("admin_base_url") or [])]
        ports = [urlparse(str(u)).port or launch.DEFAULT_SERVER_PORT for u in urls]
        return list(dict.fromkeys(ports))

    def eval_draw_seeds(self, per_source_eval_sampling: bool) -> str | None:
        # prime-rl's EvalSamplingConfig has no seed (configs/orchestrator.py:74-94@559b447)
        return "none: the inference server samples them unseeded" if per_source_eval_sampling else None

    def describe(self) -> str:
        return " ".join(self.rl.argv) + (f" (in {self.rl.cwd})" if self.rl.cwd else "")


def build(prime_rl_dir: str | None) -> PrimeRL:
    override = os.environ.get(RL_COMMAND_VAR)
    root = checkout_dir(prime_rl_dir)
    if root is not None and not (root / "pyproject.toml").exists():
        raise UsageError(f"{root} is not a prime-rl checkout (no pyproject.toml)")
    if override:
        if root is None and not os.environ.get(VERSION_VAR):
            version, source, dialect = None, "stand-in without a checkout", "classic"
        else:
            dialect, version, source = detect_dialect(root)
        evals = os.environ.get(EVALS_COMMAND_VAR)
        if dialect == "current" and not evals:
            raise UsageError(
                f"prime-rl {version} is the current generation, whose `rl` never evaluates its final "
                f"weights; with {RL_COMMAND_VAR} standing in for `rl`, set {EVALS_COMMAND_VAR} to what "
                "stands in for the final-weights eval (called as CMD [--inference-config FILE] @ "
                "evals.toml --output-dir DIR, FILE the arm's R/configs/inference.json; "
                "`python -m rl_contract.final_eval --prime-rl-dir DIR` is the real one).")
        return PrimeRL(Command(tuple(shlex.split(override))), sys.executable, dialect=dialect,
                       prime_rl_version=version, version_source=source, stand_in=override,
                       evaluator=Command(tuple(shlex.split(evals))) if dialect == "current" and evals else None,
                       probe_command=probe_override())
    if root is None:
        raise UsageError(
            f"the prime_rl backend needs a prime-rl checkout: pass --prime-rl-dir DIR or set "
            f"{CHECKOUT_VAR} (see prime-rl's README for installing it with uv).")
    dialect, version, source = detect_dialect(root)
    uv = shutil.which("uv")
    if not uv:
        raise UsageError("uv is not on PATH; prime-rl runs as `uv run rl`. Install uv first.")
    venv_python = root / ".venv" / "bin" / "python"
    if not venv_python.exists():
        raise UsageError(f"{venv_python} is missing: run `uv sync` in {root} first")
    evaluator = (Command((sys.executable, "-m", "rl_contract.final_eval", "--prime-rl-dir", str(root)))
                 if dialect == "current" else None)
    return PrimeRL(Command((uv, "run", "rl"), str(root)), str(venv_python), dialect=dialect,
                   prime_rl_version=version, version_source=source, evaluator=evaluator,
                   probe_command=probe_override(str(root)))


def prime_rl_version(root: Path | None) -> tuple[str | None, str]:
    """(version, where it came from): DRIVER_PRIME_RL_VERSION, else the checkout's nearest git
    tag, else its pyproject version."""
    import subprocess
    import tomllib

    if os.environ.get(VERSION_VAR):
        return os.environ[VERSION_VAR].strip().lstrip("v"), f"${VERSION_VAR}"
    if root is None:
        return None, "nothing"
    try:  # only the checkout's own repository: never a parent repo's tags
        if not (root / ".git").exists():
            raise OSError("not a git checkout")
        r = subprocess.run(["git", "-C", str(root), "describe", "--tags", "--abbrev=0"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip().lstrip("v"), "git tag"
    except (OSError, subprocess.TimeoutExpired):
        pass
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text()).get("project", {})
        if isinstance(project.get("version"), str):
            return project["version"], "pyproject.toml"
    except (OSError, tomllib.TOMLDecodeError):
        pass
    return None, "nothing"


def detect_dialect(root: Path | None) -> tuple[str, str, str]:
    """(dialect, version, source) for a checkout, or a UsageError naming what to do."""
    from driver import dialects

    version, source = prime_rl_version(root)
    if version is None:
        windows = "; ".join(f"{n}: v{a} .. v{b}" for n, (a, b) in dialects.WINDOWS.items())
        raise UsageError(
            f"cannot tell which prime-rl {root} is (no git tag, no version in pyproject.toml). "
            f"The driver speaks these config schemas: {windows}. If you know the checkout's "
            f"version, set {VERSION_VAR}=<version> and run again.")
    return dialects.for_version(version, source), version, source


def canonical_config(prime_rl_dir: str | None, dataset: str) -> str | None:
    """The prime-rl checkout's canonical rl.toml for the env (the procedure's iter_0 config),
    if any: configs/<env>/rl.toml in classic checkouts, configs/basic/<env>/rl.toml at the
    current generation's HEAD."""
    root = checkout_dir(prime_rl_dir)
    if root is None:
        return None
    name = dataset.split("/")[-1]
    for d in dict.fromkeys([name, name.replace("-", "_"), name.replace("_", "-")]):
        for p in (root / "configs" / d / "rl.toml", root / "configs" / "basic" / d / "rl.toml"):
            if p.is_file():
                return str(p.resolve())
    return None


def canonical_candidates(prime_rl_dir: str | None) -> list[Path]:
    """Every canonical rl.toml of the checkout (configs/*/rl.toml, configs/basic/*/rl.toml)."""
    root = checkout_dir(prime_rl_dir)
    if root is None:
        return []
    return sorted({p.resolve() for pattern in ("configs/*/rl.toml", "configs/basic/*/rl.toml")
                   for p in root.glob(pattern) if p.is_file()})


def _model_of(path: Path) -> str | None:
    import tomllib

    try:
        name = (tomllib.loads(path.read_text()).get("model") or {}).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return name if isinstance(name, str) else None


def _size(model: str | None) -> str | None:
    import re

    m = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)B(?![a-z])", model or "")
    return m.group(1) if m else None


def closest_canonical(candidates: list[Path], model: str) -> tuple[list[Path], str]:
    """The canonical configs closest to a run of `model` on an env that has none of its own:
    those that train the same model, else a model of the same size (Qwen3-0.6B and an SFT of
    it); the list is empty where none does, and the reason says which rule picked them."""
    models = {c: _model_of(c) for c in candidates}
    same = [c for c in candidates if models[c] == model]
    if same:
        return same, f"it trains {model} too"
    size = _size(model)
    sized = [c for c in candidates if size and _size(models[c]) == size]
    return sized, (f"it trains a {size}B model, as {model} is" if sized else "")


def describe_candidates(candidates: list[Path]) -> str:
    return "; ".join(f"{c} ({_model_of(c) or 'no [model] name'})" for c in candidates)
