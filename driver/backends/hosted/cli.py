"""The `prime` CLI as the hosted backend calls it: one subprocess per command, JSON read from
its stdout, its version and login checked before anything is created."""
from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from typing import Any

from driver.errors import DriverError, UsageError

# `prime --version` prints exactly this (main.py); 0.15.0 brought PAUSED runs and --resume-from,
# 0.18.0 is the newest whose source was read
VERSION_LINE = re.compile(r"^Prime CLI version: (\S+)\s*$", re.M)
CLI_WINDOW = ("0.15.0", "0.19.0")       # first supported, first refused
SHARED_LORA_LAST = "0.13.0"             # before it, `prime train` took the typed shared-LoRA config
CLI_TIMEOUT_S = 600.0



class CLIError(DriverError):
    pass


@dataclass(frozen=True)
class PrimeCLI:
    exe: str

    def run(self, *args: str, timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """`prime --plain ARGS` (plain: unwrapped, markup-free lines), with the update check off."""
        env = {**os.environ, "PRIME_DISABLE_VERSION_CHECK": "1"}
        try:
            return subprocess.run([self.exe, "--plain", *args], capture_output=True, text=True,
                                  env=env, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            raise CLIError(f"`prime {' '.join(args)}` did not answer within {timeout:.0f}s") from None

    def json(self, *args: str, timeout: float = CLI_TIMEOUT_S) -> Any:
        r = self.run(*args, timeout=timeout)
        if r.returncode != 0:
            raise CLIError(f"`prime {' '.join(args)}` failed: {error_text(r)}")
        return parse_json(r.stdout)


def parse_json(stdout: str) -> Any:
    """The JSON a command printed: from the first line that is exactly `{` or `[` (warnings may
    precede it on stdout), else the whole output."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.strip() in ("{", "["):
            return json.loads("\n".join(lines[i:]))
    return json.loads(stdout)


def error_text(r: subprocess.CompletedProcess[str]) -> str:
    """What a failed command said: its `Error:` lines (stdout, or stderr for a few commands),
    else the end of its output."""
    lines = [ln.strip() for ln in (r.stdout + "\n" + r.stderr).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("Error", "Failed", "Transfer failed", "No such"))]
    return " ".join(errors or lines[-5:]) or f"exit {r.returncode}, no output"


def cli_version(cli: PrimeCLI) -> str:
    r = cli.run("--version", timeout=60)
    m = VERSION_LINE.search(r.stdout)
    if r.returncode != 0 or not m:
        raise UsageError(f"`prime --version` did not print its version ({error_text(r)}); the "
                         f"hosted backend needs prime {CLI_WINDOW[0]} .. 0.18.x on PATH.")
    return m.group(1)


def check_version(version: str) -> None:
    """Refuse a CLI outside the window whose commands and JSON this module was written from."""
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version)
    except InvalidVersion:
        raise UsageError(f"prime CLI version {version!r} is not a version") from None
    install = "Install a checked one: `uv tool install prime==0.18.0` (or pip install prime==0.18.0)."
    if v < Version(SHARED_LORA_LAST):
        raise UsageError(
            f"prime CLI {version} is older than {SHARED_LORA_LAST}: its `prime train` takes the "
            "retired shared-LoRA config (a top-level `model = \"...\"`, `[[env]]` tables, "
            "`checkpoint_id` warm starts), not the prime-rl TOML the driver renders. "
            f"Supported: {CLI_WINDOW[0]} .. 0.18.x. {install}")
    if v < Version(CLI_WINDOW[0]):
        raise UsageError(
            f"prime CLI {version} has no PAUSED runs and no `--resume-from` (both arrived in "
            f"{CLI_WINDOW[0]}), which the hosted backend uses to continue a paused arm. "
            f"Supported: {CLI_WINDOW[0]} .. 0.18.x. {install}")
    if v >= Version(CLI_WINDOW[1]):
        raise UsageError(
            f"prime CLI {version} is newer than any whose source the hosted backend was written "
            f"from (0.18.x): its commands or JSON may have changed. {install}")


def check_login(cli: PrimeCLI) -> None:
    """`prime whoami`: the cheapest call that proves the API key (PRIME_API_KEY, else
    ~/.prime/config.json's api_key) is there and valid."""
    r = cli.run("whoami", timeout=120)
    if r.returncode != 0:
        raise UsageError(f"not logged in to Prime Intellect (`prime whoami`: {error_text(r)}). "
                         "Run `prime login` (or `prime config set-api-key KEY`, or set "
                         "PRIME_API_KEY), then run again.")
