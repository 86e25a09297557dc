"""Every file of an arm's directory (iter_N/, a control's run_*/), named once, and the one way a
failed attempt's files are set aside.

The names are a contract with the teacher (TEACHER.md lists its outputs and what a rejected
attempt leaves), with `driver status`'s readers and with run directories written earlier: they
stay. A module that reads or writes one goes through `ArmFiles`, so a file that a rejected
attempt must set aside is added to `ATTEMPT` once and every reader of the rule (the iteration,
the teacher's brief) follows. It lives under run/ rather than arms/ because the gates, the env
packaging and the backends read these names too, and they sit below the arms.

Setting aside never deletes: a file is renamed `NAME.<label>-<k>` beside the new one.
- `rejected-<attempt>`: a dataset the gate or the probe turned back (the teacher writes anew);
- `failed-<k>`: a launch that failed or left a torn eval (the arm trains or evaluates anew);
- `before-<k>`: a finished run's controls when `driver resume` reopens its loop.
"""
from __future__ import annotations

from pathlib import Path


class ArmFiles:
    # the teacher's outputs, and what it may add beside them
    WEAKNESS_REPORT = "weakness_report.md"
    WEAKNESS = "weakness.json"
    GENERATOR = "gen_dataset.py"
    SCRATCHPAD_ENTRY = "scratchpad_entry.md"
    HPARAMS = "hparams.json"
    AUX_REWARDS = "aux_rewards.py"
    TEACHER_USAGE = "teacher_usage.json"
    # what the teacher reads (train-side rollouts only)
    TEACHER_INPUT = "teacher_input"
    FAILURES = "failures.jsonl"
    TRAIN_SAMPLE = "train_sample.jsonl"
    # what the driver makes of the teacher's outputs
    GENERATOR_LOG = "gen_dataset.log"
    DATASET = "dataset.jsonl"
    DATASET_RECORD = "dataset_record.json"
    GATE_REPORT = "gate_report.json"
    PROBE_RECORD = "probe.json"
    PROBE_ROLLOUTS = "probe_rollouts.jsonl"
    PROBE_LAUNCH = "probe"             # the one-step probe launch's own arm directory
    ATTEMPTS = "attempts.json"
    SKIPPED = "skipped.json"
    # the arm's training and its measurement
    ENV_INSTALLED = "env_installed.json"
    CONFIG = "rl.toml"
    OUT = "prime_out"
    LOG = "train.log"
    TRAIN_DONE = "train_done.json"
    ABORTED = "aborted.json"
    FINAL_EVAL_CONFIG = "evals.toml"
    FINAL_EVAL_LOG = "final_eval.log"
    EVAL_SUMMARY = "eval_summary.json"

    # what the teacher must leave for the iteration to go on
    TEACHER_OUTPUTS = (WEAKNESS_REPORT, WEAKNESS, GENERATOR, SCRATCHPAD_ENTRY)
    # what a rejected attempt leaves, all set aside so that all of it is written again (the
    # probe's rollouts too: the built-in teacher reads every attempt's)
    ATTEMPT = (*TEACHER_OUTPUTS, HPARAMS, AUX_REWARDS, DATASET, DATASET_RECORD, PROBE_RECORD,
               PROBE_ROLLOUTS, PROBE_LAUNCH)


def set_aside(path: Path, label: str = "failed", number: int | None = None) -> Path | None:
    """Rename `path` to NAME.<label>-<number> beside it (number None: the first free one);
    where it went, or None when there was nothing to set aside."""
    path = Path(path)
    if not path.exists():
        return None
    k = number if number is not None else 1
    while number is None and aside(path, label, k).exists():
        k += 1
    dest = aside(path, label, k)
    path.rename(dest)
    return dest


def aside(path: Path, label: str, number: int) -> Path:
    """Where set_aside puts `path` under `label` and `number`."""
    return Path(path).with_name(f"{Path(path).name}.{label}-{number}")


def set_aside_attempt(arm_dir: Path, attempt: int) -> list[str]:
    """A rejected attempt's files (ArmFiles.ATTEMPT), each NAME.rejected-<attempt>; the names
    that were there to move."""
    return [name for name in ArmFiles.ATTEMPT
            if set_aside(Path(arm_dir) / name, "rejected", attempt) is not None]


def rejected(arm_dir: Path, name: str, attempt: int) -> Path:
    """Where set_aside_attempt put `name` of attempt `attempt`."""
    return aside(Path(arm_dir) / name, "rejected", attempt)
