"""prime-rl's `rl` launcher at run time, both generations (classic 09e2977, current 559b447): the
processes it starts and how it stops them, the GPUs it asks for, the ports its inference server
takes, and when W&B needs credentials. The driver plans its launches and stops with these facts,
and the test double behaves by them; each is read off the lines SOURCES names.

The process tree of one `uv run rl` launch (entrypoints/rl.py): the launcher under uv; plain
Popen children in its process group (inference with its engine, one env server per source, the
orchestrator, `torchrun`, a `tail -F` of the orchestrator log); and torchrun's trainer ranks,
each started in a session of its own, outside the group. On SIGTERM the launcher joins each of
its monitor threads for up to 5 s, then for each child SIGTERMs the child's whole psutil tree
(across sessions) and waits up to 60 s before SIGKILLing that tree.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SOURCES: dict[str, str] = {
    "children are plain Popen in the launcher's group; torchrun runs the trainer":
        "src/prime_rl/entrypoints/rl.py:200,260,288,320-345,371@559b447; "
        "src/prime_rl/entrypoints/rl.py:167,246,276,294,324@09e2977",
    "torchrun starts each trainer rank in a new session":
        "pytorch torch/distributed/elastic/multiprocessing/subprocess_handler/subprocess_handler.py "
        "(_popen: start_new_session=True; close: os.killpg on the rank's own group)",
    "on SIGTERM the launcher joins monitor threads 5 s each, then TERMs each child's tree and "
    "waits 60 s before KILL":
        "src/prime_rl/entrypoints/rl.py:184-190@559b447 (:151-157@09e2977); "
        "src/prime_rl/utils/process.py:58-93@559b447 (:27-62@09e2977)",
    "orphaned python/torchrun/vllm processes can outlive termination":
        "src/prime_rl/templates/multi_node_rl.sbatch.j2:166-169@559b447; PR #2158",
    "the launcher needs num_infer_gpus (with [inference]) + num_train_gpus (+ teacher) GPUs":
        "src/prime_rl/entrypoints/rl.py:130-143@559b447 (:92-109@09e2977); "
        "packages/prime-rl-configs/src/prime_rl/configs/rl.py:180,183@559b447 (:137,140,143@09e2977)",
    "visible GPUs: CUDA_VISIBLE_DEVICES, else NVML's device count":
        "src/prime_rl/utils/process.py:36-43@559b447; src/prime_rl/entrypoints/rl.py:37-43@09e2977",
    "the inference server listens on server.port (8000); current's router fronts an engine on "
    "backend_port (8100)":
        "packages/prime-rl-configs/src/prime_rl/configs/inference.py:16-20,443@559b447 "
        "(:15-19@09e2977); src/prime_rl/entrypoints/inference.py:155-179@559b447",
    "W&B: the monitor calls wandb.init, retried only on CommError/ServerResponseError; "
    "WANDB_MODE=disabled/offline turns the shared run off (current); classic's shared run is "
    "incompatible with offline mode":
        "src/prime_rl/monitors/wandb/monitor.py:44-47,75-111@559b447; "
        "packages/prime-rl-configs/src/prime_rl/configs/rl.py:81@09e2977",
}

THREAD_JOIN_S = 5.0     # utils/process.py cleanup_threads
CHILD_WAIT_S = 60.0     # utils/process.py cleanup_processes
# the launcher's children with the defaults (inference, the orchestrator, torchrun, tail; the
# current generation adds an env server per train and eval source)
DEFAULT_CHILDREN = {"classic": 4, "current": 6}
DEFAULT_SERVER_PORT = 8000
DEFAULT_BACKEND_PORT = 8100   # current only: the engine behind the router


def cleanup_bound_s(generation: str) -> float:
    """The longest prime-rl's own SIGTERM cleanup takes with the default process list: every
    monitor thread joined to its limit, then every child waited for to its limit."""
    n = DEFAULT_CHILDREN[generation]
    return n * (THREAD_JOIN_S + CHILD_WAIT_S)


def _get(cfg: dict, dotted: str, default=None):
    node = cfg
    for k in dotted.split("."):
        if not isinstance(node, dict) or k not in node:
            return default
        node = node[k]
    return node


def gpus_requested(cfg: dict) -> int:
    """GPUs a launch of this (composed) config asks the node for."""
    infer = int(_get(cfg, "deployment.num_infer_gpus", 1)) if "inference" in cfg else 0
    return infer + int(_get(cfg, "deployment.num_train_gpus", 1)) + \
        int(_get(cfg, "deployment.num_teacher_gpus", 0) or 0)


def visible_gpus(env: dict | None = None) -> int | None:
    """GPUs the launcher would see: CUDA_VISIBLE_DEVICES when set, else what NVML counts
    (`nvidia-smi -L`, NVML's command line), else None (unknown: no NVIDIA driver here)."""
    env = dict(os.environ if env is None else env)
    raw = env.get("CUDA_VISIBLE_DEVICES")
    if raw is not None:
        return len([t for t in raw.split(",") if t.strip()])
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if not smi:
        return None
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    return sum(1 for line in r.stdout.splitlines() if line.startswith("GPU "))


def server_ports(cfg: dict, generation: str) -> list[int]:
    """The ports a launch's inference server takes (none without [inference]). Current: the
    router's on server.port and the engine's on backend_port, which follows server.port + 100
    unless set (configs/inference.py:440-444,511-515@559b447), and is unused without a router."""
    if "inference" not in cfg:
        return []
    port = int(_get(cfg, "inference.server.port", DEFAULT_SERVER_PORT))
    ports = [port]
    if generation == "current" and _get(cfg, "inference.router", {}) is not None:
        ports.append(int(_get(cfg, "inference.backend_port", port + DEFAULT_BACKEND_PORT - DEFAULT_SERVER_PORT)))
    return ports


# where the orchestrator's model client points, and the default it keeps when unset
CLIENT_URL = {"current": ("orchestrator.model.client.base_url", "http://localhost:8000/v1"),
              "classic": ("orchestrator.student.client.base_url", ["http://localhost:8000/v1"])}


def client_port_mismatch(cfg: dict, generation: str) -> str | None:
    """What `rl` refuses before it starts anything: with [inference], an orchestrator client
    whose port is not the server's (src/prime_rl/entrypoints/rl.py:163-173@559b447,
    :127-139@09e2977; an elastic classic pool is exempt). The message is prime-rl's, with the key
    to set; None when they agree."""
    from urllib.parse import urlparse

    if "inference" not in cfg:
        return None
    key, default = CLIENT_URL[generation]
    if generation == "classic" and _get(cfg, "orchestrator.student.client.elastic") is not None:
        return None
    url = _get(cfg, key, default)
    url = url[0] if isinstance(url, list) and url else url
    if not isinstance(url, str):
        return None
    port = int(_get(cfg, "inference.server.port", DEFAULT_SERVER_PORT))
    if urlparse(url).port == port:
        return None
    return (f"{key} port ({urlparse(url).port}) does not match inference.server.port ({port}): prime-rl's "
            f"`rl` refuses to start. Set {key} to "
            + (f'["http://localhost:{port}/v1"]' if generation == "classic" else f'"http://localhost:{port}/v1"')
            + " (or leave inference.server.port at its default).")


def wandb_enabled(cfg: dict) -> bool:
    """Does the composed config turn W&B on ([wandb] classic, [monitors.wandb] current)?"""
    return "wandb" in cfg or isinstance(_get(cfg, "monitors.wandb"), dict)


def wandb_credentials(env: dict | None = None, home: Path | None = None,
                      generation: str = "current") -> str | None:
    """Where W&B's credentials come from, or None when a `wandb.init` in a process without a
    terminal would find none: WANDB_API_KEY, a netrc entry for the W&B host, or (current only)
    WANDB_MODE disabled/offline, which turns the shared run off."""
    env = dict(os.environ if env is None else env)
    if env.get("WANDB_API_KEY"):
        return "WANDB_API_KEY"
    if generation == "current" and env.get("WANDB_MODE") in ("disabled", "offline"):
        return f"WANDB_MODE={env['WANDB_MODE']}"
    host = (env.get("WANDB_BASE_URL") or "https://api.wandb.ai").split("://")[-1].split("/")[0].split(":")[0]
    netrc_path = Path(env.get("NETRC") or (Path(home or env.get("HOME") or Path.home()) / ".netrc"))
    try:
        import netrc

        if netrc.netrc(str(netrc_path)).authenticators(host):
            return str(netrc_path)
    except (OSError, netrc.NetrcParseError):
        pass
    return None
