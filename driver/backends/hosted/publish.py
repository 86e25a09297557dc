"""A generated env pushed to the Environments Hub (`prime env push`), which is where a hosted run
installs its tasksets from."""
from __future__ import annotations

import hashlib
import os
import re
import tomllib
from pathlib import Path

from driver import faults
from driver.backends.hosted.cli import CLIError, PrimeCLI, error_text
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
    CLI's .prime/.env-metadata.json) is not pushed again. A push the Hub answers with "content
    hash ... already exists" counts as pushed only where `prime env status` lists that content
    as the env's latest version: a push that failed after its wheel was registered but before
    its finalize holds the hash without a version anyone can install, so it is pushed again as a
    .post release of the same content (the CLI's own `--post`)."""
    problems = dependency_problems(pkg_dir)
    if problems:
        raise DriverError(
            f"refusing to push {pkg_dir.name}: a hosted run installs its envs with pip from the "
            f"Environments Hub, where only requirements an index resolves install; "
            f"{'; '.join(problems)}. Declare them as plain requirements (e.g. `tau2>=0.2`), then "
            "`driver resume`.")
    digest = content_hash(pkg_dir)
    record_path = pkg_dir / ".prime" / "driver_push.json"
    if record_path.exists() and digest in (read_json(record_path).get("content_hash"),
                                           read_json(record_path).get("rendered_hash")):
        return dict(read_json(record_path))
    pushed = _push(cli, pkg_dir)
    for bump in ("--post", None):
        if pushed is not None:
            break
        # "already exists": the Hub lists this content as the env's latest version, or a push
        # registered it and never finalized (then it is pushed again as a .post release, which
        # the CLI writes into pyproject.toml)
        env_id = _existing_id(cli, pkg_dir)
        if _listed(cli, env_id, content_hash(pkg_dir)):
            version = str(tomllib.loads((pkg_dir / "pyproject.toml").read_text())["project"]["version"])
            pushed = (env_id, version, {})
        elif bump:
            pushed = _push(cli, pkg_dir, bump)
    if pushed is None:
        raise DriverError(f"`prime env push --post -p {pkg_dir}` was refused as a duplicate too, and "
                          f"`prime env status` lists neither version; check it there, then `driver resume`.")
    env_id, version, meta = pushed
    result = {"id": env_id, "version": version, "ref": f"{env_id}@{version}", "visibility": "PRIVATE",
              "content_hash": content_hash(pkg_dir), "rendered_hash": digest,
              "environment_id": meta.get("environment_id"), "wheel_sha256": meta.get("wheel_sha256")}
    atomic_write_json(record_path, result)
    return result


_ALREADY = "already exists"


def _push(cli: PrimeCLI, pkg_dir: Path, *bump: str) -> tuple[str, str, dict] | None:
    """One `prime env push`: (env id, version, the CLI's metadata) once it went through, None
    where the Hub holds that content already."""
    meta_path = pkg_dir / ".prime" / ".env-metadata.json"
    meta_path.unlink(missing_ok=True)   # written by this push alone, or not at all
    r = cli.run("env", "push", "-p", str(pkg_dir), "-v", "PRIVATE", "--runtime", "v1", *bump)
    faults.point("hosted:after-push")
    said = r.stdout + "\n" + r.stderr
    version = str(tomllib.loads((pkg_dir / "pyproject.toml").read_text())["project"]["version"])
    ok = re.search(r"Successfully pushed (\S+/\S+)", said)
    if r.returncode == 0 and meta_path.exists():
        meta = read_json(meta_path)
        return f"{meta['owner']}/{meta['name']}", str(meta.get("version") or version), meta
    if r.returncode == 0 and ok:
        return ok.group(1), version, {}
    if "content hash" in said.lower() and _ALREADY in said:
        m = re.search(r"(?:Created environment|Found existing environment): (\S+/\S+)", said)
        if m:
            (pkg_dir / ".prime").mkdir(exist_ok=True)
            (pkg_dir / ".prime" / "hub_id").write_text(m.group(1))
        return None
    raise DriverError(f"`prime env push -p {pkg_dir}` failed: {error_text(r)}. Fix the cause "
                      "(`prime whoami`, the package), then `driver resume`.")


def _existing_id(cli: PrimeCLI, pkg_dir: Path) -> str:
    """The Hub id an "already exists" answer named (commands/env.py prints it on resolving)."""
    found = pkg_dir / ".prime" / "hub_id"
    if not found.exists():
        raise DriverError(f"`prime env push` says {pkg_dir.name}'s content is on the Hub, but not "
                          "under which id; check `prime env list`, then `driver resume`.")
    return found.read_text().strip()


def _listed(cli: PrimeCLI, env_id: str, digest: str) -> bool:
    """Whether `prime env status ID --output json` lists this content as the env's latest
    version (`latest_version.content_hash`, commands/env.py:689-740@0.18.0)."""
    try:
        latest = (cli.json("env", "status", env_id, "--output", "json", timeout=120) or {}).get("latest_version")
    except (CLIError, ValueError, AttributeError):
        return False
    return isinstance(latest, dict) and latest.get("content_hash") == digest
