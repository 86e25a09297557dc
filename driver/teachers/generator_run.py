"""Running a teacher's gen_dataset.py: its own directory as cwd, a time and a memory limit, no
secrets in its environment, output captured, and an in-process guard that stops it from
writing outside its directory, opening network connections or starting other programs.

The guard (generator_guard.py, run by path) is a Python audit hook installed before the script
runs. It is a seat belt against mistakes (a generator that writes into another iteration, or
fetches data), not a security boundary against hostile code.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import psutil

from driver import faults
from driver.backends import process
from driver.run.files import file_sha256
from driver.run.arm_files import ArmFiles

TIMEOUT_S = 600
MEMORY_BYTES = 4 * 1024 ** 3
_SECRET_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")

GUARD = Path(__file__).with_name("generator_guard.py")   # run by path: the audit hook, then the script


def scrubbed_env(home: Path) -> dict:
    """No API keys or tokens; caches and temp files inside the generator's directory."""
    env = {k: v for k, v in os.environ.items()
           if not any(h in k.upper() for h in _SECRET_HINTS) and not k.startswith("DRIVER_FAULT")}
    home.mkdir(parents=True, exist_ok=True)
    env.update({"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": str(home),
                "XDG_CACHE_HOME": str(home / "cache"), "HF_HOME": str(home / "hf"),
                "TMPDIR": str(home / "tmp"), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"})
    (home / "tmp").mkdir(exist_ok=True)
    return env


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def _crash_site(log_text: str) -> str:
    """The innermost frame of the script itself: the template that crashed."""
    site = ""
    for line in log_text.splitlines():
        s = line.strip()
        if s.startswith('File "') and ArmFiles.GENERATOR in s and ", in " in s:
            site = s.split(", in ", 1)[1]
    return site


def _stop_leftover(pid_file: Path) -> None:
    """A driver killed while its generator ran leaves the generator running; stop it (matched
    by pid and create time, so a recycled pid is never touched) before starting a new one."""
    try:
        rec = json.loads(pid_file.read_text())
        leftover = SimpleNamespace(pid=int(rec["pid"]), create_time=float(rec["create_time"]),
                                   started_since_boot=rec.get("started_since_boot"))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        leftover = None
    if leftover is not None:
        process.stop(leftover, grace_s=0)   # the trainer's own pid + create-time match
    pid_file.unlink(missing_ok=True)


def run(iter_dir: Path, timeout: float = TIMEOUT_S) -> dict:
    """Run gen_dataset.py. Only the script writes dataset.jsonl: a stale one is removed first,
    and the hashes of both the script and the dataset are recorded."""
    script = iter_dir / ArmFiles.GENERATOR
    out = iter_dir / ArmFiles.DATASET
    pid_file = iter_dir / "gen_dataset.pid"
    _stop_leftover(pid_file)
    if out.exists():
        out.unlink()
    log = iter_dir / ArmFiles.GENERATOR_LOG
    with open(log, "w") as f:
        proc = subprocess.Popen([sys.executable, str(GUARD), script.name], cwd=iter_dir, stdout=f,
                                stderr=subprocess.STDOUT, env=scrubbed_env(iter_dir / ".generator_home"),
                                # _limit_memory only calls setrlimit: it takes no lock a thread
                                # of the driver could hold
                                preexec_fn=_limit_memory,  # noqa: PLW1509
                                stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            ct, since_boot = process.process_start(psutil.Process(proc.pid))
            pid_file.write_text(json.dumps({"pid": proc.pid, "create_time": ct,
                                            "started_since_boot": since_boot}))
        except psutil.Error:
            pass   # it already ended: nothing to stop later
        faults.point("generator:running")
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pid_file.unlink(missing_ok=True)
            return {"ok": False, "reason": f"generator timed out after {timeout:.0f}s and was stopped"}
    pid_file.unlink(missing_ok=True)
    text = log.read_text(errors="replace")
    tail = "\n".join(text.splitlines()[-15:])
    if returncode != 0:
        site = _crash_site(text)
        where = f" in {site}" if site else ""
        return {"ok": False, "reason": f"generator crashed{where} (exit {returncode}):\n{tail}"}
    if not out.exists():
        return {"ok": False, "reason": "generator finished without writing dataset.jsonl"}
    return {"ok": True, "script_sha256": file_sha256(script),
            "dataset_sha256": file_sha256(out)}
