"""One run of classic prime-rl's REAL `rl` launcher (09e2977) on a CPU, for the tests.

    res = run_rl(tmp, max_steps=2, eval_interval=1, ckpt_interval=None)

writes `tmp/rl.toml`, then runs, with cwd = the classic test env's checkout (its prime-rl/ folder,
holding .venv), `uv run rl @ rl.toml --output-dir OUT [--ckpt.resume-step -1] [extra_args]`, where
`uv`, `inference` and `torchrun` resolve to the shims in tests/prime_rl_real/bin (first on PATH):
prime-rl's own launcher, orchestrator and env server run; only vLLM (inference_standin.py) and the
trainer (trainer_standin_classic.py) are stood in for. The launcher starts its children by bare
name (src/prime_rl/entrypoints/rl.py:162 `inference`, :239 `orchestrator`, :275-289 `torchrun`@09e2977),
so PATH is the seam.

Config (what the study's notes §7.5 found a classic CPU run needs):
  [model] name           a tiny offline tokenizer dir (model_dir.py); a local path skips the hub
  [inference.server]     a free port; the orchestrator's client points at it
                         ([orchestrator.student.client] base_url, a list)
  [orchestrator.renderer] name = "default" (the tiny tokenizer is in no renderer map)
  [[orchestrator.train.env]] / [[orchestrator.eval.env]] id = "prl_cpu_env_legacy"
                         (fixtures_classic/, on PYTHONPATH), num_workers = 1
  [ckpt]                 always present (trainer checkpoints under OUT/checkpoints); interval when given
  no [wandb]; WANDB_MODE=disabled anyway. CUDA_VISIBLE_DEVICES=0,1 passes the launcher's
  two-GPU check (src/prime_rl/entrypoints/rl.py:39@09e2977 reads it before asking NVML).

On timeout the whole process group is killed (the launcher runs in its own session).
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = HERE / "bin"
FIXTURES = HERE / "fixtures_classic"
ROOT = HERE.parents[1]


def classic_env(say=print) -> Path:
    """The built classic env dir (built first if needed: minutes)."""
    import testenv

    return testenv.build("classic", say=say)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass
class Result:
    returncode: int
    out: Path
    log: str
    step_dirs: list[int]
    toml: Path
    port: int
    seconds: float
    timed_out: bool = False
    session_left: list = field(default_factory=list)
    env: dict = field(default_factory=dict, repr=False)

    def logs_text(self) -> str:
        """The launcher's stdout plus every log file the run wrote under OUT/logs."""
        parts = [self.log]
        for p in sorted((self.out / "logs").rglob("*.log")) if (self.out / "logs").is_dir() else []:
            try:
                parts.append(f"\n===== {p} =====\n" + p.read_text(errors="replace"))
            except OSError:
                pass
        return "".join(parts)


def rollout_steps(out: Path) -> list[int]:
    d = Path(out) / "run_default" / "rollouts"
    return sorted(int(p.name.split("_")[1]) for p in d.glob("step_*") if re.fullmatch(r"step_\d+", p.name)) \
        if d.is_dir() else []


def _toml_value(v) -> str:
    return json.dumps(v)


def write_config(path: Path, *, model: Path, port: int, max_steps: int, eval_interval: int | None,
                 ckpt_interval: int | None, batch_size: int = 8, rollouts_per_example: int = 2,
                 eval_num_examples: int = 4, eval_rollouts_per_example: int = 1, env_args: dict | None = None,
                 eval_env_args: dict | None = None) -> Path:
    lines = [
        f"max_steps = {max_steps}",
        "seq_len = 512",
        "",
        "[model]",
        f"name = {_toml_value(str(model))}",
        "",
        "[ckpt]",
    ]
    if ckpt_interval:
        lines.append(f"interval = {ckpt_interval}")
    lines += [
        "",
        "[trainer]",          # required by RLConfig; the stand-in reads only the shared fields
        "",
        "[orchestrator]",
        f"batch_size = {batch_size}",
        f"rollouts_per_example = {rollouts_per_example}",
        "",
        "[orchestrator.student.client]",
        f"base_url = [{_toml_value(f'http://127.0.0.1:{port}/v1')}]",
        "",
        "[orchestrator.renderer]",
        'name = "default"',
        "",
        "[orchestrator.train.sampling]",
        "max_completion_tokens = 16",
        "",
        "[[orchestrator.train.env]]",
        'id = "prl_cpu_env_legacy"',
        "num_workers = 1",
    ]
    if env_args:
        lines.append(f"args = {_inline(env_args)}")
    if eval_interval:
        lines += [
            "",
            "[orchestrator.eval]",
            f"interval = {eval_interval}",
            f"num_examples = {eval_num_examples}",
            f"rollouts_per_example = {eval_rollouts_per_example}",
            "",
            "[orchestrator.eval.sampling]",
            "max_completion_tokens = 16",
            "",
            "[[orchestrator.eval.env]]",
            'id = "prl_cpu_env_legacy"',
            "num_workers = 1",
        ]
        if eval_env_args or env_args:
            lines.append(f"args = {_inline(eval_env_args or env_args)}")
    lines += ["", "[inference.server]", 'host = "127.0.0.1"', f"port = {port}", ""]
    path.write_text("\n".join(lines))
    return path


def _inline(d: dict) -> str:
    return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in d.items()) + " }"


def _kill_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def shell(checkout: Path, tmp: Path, policy: str = "mixed", env_extra: dict | None = None) -> dict:
    """The environment a launch in `checkout` runs under: the shims first on PATH, two GPUs
    visible, W&B off, the fixtures importable, the stand-in's policy and request log."""
    venv = checkout / ".venv"
    path = os.pathsep.join([str(BIN), str(venv / "bin"), os.environ.get("PATH", "/usr/bin:/bin")])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PRL_", "PYTEST_", "WANDB_"))}
    env.pop("PYTHONHOME", None)
    env.update({
        "PATH": path, "VIRTUAL_ENV": str(venv), "CUDA_VISIBLE_DEVICES": "0,1", "WANDB_MODE": "disabled",
        "PYTHONPATH": os.pathsep.join([str(FIXTURES), str(HERE)]),
        "PRL_STANDIN_POLICY": policy, "PRL_STANDIN_LOG": str(Path(tmp) / "standin_requests.jsonl"),
        "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
    })
    env.update(env_extra or {})
    return env


def run_rl(tmp: Path, *, max_steps: int, eval_interval: int | None = None, ckpt_interval: int | None = None,
           resume: bool = False, policy: str = "mixed", extra_args=(), timeout: float = 300,
           out: Path | None = None, port: int | None = None, env_extra: dict | None = None,
           config_kwargs: dict | None = None, env_dir: Path | None = None) -> Result:
    """Run the real classic launcher once. `out` defaults to tmp/out (reuse it with resume=True)."""
    sys.path.insert(0, str(HERE))
    from model_dir import make_model_dir

    tmp = Path(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    env_dir = Path(env_dir) if env_dir else classic_env()
    checkout = env_dir / "prime-rl"
    model = make_model_dir(tmp / "model")
    out = Path(out) if out else tmp / "out"
    port = port or free_port()
    toml = write_config(tmp / ("rl_resume.toml" if resume else "rl.toml"), model=model, port=port,
                        max_steps=max_steps, eval_interval=eval_interval, ckpt_interval=ckpt_interval,
                        **(config_kwargs or {}))
    args = [str(BIN / "uv"), "run", "rl", "@", str(toml), "--output-dir", str(out)]
    if resume:
        args += ["--ckpt.resume-step", "-1"]
    args += list(extra_args)
    env = shell(checkout, tmp, policy, env_extra)
    log_path = tmp / ("rl_resume.log" if resume else "rl.log")
    t0 = time.monotonic()
    timed_out = False
    with open(log_path, "w") as logf:
        proc = subprocess.Popen(args, cwd=checkout, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            rc = proc.returncode
        # what of the launcher's session outlived it (recorded for the tests, then killed)
        left = session_members(proc.pid)
        if left:
            _kill_group(proc, grace=2.0)
    return Result(returncode=rc, out=out, log=log_path.read_text(errors="replace"), step_dirs=rollout_steps(out),
                  toml=toml, port=port, seconds=round(time.monotonic() - t0, 1), timed_out=timed_out, env=env,
                  session_left=left)


def session_members(sid: int, settle: float = 5.0) -> list[str]:
    """Live processes still in session `sid` (the launcher's: it was started with
    start_new_session), after up to `settle` seconds for ones already exiting. Zombies (exited,
    not yet reaped by whoever inherited them) are not counted: they hold no port or file."""
    import psutil

    deadline = time.monotonic() + settle
    while True:
        found = []
        for p in psutil.process_iter(["pid", "cmdline", "status"]):
            try:
                if p.info["status"] == psutil.STATUS_ZOMBIE or os.getsid(p.info["pid"]) != sid:
                    continue
            except (ProcessLookupError, PermissionError, OSError):
                continue
            found.append(f"{p.info['pid']}: {' '.join(p.info['cmdline'] or [])[:200]}")
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.5)


def survivors(*needles: str) -> list[str]:
    """Processes (of any session) whose command line mentions one of `needles`."""
    import psutil

    me = os.getpid()
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "status"]):
        if p.info["pid"] == me or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cmd = " ".join(p.info["cmdline"] or [])
        if any(n and n in cmd for n in needles):
            found.append(f"{p.info['pid']}: {cmd[:200]}")
    return found


if __name__ == "__main__":
    import tempfile

    t = Path(tempfile.mkdtemp(prefix="prl_classic_"))
    r = run_rl(t, max_steps=int(sys.argv[1]) if len(sys.argv) > 1 else 2, eval_interval=1)
    print(r.returncode, r.seconds, r.out, r.step_dirs)
    print(r.log[-3000:])
