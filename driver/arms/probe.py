"""The gradient probe's sample: the anchor student (iter_0's checkpoint) plays groups on a sample
of an iteration's generated rows, however its backend samples (base.Probe's kinds: a one-step
launch of the backend's own trainer, the embedded probe forked from a warm interpreter, or a
command of its own). The iteration phase reads only the outcome: rollouts to measure, a reason
no probe ran, or prime-rl's abort of the one step on its zero-advantage rule."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from driver import faults
from driver.arms.arm import Arm
from driver.arms.train import probe_launch
from driver.context import Ctx
from driver.envs import worker
from driver.errors import DriverError
from driver.run.files import atomic_write_text
from driver.run.model import MIN_PROMPTS_PER_STEP, Knobs
from driver.run.arm_files import ArmFiles

TIMEOUT_S = 3600   # a probe is one batch: an hour is a hung sampler, not a slow one


@dataclass(frozen=True)
class Sample:
    """What a probe came back with: exactly one of its fields is set."""
    rollouts: Path | None = None   # the groups it played, one rollout per line
    skipped: str | None = None     # why no probe ran (turned off, a backend that cannot, its cost)
    aborted: str | None = None     # prime-rl aborted the one step: no group to train on
    prompts: int = 0               # prompts the launch drew (a batch is whole groups)


def run_probe(ctx: Ctx, n: int, arm: Arm, knobs: Knobs, out: Path) -> Sample:
    """Runs the probe of iteration n's dataset as its backend does, writing the rollouts to
    `out`. Raises DriverError, naming its log, when the probe itself failed."""
    st = ctx.state
    probe_cmd = ctx.trainer.probe()
    if st.probe_prompts == 0 or probe_cmd is None:
        why = "turned off (--probe-prompts 0)" if st.probe_prompts == 0 else \
            f"the {ctx.trainer.name} backend cannot sample outside a training run"
        ctx.say(f"[iter_{n}] probe skipped: {why}")
        return Sample(skipped=why)
    if probe_cmd.kind == "launch":
        # a batch is whole groups of at least MIN_PROMPTS_PER_STEP prompts (the run model's rule)
        prompts = max(st.probe_prompts, MIN_PROMPTS_PER_STEP)
        from driver.backends import probe_gate

        gate = probe_gate(ctx.trainer, ctx.rd.path, st, prompts * st.rollouts_per_example)
        if gate is not None:   # a paid probe: its cost stated before it runs, or why not
            ctx.say(f"[iter_{n}] probe: {gate[1]}")
            if not gate[0]:
                return Sample(skipped=gate[1])
        rows, aborted = probe_launch(ctx, arm, knobs, prompts)
        if aborted is not None:
            return Sample(aborted=aborted, prompts=prompts)
        atomic_write_text(out, "".join(json.dumps(r) + "\n" for r in rows))
        return Sample(rollouts=out, prompts=prompts)

    assert st.iter_0_step is not None, "the probe samples iter_0's checkpoint: iter_0 comes first"
    model = ctx.dialect.weights_dir(ctx.iter_dir(0) / ArmFiles.OUT, st.iter_0_step)
    args = ["--model", str(model), "--env-id", str(arm.package), "--prompts", str(st.probe_prompts),
            "--k", str(st.rollouts_per_example), "--max-tokens", str(knobs.max_completion_tokens),
            "--temperature", str(knobs.temperature), "--seed", str(st.seed),
            "--min-live", str(st.probe_min_live), "--output", str(out)]
    log = arm.dir / "probe.log"
    faults.point("probe:before-launch")
    if probe_cmd.kind == "worker":
        # the embedded trainer's probe (python -m MODULE), forked from a warm interpreter
        python, _, module = probe_cmd.command[:3]
        r = worker.run_py(python, worker.RUN_MODULE, [module, *args], timeout=TIMEOUT_S,
                          cwd=probe_cmd.cwd, torch=True)
        atomic_write_text(log, r.stdout + r.stderr)
        rc = r.returncode
    else:
        with open(log, "w") as fh:
            rc = subprocess.run([*probe_cmd.command, *args], cwd=probe_cmd.cwd, stdout=fh,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                timeout=TIMEOUT_S).returncode
    if rc != 0 or not out.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-10:])
        raise DriverError(f"[iter_{n}] the gradient probe failed (exit {rc}); see {log}:\n{tail}\n"
                          "Fix the cause, then `driver resume`.")
    return Sample(rollouts=out, prompts=st.probe_prompts)
