"""The trainer double's launcher: what prime-rl's `rl` entrypoint does around the training loop,
for both generations, as rl_contract/launch.py states it (each behaviour below cites the line of
prime-rl it copies; where the source leaves a fact open, a knob chooses).

- Refusals at start: more GPUs requested than visible (`entrypoints/rl.py:130-143@559b447`,
  `:92-109@09e2977`; visible = CUDA_VISIBLE_DEVICES, else NVML's count: `utils/process.py:36-43`),
  and W&B turned on with no credentials. Whether `wandb.init` fails in a process without a
  terminal and no key is wandb's behaviour, not prime-rl's, and was not run here: knob
  DOUBLE_WANDB_WITHOUT_KEY = fail (default) | run.
- The process tree (`entrypoints/rl.py:200,260,288,320-345,371@559b447`): this process is the
  launcher; an inference server (with [inference]), `torchrun` and a `tail` are plain children in
  its process group; torchrun starts each trainer rank in a new session (pytorch's
  subprocess_handler `_popen`, start_new_session=True). Ranks take DOUBLE_RANK_TEARDOWN_SECONDS
  to exit on SIGTERM (a CUDA/NCCL teardown; how long is not settled by the source), or never
  (DOUBLE_RANK_IGNORES_TERM=1: a rank wedged in its teardown, as PR #2158 saw).
- On SIGTERM (and after the run, `:405-407`) the launcher cleans up as `utils/process.py:58-93`:
  each child's psutil tree TERMed, waited for up to DOUBLE_CLEANUP_WAIT_SECONDS (prime-rl: 60),
  then KILLed; a SIGTERM ends the launcher with status 1 (`entrypoints/rl.py:184-190`).
- DOUBLE_BIND_PORTS=1: the inference child listens on the config's inference server ports
  (rl_contract.launch.server_ports) for as long as it lives, as vLLM and its router do.

Each launch appends {"tree_of": launcher pid, "pids": [...]} to DOUBLE_LAUNCH_LOG + ".trees".
Run as a child: `python double_launcher.py inference|torchrun|rank|tail [args]`.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve()


def refusal(cfg: dict, generation: str) -> str | None:
    """What the launcher refuses before it starts anything, in prime-rl's (or wandb's) words."""
    from rl_contract import launch

    requested, visible = launch.gpus_requested(cfg), launch.visible_gpus()
    if visible is None:   # no CUDA_VISIBLE_DEVICES and no NVML: pynvml.nvmlInit() raises
        return "pynvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found"
    if requested > visible:
        ids = list(range(visible))
        return (f"ValueError: Requested {requested} GPUs via deployment settings, but only "
                f"{visible} physical GPU(s) are available: {ids}")
    if launch.wandb_enabled(cfg) and not launch.wandb_credentials(generation=generation) \
            and os.environ.get("DOUBLE_WANDB_WITHOUT_KEY", "fail") == "fail":
        return ("wandb.errors.errors.UsageError: api_key not configured (no-tty). "
                "call wandb.login(key=[your_api_key])")
    return None


class Tree:
    """The launcher's children (inference, torchrun -> ranks, tail) and its cleanup."""

    def __init__(self, cfg: dict, generation: str):
        from rl_contract import launch

        self.children: list[subprocess.Popen] = []
        py = sys.executable
        ports = launch.server_ports(cfg, generation) if os.environ.get("DOUBLE_BIND_PORTS") else []
        if "inference" in cfg:
            self.children.append(subprocess.Popen([py, str(HERE), "inference", *map(str, ports)]))
        ranks = int((cfg.get("deployment") or {}).get("num_train_gpus", 1))
        # the teardown knobs reach torchrun and its ranks only for the arm they are shaped to
        from trainer_double import knob

        env = dict(os.environ)
        for name in ("DOUBLE_RANK_IGNORES_TERM", "DOUBLE_TORCHRUN_GRACE_SECONDS"):
            env.pop(name, None)
            if knob(name):
                env[name] = knob(name)
        self.children.append(subprocess.Popen([py, str(HERE), "torchrun", str(ranks)], env=env))
        self.children.append(subprocess.Popen([py, str(HERE), "tail"]))
        signal.signal(signal.SIGTERM, self._on_term)
        self._record()

    def _record(self) -> None:
        log = os.environ.get("DOUBLE_LAUNCH_LOG")
        if not log:
            return
        import psutil

        deadline = time.monotonic() + 5   # torchrun's ranks, once started
        while True:
            pids = [p.pid for p in psutil.Process().children(recursive=True)]
            if len(pids) > len(self.children) or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        with open(log + ".trees", "a") as f:
            f.write(json.dumps({"tree_of": os.getpid(), "pids": pids}) + "\n")

    def _on_term(self, *_):
        # entrypoints/rl.py:184-190: clean up, then exit 1
        self.cleanup()
        sys.exit(1)

    def cleanup(self) -> None:
        """utils/process.py:83-93: each child's whole tree TERMed (across sessions), waited for,
        then KILLed."""
        wait = float(os.environ.get("DOUBLE_CLEANUP_WAIT_SECONDS", "60"))
        for child in self.children:
            if child.poll() is not None:
                continue
            _signal_tree(child.pid, signal.SIGTERM)
            try:
                child.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                _signal_tree(child.pid, signal.SIGKILL)


def _signal_tree(pid: int, sig: int) -> None:
    """utils/process.py:64-80: the process and every descendant psutil finds."""
    import psutil

    try:
        procs = psutil.Process(pid).children(recursive=True) + [psutil.Process(pid)]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass


# ---- the children ----------------------------------------------------------------------------

def _serve(ports: list[int]) -> list[socket.socket]:
    socks = []
    for port in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", port))
        s.listen()
        socks.append(s)
    return socks


def _idle_until_term(teardown_s: float = 0.0, ignore: bool = False) -> None:
    def stop(*_):
        if ignore:
            return
        time.sleep(teardown_s)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    while True:
        time.sleep(0.2)


def child(role: str, args: list[str]) -> None:
    if role == "inference":
        listening = _serve([int(a) for a in args])   # open for as long as it serves
        _idle_until_term(0.1)
        for s in listening:
            s.close()
    elif role == "rank":
        _idle_until_term(float(os.environ.get("DOUBLE_RANK_TEARDOWN_SECONDS", "0.3")),
                         ignore=bool(os.environ.get("DOUBLE_RANK_IGNORES_TERM")))
    elif role == "torchrun":
        # torchrun's elastic agent: ranks in sessions of their own; on SIGTERM each rank's own
        # group is TERMed, then KILLed after torchrun's grace (its length is torch's, unverified)
        ranks = [subprocess.Popen([sys.executable, str(HERE), "rank"], start_new_session=True)
                 for _ in range(int(args[0]))]

        def close(*_):
            for r in ranks:
                try:
                    os.killpg(r.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + float(os.environ.get("DOUBLE_TORCHRUN_GRACE_SECONDS", "30"))
            for r in ranks:
                try:
                    r.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    try:
                        os.killpg(r.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            os._exit(0)

        signal.signal(signal.SIGTERM, close)
        while True:
            time.sleep(0.2)
    elif role == "tail":
        _idle_until_term()


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2:])
