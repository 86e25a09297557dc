"""A generated env pushed to the Environments Hub (`prime env push`), which is where a hosted run
installs its tasksets from."""
from __future__ import annotations

import hashlib
import os
import re
import tomllib
from pathlib import Path

from driver import faults
from driver.backends.hosted.cli import PrimeCLI, error_text
from driver.errors import DriverError
from driver.run.files import atomic_write_json, read_json


def dependency_problems(pkg_dir: Path) -> list[str]:
    """The pyproject dependencies a hosted run could not install from an index: git, URL and
    path pins (`name @ git+https://...`, a bare path or URL, [tool.uv.sources] pins)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        pyproject = tomllib.loads((Path(pkg_dir) / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        return [f"pyproject.toml unreadable: {e}"]
    problems = []
    for dep in (pyproject.get("project") or {}).get("dependencies") or []:
        try:
            req = Requirement(str(dep))
        except InvalidRequirement:
            problems.append(f"{dep!r} (not a requirement an index resolves)")
            continue
        if req.url:
            problems.append(f"{dep!r} (pinned to {req.url})")
    for name, src in ((pyproject.get("tool") or {}).get("uv") or {}).get("sources", {}).items():
        if isinstance(src, dict) and set(src) & {"git", "path", "url"}:
            problems.append(f"[tool.uv.sources] {name} = {src}")
    return problems


def content_hash(env_path: Path) -> str:
    """The CLI's content hash of an env directory (commands/env.py compute_content_hash, without
    its .gitignore matcher: generated packages have none): README.md, pyproject.toml, *.py and
    every file below the non-hidden, non-build subdirectories, by sorted relative path."""
    env_path = Path(env_path)
    skip_dirs = {"dist", "__pycache__", "build", "outputs"}
    files: dict[str, Path] = {}

    def add(p: Path) -> None:
        if p.is_file() and not p.is_symlink() and not p.name.startswith(".") \
                and "__pycache__" not in p.relative_to(env_path).parts:
            files[p.relative_to(env_path).as_posix()] = p

    for pattern in ("README.md", "pyproject.toml", "*.py"):
        for p in sorted(env_path.glob(pattern)):
            add(p)
    for sub in sorted(env_path.iterdir()):
        if not sub.is_dir() or sub.name.startswith(".") or sub.name in skip_dirs or sub.name.endswith(".egg-info"):
            continue
        for root, dirnames, filenames in os.walk(sub):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in skip_dirs
                                 and not d.endswith(".egg-info"))
            for f in sorted(filenames):
                add(Path(root) / f)
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(f"file:{rel}".encode())
        h.update(files[rel].read_bytes())
    return h.hexdigest()


def publish(cli: PrimeCLI, pkg_dir: Path) -> dict:
    """`prime env push -p PKG -v PRIVATE --runtime v1`: the generated taskset package as a
    private, versioned env. Idempotent: a package whose content was pushed (its record and the
    CLI's .prime/.env-metadata.json) is not pushed again, and a push the Hub answers with
    "content hash ... already exists" (the push went through before the driver died) counts as
    pushed."""
    problems = dependency_problems(pkg_dir)
    if problems:
        raise DriverError(
            f"refusing to push {pkg_dir.name}: a hosted run installs its envs with pip from the "
            f"Environments Hub, where only requirements an index resolves install; "
            f"{'; '.join(problems)}. Declare them as plain requirements (e.g. `tau2>=0.2`), then "
            "`driver resume`.")
    digest = content_hash(pkg_dir)
    record_path = pkg_dir / ".prime" / "driver_push.json"
    meta_path = pkg_dir / ".prime" / ".env-metadata.json"
    if record_path.exists() and read_json(record_path).get("content_hash") == digest:
        return dict(read_json(record_path))
    r = cli.run("env", "push", "-p", str(pkg_dir), "-v", "PRIVATE", "--runtime", "v1")
    faults.point("hosted:after-push")
    said = r.stdout + "\n" + r.stderr
    version = str(tomllib.loads((pkg_dir / "pyproject.toml").read_text())["project"]["version"])
    pushed = re.search(r"Successfully pushed (\S+/\S+)", said)
    if r.returncode == 0 and meta_path.exists():
        meta = read_json(meta_path)
        env_id, version = f"{meta['owner']}/{meta['name']}", str(meta.get("version") or version)
    elif r.returncode == 0 and pushed:
        env_id, meta = pushed.group(1), {}
    elif "content hash" in said.lower() and "already exists" in said:
        m = re.search(r"(?:Created environment|Found existing environment): (\S+/\S+)", said)
        if not m:
            raise DriverError(f"`prime env push` says {pkg_dir.name}'s content is on the Hub, but "
                              f"not under which id: {error_text(r)}")
        env_id, meta = m.group(1), {}
    else:
        raise DriverError(f"`prime env push -p {pkg_dir}` failed: {error_text(r)}. Fix the cause "
                          "(`prime whoami`, the package), then `driver resume`.")
    result = {"id": env_id, "version": version, "ref": f"{env_id}@{version}", "visibility": "PRIVATE",
              "content_hash": digest, "environment_id": meta.get("environment_id"),
              "wheel_sha256": meta.get("wheel_sha256")}
    atomic_write_json(record_path, result)
    return result
