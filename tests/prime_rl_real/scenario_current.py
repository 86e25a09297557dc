"""Run prime-rl's REAL `rl` launcher (and `evals`), current generation 559b447, on a CPU.

Only the GPU pieces are stood in: `inference` (bin/inference -> inference_standin.py) and the
trainer (bin/torchrun -> trainer_standin_current.py), by putting tests/prime_rl_real/bin first on
PATH: the launcher starts its children by bare name (src/prime_rl/entrypoints/rl.py:195,254,284,
321@559b447). Everything else (launcher, env servers, orchestrator, verifiers) is prime-rl's and
verifiers' own code from the test env that tools/prime_rl_testenv.py builds.

    env = testenv()                       # builds once if missing
    res = run_rl(tmp, max_steps=3, eval_interval=2, ckpt_interval=2)
    res.rc, res.run_dir, res.steps, res.log

Config deltas from prime-rl's defaults (see notes-cpu.md §7.5 for why each is needed):
  model.name = a tiny offline tokenizer dir (model_dir.py)
  [orchestrator.renderer] name = "default"       ("auto" is rejected for an unknown model)
  weight_broadcast / rollout_transport = filesystem (the launcher's defaults with [inference] are
      NCCL and ZMQ, packages/prime-rl-configs/src/prime_rl/configs/rl.py:449-460,501@559b447)
  orchestrator.model.client.base_url = the run's own server port: a policy-sourced run keeps the
      ClientConfig default http://localhost:8000/v1 (configs/rl.py:801-817, shared.py:160), and the launcher
      refuses a port mismatch (entrypoints/rl.py:163-173)
  distinct free ports per run: inference server, backend (engine/admin) port, env servers
  [orchestrator.concurrency] min_inflight = initial_inflight = 4 (no load signal otherwise)
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BIN = HERE / "bin"
FIXTURES = HERE / "fixtures_current"
RUN_NAME = "run"
TRAIN_ENV = "prl-cpu-env"
EVAL_ENV = "prl-cpu-eval"
TRAINER_LOG = "standin_trainer.jsonl"


@dataclass
class TestEnv:
    dir: Path
    checkout: Path
    python: Path


_ENV: TestEnv | None = None


def testenv() -> TestEnv:
    """The current generation's test env (tools/prime_rl_testenv.py's build(): builds if missing)."""
    global _ENV
    if _ENV is None:
        import testenv as builder

        d = builder.build("current")
        _ENV = TestEnv(dir=d, checkout=d / "prime-rl", python=d / "prime-rl" / ".venv" / "bin" / "python")
    return _ENV


def model_dir() -> Path:
    """The tiny offline model dir (made once per test env, with its python: it needs `tokenizers`)."""
    env = testenv()
    path = env.dir / "prl-test-model"
    if not (path / "config.json").exists():
        subprocess.run([str(env.python), str(HERE / "model_dir.py"), str(path)], check=True,
                       capture_output=True, timeout=120)
    return path


def free_ports(n: int, consecutive: int = 1) -> list[int]:
    """n free TCP ports (bound to port 0 together, then released); the last comes with
    `consecutive - 1` free neighbours above it (the env servers' base + index)."""
    for _ in range(50):
        socks, ports = [], []
        try:
            for _ in range(n):
                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                socks.append(s)
                ports.append(s.getsockname()[1])
            base = ports[-1]
            ok = True
            for k in range(1, consecutive):
                s = socket.socket()
                try:
                    s.bind(("127.0.0.1", base + k))
                except OSError:
                    ok = False
                socks.append(s)
            if ok and base + consecutive < 65535:
                return ports
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free ports")


def port_free(port: int) -> bool:
    """Nothing listens on `port`: a server can bind it again (SO_REUSEADDR, as uvicorn and zmq
    set; a closed port's TIME_WAIT connections do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@dataclass
class Result:
    rc: int | None
    out: Path
    run_dir: Path
    log: str
    steps: list[int]                  # rollouts/step_N directories, sorted
    ports: dict[str, int]
    wall_s: float
    timed_out: bool = False
    standin_log: Path | None = None   # the inference stand-in's JSONL request log
    extra: dict = field(default_factory=dict)

    def trainer_records(self) -> list[dict]:
        p = self.out / RUN_NAME / TRAINER_LOG
        if not p.exists():
            return []
        return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]

    def steps_with(self, kind: str, subset: str = "all") -> list[int]:
        return [s for s in self.steps
                if (self.run_dir / "rollouts" / f"step_{s}" / kind / subset / "traces.jsonl").exists()]


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return json.dumps(str(v))


def rl_toml(out: Path, *, max_steps: int, ports: dict[str, int], eval_interval: int | None,
            ckpt_interval: int | None, batch_size: int = 8, group_size: int = 2) -> str:
    model = model_dir()
    lines = [
        f"output_dir = {_toml(out)}",
        f"max_steps = {max_steps}",
        "seq_len = 512",
        "[run]", f"name = {_toml(RUN_NAME)}",
        "[model]", f"name = {_toml(model)}",
        "[weight_broadcast]", 'type = "filesystem"',
        "[rollout_transport]", 'type = "filesystem"',
        "[deployment]", "num_train_gpus = 1", "num_infer_gpus = 1",
        "[trainer]",                      # required (RLConfig.trainer has no default)
    ]
    if ckpt_interval is not None:
        lines += ["[ckpt]", f"interval = {ckpt_interval}"]
    lines += [
        "[inference]", f"backend_port = {ports['backend']}",
        "[inference.server]", 'host = "127.0.0.1"', f"port = {ports['server']}",
        "[orchestrator]", f"batch_size = {batch_size}", f"group_size = {group_size}",
        f"env_server_base_port = {ports['env_base']}",
        "[orchestrator.model.client]", "base_url = " + _toml("http://127.0.0.1:%d/v1" % ports["server"]),
        "[orchestrator.renderer]", 'name = "default"',
        "[orchestrator.concurrency]", "min_inflight = 4", "initial_inflight = 4",
        "[orchestrator.train.sampling]", "max_completion_tokens = 16",
        "[[orchestrator.train.source]]", f"name = {_toml(TRAIN_ENV)}",
        "[orchestrator.train.source.env.taskset]", f"id = {_toml(TRAIN_ENV)}",
        "[orchestrator.train.source.env.agent.harness]", 'id = "prl-cpu-harness"',
        "[orchestrator.train.source.env.agent.runtime]", 'type = "subprocess"',
    ]
    if eval_interval is not None:
        lines += [
            "[orchestrator.eval]", f"interval = {eval_interval}", "num_examples = 4",
            "[[orchestrator.eval.source]]", f"name = {_toml(EVAL_ENV)}",
            "[orchestrator.eval.source.env.taskset]", f"id = {_toml(TRAIN_ENV)}",
            "[orchestrator.eval.source.env.agent.harness]", 'id = "prl-cpu-harness"',
            "[orchestrator.eval.source.env.agent.runtime]", 'type = "subprocess"',
        ]
    return "\n".join(lines) + "\n"


def _env(policy: str, router: str, log: Path, extra_env: dict | None) -> dict:
    env = testenv()
    e = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH")}
    e.update({
        "VIRTUAL_ENV": str(env.checkout / ".venv"),
        "PATH": os.pathsep.join([str(BIN), str(env.checkout / ".venv" / "bin"), e.get("PATH", "")]),
        "PYTHONPATH": str(FIXTURES),
        "CUDA_VISIBLE_DEVICES": "0,1",      # get_physical_gpu_ids reads it first (utils/process.py:36@559b447)
        "WANDB_MODE": "disabled",
        "UV_EXCLUDE_NEWER": "2026-08-22T00:00:00Z",   # notes §2 #11 (only matters for uv-script harnesses)
        "PRL_STANDIN_POLICY": policy,
        "PRL_STANDIN_ROUTER": router,
        "PRL_STANDIN_LOG": str(log),
        "PYTHONUNBUFFERED": "1",
    })
    e.update(extra_env or {})
    return e


def _run(cmd: list[str], *, cwd: Path, env: dict, log_path: Path, timeout: float) -> tuple[int | None, bool, float]:
    """Run `cmd` in its own session; on timeout TERM then KILL its whole process group."""
    t0 = time.monotonic()
    with open(log_path, "wb") as logf:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=logf, stderr=subprocess.STDOUT,
                             start_new_session=True)
        timed_out = False
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            rc = None
        # whatever the outcome, nothing of this run may survive it
        for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
            if _group_empty(p.pid):
                break
        if rc is None:
            rc = p.poll()
    return rc, timed_out, time.monotonic() - t0


def _group_empty(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return False
    except ProcessLookupError:
        return True
    except PermissionError:
        return False


def _steps(rollouts: Path) -> list[int]:
    if not rollouts.is_dir():
        return []
    return sorted(int(p.name[5:]) for p in rollouts.iterdir() if p.name.startswith("step_") and p.name[5:].isdigit())


def run_rl(tmp: Path, *, max_steps: int, eval_interval: int | None = None, ckpt_interval: int | None = None,
           resume: bool = False, policy: str = "mixed", router: str = "forward", extra_args=(),
           timeout: float = 300, extra_env: dict | None = None, out: Path | None = None) -> Result:
    """`uv run rl @ rl.toml --output-dir OUT [--resume] [extra_args]` in the test env's checkout.
    `out` defaults to tmp/out; pass an earlier run's out (with resume=True) to resume it."""
    env = testenv()
    tmp = Path(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    out = Path(out) if out is not None else tmp / "out"
    server, backend, env_base = free_ports(3, consecutive=2)
    ports = {"server": server, "backend": backend, "env_base": env_base, "env_eval": env_base + 1}
    tag = f"rl-{int(time.time() * 1000) % 10**8}"
    cfg = tmp / f"{tag}.toml"
    cfg.write_text(rl_toml(out, max_steps=max_steps, ports=ports, eval_interval=eval_interval,
                           ckpt_interval=ckpt_interval))
    standin_log = tmp / f"{tag}.standin.jsonl"
    log_path = tmp / f"{tag}.log"
    cmd = [str(BIN / "uv"), "run", "rl", "@", str(cfg), "--output-dir", str(out)]
    if resume:
        cmd.append("--resume")
    cmd += list(extra_args)
    rc, timed_out, wall = _run(cmd, cwd=env.checkout, env=_env(policy, router, standin_log, extra_env),
                               log_path=log_path, timeout=timeout)
    run_dir = out / RUN_NAME
    return Result(rc=rc, out=out, run_dir=run_dir, log=log_path.read_text(errors="replace"),
                  steps=_steps(run_dir / "rollouts"), ports=ports, wall_s=wall, timed_out=timed_out,
                  standin_log=standin_log, extra={"config": cfg, "cmd": cmd})


def run_evals(tmp: Path, *, metrics: bool = True, pin_concurrency: bool = False, num_examples: int = 4,
              policy: str = "mixed", timeout: float = 240, extra_args=()) -> Result:
    """prime-rl's standalone `evals` against a stand-in server this helper starts itself
    (`inference --vllm.model M --server.port P`, through the PATH shim), `metrics=False` runs the
    stand-in without /metrics. The stand-in is stopped (its group killed) afterwards."""
    env = testenv()
    tmp = Path(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    out = tmp / "evals_out"
    server, env_base = free_ports(2)
    ports = {"server": server, "env_base": env_base}
    standin_log = tmp / "evals.standin.jsonl"
    e = _env(policy, "forward", standin_log, {"PRL_STANDIN_METRICS": "1" if metrics else "0"})
    srv_log = open(tmp / "evals.server.log", "wb")
    srv = subprocess.Popen([str(BIN / "uv"), "run", "inference", "--vllm.model", str(model_dir()),
                            "--server.port", str(server), "--router", "null"],
                           cwd=env.checkout, env=e, stdout=srv_log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_health(server, 60)
        # EvalsConfig: model is a plain name, client/ports/concurrency live under [eval]
        # (packages/prime-rl-configs/src/prime_rl/configs/evals.py:12-30,64-95@559b447)
        lines = [
            f"output_dir = {_toml(out)}",
            f"model = {_toml(model_dir())}",
            "[eval]", f"num_examples = {num_examples}", f"env_server_base_port = {env_base}",
            "[eval.client]", "base_url = " + _toml("http://127.0.0.1:%d/v1" % server),
            "[[eval.source]]", f"name = {_toml(EVAL_ENV)}",
            "[eval.source.env.taskset]", f"id = {_toml(TRAIN_ENV)}",
            "[eval.source.env.agent.harness]", 'id = "prl-cpu-harness"',
            "[eval.source.env.agent.runtime]", 'type = "subprocess"',
        ]
        if pin_concurrency:
            lines += ["[eval.concurrency]", "min_inflight = 4", "max_inflight = 4"]   # evals.py:166-176
        cfg = tmp / "evals.toml"
        cfg.write_text("\n".join(lines) + "\n")
        log_path = tmp / "evals.log"
        cmd = [str(BIN / "uv"), "run", "evals", "@", str(cfg), *extra_args]
        rc, timed_out, wall = _run(cmd, cwd=env.checkout, env=e, log_path=log_path, timeout=timeout)
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(srv.pid, sig)
                srv.wait(timeout=10)
                break
            except (ProcessLookupError, subprocess.TimeoutExpired):
                continue
        srv_log.close()
    return Result(rc=rc, out=out, run_dir=out, log=log_path.read_text(errors="replace"),
                  steps=_steps(out / "rollouts"), ports=ports, wall_s=wall, timed_out=timed_out,
                  standin_log=standin_log, extra={"config": cfg, "cmd": cmd})


def _wait_health(port: int, timeout: float) -> None:
    import urllib.request
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"inference stand-in on port {port} not healthy after {timeout} s")
