"""`driver run --backend prime_rl` against prime-rl's own launcher, orchestrator, env servers and
(current) `evals`, as a user on a GPU node would run it, with only the vLLM engine and the trainer
stood in (bin/inference, bin/torchrun).

What a user has, the tests have too: a prime-rl checkout with its environment in `.venv`
(tools/prime_rl_testenv.py's build), `uv` on PATH (bin/uv, which runs the checkout's commands as
`uv run --no-sync` would and hands every other uv call to the real uv), the hub env installed in
the checkout's environment, a model directory, and a canonical config for the env, complete as
prime-rl's own `configs/<env>/rl.toml` are. The canonical config holds what a CPU machine and a
shared test host need: a model prime-rl's renderer map does not know (so `renderer = default`),
the filesystem weight broadcast and rollout transport, pinned concurrency, and ports of the
run's own (prime-rl refuses a client port other than the server's, rl.py:163-173@559b447).

The stand-in answers StockArithmetic-v1 right about half the time (policies.stock_arithmetic), so
groups carry advantages and accuracies sit between 0 and 1.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BIN = HERE / "bin"
STOCK = ROOT / "environments" / "stock_arithmetic"
# the loop's sizes: iter_0 and two iterations (so a second iteration forks iter_0 too), steps of
# 16 prompts x 2, evals of 16 problems per split
ARGS = ["--max-iters", "3", "--steps-per-run", "2", "--batch-size", "32", "--rollouts-per-example", "2",
        "--eval-examples", "16", "--max-completion-tokens", "32", "--seed", "7",
        "--probe-prompts", "16"]
# the hub env's splits cut to 48 problems each: a control measures its arm on the whole eval and
# selection splits, and each episode of verifiers' null harness is a Python process of its own
ENV_ARGS = {"classic": {"num_eval_examples": 48}, "current": {"num_examples": 48}}
ARMS = ["iter_0", "iter_1", "iter_2", "run_a_best_from_iter0", "run_b_combined_from_base",
        "run_c_untargeted_from_iter0"]


@dataclass
class Setup:
    generation: str
    env_dir: Path
    checkout: Path
    python: Path
    version: str
    model: Path
    base_config: Path
    ports: dict
    request_log: Path


def free_port_block(width: int) -> int:
    """A port P with P .. P + width free (the server, the engine at P + 100, env servers)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + width >= 65000:
            continue
        ok = True
        for p in (base, base + 100, *range(base + 1, base + 9)):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block")


def install_hub_env(python: Path) -> None:
    """The hub env in the checkout's environment, as `uv pip install -e` would put it there."""
    probe = subprocess.run([str(python), "-c", "import stock_arithmetic; print(stock_arithmetic.__file__)"],
                           capture_output=True, text=True)
    # installed, and from this tree (an environment built by another clone points at that one)
    if probe.returncode != 0 or not probe.stdout.strip().startswith(str(STOCK)):
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(STOCK)],
                       check=True, capture_output=True, timeout=300)


def canonical_config(generation: str, model: Path, port: int) -> str:
    """The env's canonical rl.toml for a CPU host (module docstring): complete, as the driver
    asks of a --base-config."""
    url = f"http://127.0.0.1:{port}/v1"
    if generation == "classic":
        return f"""max_steps = 2
seq_len = 1024

[model]
name = "{model}"

[ckpt]

[trainer]

[orchestrator]
batch_size = 32
rollouts_per_example = 2

[orchestrator.student.client]
base_url = ["{url}"]

[orchestrator.renderer]
name = "default"

[orchestrator.train.sampling]
max_completion_tokens = 32

[[orchestrator.train.env]]
id = "stock_arithmetic"

[inference.server]
host = "127.0.0.1"
port = {port}
"""
    return f"""max_steps = 2
seq_len = 1024

[model]
name = "{model}"

[run]
name = "run"

[trainer]

[orchestrator]
batch_size = 32
group_size = 2
env_server_base_port = {port + 1}

[orchestrator.model.client]
base_url = "{url}"

[orchestrator.renderer]
name = "default"

[orchestrator.concurrency]
min_inflight = 8
initial_inflight = 8

[orchestrator.train.sampling]
max_completion_tokens = 32

[[orchestrator.train.source]]
name = "train"
env = {{ taskset = {{ id = "stock-arithmetic" }}, agent = {{ harness = {{ id = "null" }}, runtime = {{ type = "subprocess" }} }} }}

[weight_broadcast]
type = "filesystem"

[rollout_transport]
type = "filesystem"

[inference]
backend_port = {port + 100}

[inference.server]
host = "127.0.0.1"
port = {port}
"""


def args(generation: str) -> list[str]:
    """`driver run`'s flags for a whole loop on `generation` (ARGS, and the cut splits)."""
    return [*ARGS, "--env-args", json.dumps(ENV_ARGS[generation])]


def setup(tmp: Path, generation: str) -> Setup:
    import testenv

    env_dir = testenv.build(generation)
    ready = json.loads((env_dir / "READY.json").read_text())
    checkout = env_dir / "prime-rl"
    python = checkout / ".venv" / "bin" / "python"
    install_hub_env(python)
    model = tmp / "model"
    subprocess.run([str(python), str(HERE / "model_dir.py"), str(model)], check=True,
                   capture_output=True, timeout=120)
    port = free_port_block(10)
    base = tmp / "rl.toml"
    base.write_text(canonical_config(generation, model, port))
    return Setup(generation, env_dir, checkout, python, ready["prime_rl_version"], model, base,
                 {"server": port, "engine": port + 100}, tmp / "standin_requests.jsonl")


def shell(s: Setup, **extra) -> dict:
    """A GPU node's shell, as the user has it: the checkout named, `uv` on PATH, two GPUs
    visible, no W&B credentials."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DRIVER_", "DOUBLE_", "WANDB_", "PRL_", "CUDA_VISIBLE_DEVICES"))}
    env.update({
        "PATH": os.pathsep.join([str(BIN), env.get("PATH", "")]),
        "PRIME_RL_DIR": str(s.checkout),
        # an archive has no git tag to read the version from
        "DRIVER_PRIME_RL_VERSION": s.version,
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NETRC": str(s.base_config.parent / "no-netrc"),
        "DRIVER_POLL_INTERVAL": "0.5",
        "PYTHONUNBUFFERED": "1",
        # verifiers' null harness resolves its program's dependencies with uv: at the date of
        # the pinned commits (notes-cpu.md §2 #11: a later openai breaks it)
        "UV_EXCLUDE_NEWER": "2026-08-22T00:00:00Z",
        # the stand-ins' knobs (inference_standin.py): StockArithmetic answers, a request log
        "PYTHONPATH": str(HERE),
        "PRL_STANDIN_POLICY": "policies:stock_arithmetic",
        "PRL_STANDIN_LOG": str(s.request_log),
    })
    env.update(extra)
    return env


def requests(s: Setup) -> list[dict]:
    if not s.request_log.exists():
        return []
    return [json.loads(l) for l in s.request_log.read_text().splitlines() if l.strip()]


def remove_driver_installs(s: Setup) -> list[str]:
    """Remove the generated envs a run installed into the checkout's environment, as the suite
    does for its own venv (each run adds its own; many of them slow every later env-side job)."""
    from driver.envs import install

    site = subprocess.check_output([str(s.python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   text=True).strip()
    return install.remove_driver_installs(Path(site))


def loop(tmp: Path, generation: str, **shell_extra):
    """`driver run --backend prime_rl` from iter_0 to the controls on `generation`, in the test's
    process with every launch a process tree, as from the command line; the generated envs it
    installed into the checkout's environment removed after. (setup, run dir, result)."""
    from conftest import driver, run_dir_from

    s = setup(tmp, generation)
    try:
        r = driver(["run", "--backend", "prime_rl", "--model", str(s.model), "--base-config", str(s.base_config),
                    "--runs-dir", str(tmp / "runs"), *args(generation)], shell(s, **shell_extra), processes=True)
    finally:
        remove_driver_installs(s)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-4000:]
    return s, run_dir_from(r.stdout), r


def assert_every_arm_measured(run_dir: Path, generation: str, version: str) -> None:
    """run.json names the dialect and version and the run ended at its cap; metrics.json holds
    iter_0, two iterations and the three controls, each with scored eval and selection rows (an
    errored episode counted apart) and an accuracy inside (0, 1), as the stand-in's half-right
    answers make it."""
    state = json.loads((run_dir / "run.json").read_text())
    assert (state["dialect"], state["prime_rl_version"]) == (generation, version)
    assert state["status"] in ("completed", "max_iters_reached"), state["status"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert [m["iter"] for m in metrics["iters"]] == [0, 1, 2]
    assert [m["run"] for m in metrics["controls"]] == ["run_a", "run_b", "run_c"]
    for m in metrics["iters"] + metrics["controls"]:
        assert m["n_eval"] > 0 and m["n_errored"] < m["n_eval"] and 0.0 < m["eval_acc"] < 1.0, m
        assert m["n_selection"] > 0, m

