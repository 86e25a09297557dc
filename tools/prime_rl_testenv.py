#!/usr/bin/env python3
"""Build (once) the interpreter in which prime-rl's own code runs on a CPU, per generation.

    python tools/prime_rl_testenv.py [--generation current|classic|all] [--json] [--dry-run]

prime-rl's orchestrator, env servers, `rl` launcher and `evals` run on a CPU; its trainer and
its vLLM engine do not (tests/prime_rl_real/ stands in for those two). This script makes, for
each generation, a directory holding

    prime-rl/          prime-rl's tree at the generation's commit (from ../shared/prime-rl/'s
                       archive, or the checkout PRIME_RL_SRC_<GEN> names), unmodified
    prime-rl/.venv/    Python 3.11 with the CPU torch wheel, prime-rl and its pinned verifiers
                       installed editable (so every test imports prime-rl's modules from this
                       tree), their dependencies pinned from prime-rl's own uv.lock, and import
                       stubs for the three packages that cannot exist without CUDA
    verifiers/         the verifiers commit prime-rl pins
    READY.json         what it was built from; written last

under $PRIME_RL_TESTENV_DIR (default ~/.cache/synthetic-self-improve-rl/prime-rl-testenv/), in a
folder named by the generation and a hash of its inputs (the archives or checkout, this script,
the stub files): an unchanged input reuses the folder, a changed one builds a new one.

Where nothing names a checkout and the archives are absent, it says so and how to get one (a
`git clone` at the commit below: the same tree). Why each pin or stub is what it is: the notes
of the study this follows (shared/prime-rl/notes-cpu.md) and CONTRIBUTING.md.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "tests" / "prime_rl_real"
ARCHIVES = ROOT.parent / "shared" / "prime-rl"
CACHE_VAR = "PRIME_RL_TESTENV_DIR"
RECIPE = 1                     # bump when _build changes what it installs
TORCH = "torch==2.13.0"        # the CPU wheel on this disk; a bare torch pulls a CUDA build


@dataclass(frozen=True)
class Generation:
    name: str
    commit: str                 # prime-rl
    verifiers_commit: str
    version: str                # prime-rl's tag at that commit (an archive has no git to ask)
    verifiers_version: str      # what hatch-vcs is told (an archive has no tags)
    # not installable on a CPU from the package index: stubbed (import_stubs.py) or left out
    skip: frozenset[str]
    # what the lock cannot give from the package index, chosen as the study found
    extra: tuple[str, ...]
    extra_no_deps: tuple[str, ...] = ()
    # transitive dependencies of what is skipped (vllm brings them in the lock), pinned by the lock
    also: tuple[str, ...] = ("prometheus-client", "psutil")
    stubs: tuple[str, ...] = ("torchtitan", "ring_flash_attn")
    pth_modules: tuple[str, ...] = field(default=())


_NEVER = frozenset({
    "prime-rl", "prime-rl-configs", "verifiers", "renderers", "prime-pydantic-config",
    "torch", "torchvision", "torchaudio", "vllm", "torchtitan", "dion", "ring-flash-attn",
    "tilelang", "mooncake-transfer-engine", "modelexpress", "flash-linear-attention", "torchao",
    "transformers", "flash-attn", "flash-attn-3", "flash-attn-4", "liger-kernel",
})

GENERATIONS = {
    "current": Generation(
        name="current", commit="559b447", verifiers_commit="a60a606", version="0.8.1.dev67",
        verifiers_version="0.4.0.dev0", skip=_NEVER,
        extra=("transformers==5.6.2", "renderers==0.1.10", "prime-pydantic-config==0.4.3",
               "grpcio", "protobuf<7", "triton==3.6.0", "torchao==0.17.0",
               "flash-linear-attention==0.5.2", "fla-core==0.5.2", "nvidia-ml-py"),
        # its metadata requires nixl[cu12]; the orchestrator only imports it
        extra_no_deps=("modelexpress==0.3.0",),
        # uv: verifiers' null harness prepares each episode's program with `uv sync --script`
        # (verifiers/v1/runtimes/base.py:237-283@a60a606); tests/prime_rl_real/bin/uv hands it on
        also=("prometheus-client", "psutil", "uv"),
        stubs=("vllm", "torchtitan", "ring_flash_attn"),
        pth_modules=("prl_import_stubs",)),
    "classic": Generation(
        name="classic", commit="09e2977", verifiers_commit="58b119f", version="0.5.1.dev209",
        verifiers_version="0.3.1.dev0", skip=_NEVER,
        # the lock's transformers is a git rev (c1c3424) between these releases; renderers
        # 0.1.8 is the first release with OverlongPromptError (renderers_compat.py bridges its API)
        extra=("transformers==5.5.0", "renderers==0.1.8", "prime-pydantic-config==0.4.3",
               "triton==3.6.0", "flash-linear-attention==0.5.2", "fla-core==0.5.2",
               "nvidia-ml-py"),
        # vllm and torchvision bring these in the lock; the orchestrator imports them
        # (trajectories.py:11 PIL, transport/base.py:4 msgspec, ...)
        also=("prometheus-client", "psutil", "pillow", "msgspec", "pandas", "tomli-w", "beartype",
              "jaxtyping"),
        stubs=("torchtitan", "ring_flash_attn"),
        pth_modules=("prl_import_stubs", "prl_renderers_compat")),
}
STUB_FILES = {"prl_import_stubs": HERE / "import_stubs.py",
              "prl_renderers_compat": HERE / "renderers_compat.py"}


class BuildError(RuntimeError):
    pass


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_VAR) or
                Path.home() / ".cache" / "synthetic-self-improve-rl" / "prime-rl-testenv")


def source_var(gen: Generation) -> str:
    return f"PRIME_RL_SRC_{gen.name.upper()}"


def verifiers_var(gen: Generation) -> str:
    return f"PRIME_RL_VERIFIERS_SRC_{gen.name.upper()}"


def _archive(prefix: str, commit: str) -> Path:
    return ARCHIVES / f"{prefix}-{commit}.tar.gz"


def inputs(gen: Generation) -> dict[str, Path]:
    """Where prime-rl and verifiers come from: a checkout a setting names, else the archive."""
    found = {}
    for what, var, prefix, commit in (("prime-rl", source_var(gen), "prime-rl", gen.commit),
                                      ("verifiers", verifiers_var(gen), "verifiers", gen.verifiers_commit)):
        given = os.environ.get(var)
        if given:
            p = Path(given).expanduser().resolve()
            if not (p / "pyproject.toml").is_file():
                raise BuildError(f"{var}={given} is not a {what} checkout (no pyproject.toml)")
            found[what] = p
        elif _archive(prefix, commit).is_file():
            found[what] = _archive(prefix, commit)
        else:
            raise BuildError(
                f"no {what} source for the {gen.name} generation: {_archive(prefix, commit)} is absent "
                f"and {var} is unset. Clone it (git clone https://github.com/PrimeIntellect-ai/{what} "
                f"&& git -C {what} checkout {commit}) and set {var} to the checkout.")
    return found


def _hash_tree(h: "hashlib._Hash", root: Path) -> None:
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root)
        if any(part in (".git", ".venv", "__pycache__") for part in rel.parts) or not p.is_file():
            continue
        h.update(str(rel).encode())
        h.update(hashlib.sha256(p.read_bytes()).digest())


def input_key(gen: Generation, src: dict[str, Path]) -> str:
    h = hashlib.sha256()
    for what in ("prime-rl", "verifiers"):
        p = src[what]
        h.update(what.encode())
        if p.is_file():
            h.update(hashlib.sha256(p.read_bytes()).digest())
        else:
            _hash_tree(h, p)
    # what decides the install: the generation's pins and stubs, the recipe's version, the stub files
    # (frozensets sorted: their repr's order changes with each interpreter's string hash seed)
    canon = tuple((f.name, sorted(v) if isinstance(v, frozenset) else v)
                  for f in fields(gen) for v in [getattr(gen, f.name)])
    h.update(repr((canon, TORCH, RECIPE)).encode())
    for m in gen.pth_modules:
        h.update(STUB_FILES[m].read_bytes())
    h.update(sys.version.split()[0].encode())
    return h.hexdigest()[:12]


def env_dir(gen: Generation, key: str) -> Path:
    return cache_root() / f"{gen.name}-{key}"


def ready(path: Path) -> dict | None:
    try:
        return json.loads((path / "READY.json").read_text())
    except (OSError, ValueError):
        return None


def _unpack(src: Path, dest: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__"))
        return
    with tarfile.open(src) as tar:
        top = tar.getnames()[0].split("/")[0]
        tar.extractall(dest.parent / ".unpack", filter="data")
    (dest.parent / ".unpack" / top).rename(dest)
    shutil.rmtree(dest.parent / ".unpack", ignore_errors=True)


def lock_constraints(lock: Path, leave_out: set[str]) -> list[str]:
    """Every package index pin of prime-rl's uv.lock, less torch, triton, CUDA wheels and what
    the generation installs otherwise."""
    pins = {}
    for p in tomllib.loads(lock.read_text())["package"]:
        name = p["name"].lower()
        if "registry" not in p.get("source", {}) or name in leave_out or name.startswith("nvidia-"):
            continue
        if name in ("torch", "triton", "pytorch-triton"):
            continue
        pins.setdefault(name, p["version"])
    return [f"{n}=={v}" for n, v in sorted(pins.items())]


def _requirement_names(pyproject: Path) -> list[str]:
    from packaging.requirements import Requirement   # pip vendors packaging; so does the venv

    deps = tomllib.loads(pyproject.read_text())["project"].get("dependencies", [])
    out = []
    for d in deps:
        r = Requirement(d)
        if r.marker is not None and not r.marker.evaluate({"python_version": "3.11"} | {}):
            continue
        out.append(r.name.lower())
    return out


def _run(cmd: list[str], log: Path, env: dict | None = None, cwd: Path | None = None) -> None:
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    if r.returncode != 0:
        tail = "\n".join(log.read_text().splitlines()[-25:])
        raise BuildError(f"`{' '.join(cmd[:6])} ...` exited {r.returncode}; the last lines of {log}:\n{tail}")


def build(gen: Generation, *, say=print) -> Path:
    """The generation's env, built first if its inputs changed; one builder at a time (a
    second waits on the lock, then finds it ready)."""
    import fcntl

    src = inputs(gen)
    key = input_key(gen, src)
    dest = env_dir(gen, key)
    if ready(dest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.with_name(dest.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready(dest):
            return dest
        _build(gen, src, key, dest, say)
    return dest


def _build(gen: Generation, src: dict[str, Path], key: str, dest: Path, say) -> None:
    shutil.rmtree(dest, ignore_errors=True)     # an unfinished build (no READY.json) starts over
    dest.mkdir(parents=True)
    log = dest / "build.log"
    t0 = time.monotonic()
    say(f"[{gen.name}] building prime-rl {gen.commit}'s CPU test environment in {dest} "
        f"(once: about 5 minutes and 1 GB of downloads; log {log})")
    _unpack(src["prime-rl"], dest / "prime-rl")
    _unpack(src["verifiers"], dest / "verifiers")
    repo = dest / "prime-rl"
    venv = repo / ".venv"
    _run([sys.executable, "-m", "venv", str(venv)], log)
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    _run(pip + [TORCH], log)
    explicit = {e.split("==")[0].split("<")[0].split(">")[0].lower() for e in gen.extra + gen.extra_no_deps}
    constraints = dest / "constraints.txt"
    constraints.write_text("\n".join(lock_constraints(repo / "uv.lock", explicit)) + "\n")
    names = []
    for pyproject in (repo / "pyproject.toml", repo / "packages" / "prime-rl-configs" / "pyproject.toml",
                      dest / "verifiers" / "pyproject.toml"):
        names += [n for n in _requirement_names(pyproject) if n not in gen.skip and n not in explicit]
    say(f"[{gen.name}] installing {len(set(names))} dependencies pinned from uv.lock")
    _run(pip + ["-c", str(constraints), *sorted(set(names) | set(gen.also)), *gen.extra], log)
    if gen.extra_no_deps:
        _run(pip + ["--no-deps", *gen.extra_no_deps], log)
    env = dict(os.environ, SETUPTOOLS_SCM_PRETEND_VERSION=gen.verifiers_version)
    _run(pip + ["--no-deps", "-e", str(dest / "verifiers")], log, env=env)
    _run(pip + ["--no-deps", "--ignore-requires-python", "-e", str(repo / "packages" / "prime-rl-configs")], log)
    _run(pip + ["--no-deps", "--ignore-requires-python", "-e", str(repo)], log)
    site = Path(subprocess.check_output([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                        text=True).strip())
    for module in gen.pth_modules:
        shutil.copyfile(STUB_FILES[module], site / f"{module}.py")
    # the stubs answer only for these names, and only where the real package is absent
    (site / "prl_test_env.pth").write_text(
        f"import os; os.environ.setdefault('PRL_STUBS', {','.join(gen.stubs)!r}); "
        + "; ".join(f"import {m}" for m in gen.pth_modules) + "\n")
    # classic's env server lives in the orchestrator package (its pyproject's `env-server` script)
    env_server = ("prime_rl.orchestrator.env_server.env_server" if gen.name == "classic"
                  else "prime_rl.entrypoints.env_server")
    _run([py, "-c", "import prime_rl.orchestrator.orchestrator, prime_rl.entrypoints.rl, "
          f"{env_server}, prime_rl.trainer.model"
          + (", prime_rl.entrypoints.evals" if gen.name == "current" else "")], log)
    record = {"generation": gen.name, "prime_rl_commit": gen.commit, "prime_rl_version": gen.version,
              "verifiers_commit": gen.verifiers_commit, "key": key,
              "sources": {k: str(v) for k, v in src.items()},
              "checkout": str(repo), "python": py,
              "build_seconds": round(time.monotonic() - t0, 1)}
    tmp = dest / "READY.json.tmp"
    tmp.write_text(json.dumps(record, indent=2))
    tmp.replace(dest / "READY.json")
    say(f"[{gen.name}] ready in {record['build_seconds']:.0f} s: {dest}")


def prune(gen: Generation, keep: Path, say=print) -> None:
    """Remove the generation's environments built from older inputs (2-3 GB each), except one
    another builder holds the lock of. Only the command does this, never a test's build(): a
    test may be running in an older one."""
    import fcntl

    for old in cache_root().glob(f"{gen.name}-*"):
        if old == keep or not old.is_dir():
            continue
        lock_path = old.with_name(old.name + ".lock")
        with open(lock_path, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue          # being built right now
            shutil.rmtree(old, ignore_errors=True)
        lock_path.unlink(missing_ok=True)
        say(f"[{gen.name}] removed {old} (built from older inputs)")


def locate(name: str) -> tuple[Path | None, str]:
    """The built env for a generation, or (None, why not) without building anything."""
    gen = GENERATIONS[name]
    try:
        src = inputs(gen)
    except BuildError as e:
        return None, str(e)
    dest = env_dir(gen, input_key(gen, src))
    if ready(dest):
        return dest, "ready"
    return None, f"not built: run `python tools/prime_rl_testenv.py --generation {name}` (it builds {dest})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=(
        f"Settings: PRIME_RL_SRC_CURRENT / PRIME_RL_SRC_CLASSIC (a prime-rl checkout instead of the "
        f"archive), PRIME_RL_VERIFIERS_SRC_CURRENT / _CLASSIC (its verifiers), {CACHE_VAR} (where "
        "the environments live)."), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--generation", choices=["current", "classic", "all"], default="all")
    ap.add_argument("--dry-run", action="store_true", help="say where each env is (or would be) and build nothing")
    ap.add_argument("--keep-old", action="store_true",
                    help="keep the environments built from older inputs (by default they are removed)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout: generation -> env dir")
    a = ap.parse_args(argv)
    names = ["current", "classic"] if a.generation == "all" else [a.generation]
    out, rc = {}, 0
    for n in names:
        try:
            if a.dry_run:
                path, why = locate(n)
                out[n] = {"path": str(path) if path else None, "state": why}
            else:
                say = (lambda m: print(m, file=sys.stderr)) if a.json else print
                path = build(GENERATIONS[n], say=say)
                if not a.keep_old:
                    prune(GENERATIONS[n], keep=path, say=say)
                out[n] = {"path": str(path), "state": "ready"}
        except BuildError as e:
            print(f"prime_rl_testenv: {e}", file=sys.stderr)
            out[n], rc = {"path": None, "state": str(e)}, 1
    if a.json:
        print(json.dumps(out))
    elif a.dry_run:
        for n, v in out.items():
            print(f"{n}: {v['path'] or v['state']}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
