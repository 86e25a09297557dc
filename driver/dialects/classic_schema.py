"""A snapshot of prime-rl's CLASSIC-ERA config schema (commit 09e2977, v0.5.1.dev209, the
window 2026-04-09 .. 2026-05-23), written from the reference notes, not imported from prime-rl.

Shape: a dict is a closed table (only these keys), OPEN is a table whose keys this snapshot
does not pin (the driver renders nothing inside it except what the tests pin), LEAF is a value,
and a one-element list holds the schema of each entry of an array of tables. Unknown keys in a
closed table are errors in prime-rl (pydantic extra="forbid"), so the driver refuses them
before a launch costs GPU time.
"""
from __future__ import annotations

from typing import Any

OPEN = "open"
LEAF = "leaf"

_ENV = {"id": LEAF, "name": LEAF, "args": OPEN, "extra_env_kwargs": OPEN, "address": LEAF,
        "num_workers": LEAF, "ratio": LEAF, "max_retries": LEAF,
        "max_total_completion_tokens": LEAF, "timeout": LEAF,
        # per-env sampling overrides (TrainEnvConfig / EvalEnvConfig,
        # configs/orchestrator.py:238-245@09e2977; configs/multi_reverse_text/rl.toml sets them)
        "sampling": OPEN}
_EVAL_ENV = {**_ENV, "num_examples": LEAF, "rollouts_per_example": LEAF, "interval": LEAF}

SCHEMA = {
    "trainer": OPEN, "orchestrator": {
        "rollouts_per_example": LEAF, "batch_size": LEAF, "seq_len": LEAF,
        "max_async_level": LEAF, "student": OPEN, "model": OPEN,
        "train": {"env": [_ENV], "sampling": OPEN},
        "eval": {"env": [_EVAL_ENV], "sampling": OPEN, "num_examples": LEAF,
                 "rollouts_per_example": LEAF, "interval": LEAF, "eval_base_model": LEAF,
                 "skip_eval_on_resume": LEAF},
        "buffer": OPEN, "filters": OPEN, "wandb": OPEN,
        "ckpt": {"interval": LEAF, "resume_step": LEAF},
        "output_dir": LEAF, "use_renderer": LEAF, "renderer": OPEN,
        # the orchestrator table has more knobs than these notes pin; tolerate them
        "*": OPEN,
    },
    "inference": OPEN, "teacher_inference": OPEN, "output_dir": LEAF, "clean_output_dir": LEAF,
    "log": OPEN,
    "ckpt": {"output_dir": LEAF, "interval": LEAF, "resume_step": LEAF, "keep_last": LEAF,
             "keep_interval": LEAF},
    "wandb": {"project": LEAF, "name": LEAF, "entity": LEAF, "group": LEAF, "tags": LEAF,
              "offline": LEAF, "shared": LEAF, "id": LEAF, "dir": LEAF, "log_extras": OPEN},
    "model": OPEN, "tokenizer": OPEN, "max_steps": LEAF, "seq_len": LEAF,
    "max_async_level": LEAF, "weight_broadcast": OPEN, "bench": OPEN, "deployment": OPEN,
    "slurm": OPEN, "dry_run": LEAF,
}


def unknown_keys(cfg: dict, schema: Any = None, where: str = "") -> list[str]:
    """Dotted paths in cfg that the snapshot says prime-rl would reject."""
    schema = SCHEMA if schema is None else schema
    bad = []
    for key, value in cfg.items():
        path = f"{where}.{key}" if where else key
        if key in schema:
            spec = schema[key]
        elif "*" in schema:
            spec = schema["*"]
        else:
            bad.append(path)
            continue
        if spec == OPEN or spec == LEAF:
            continue
        if isinstance(spec, list):
            if not isinstance(value, list):
                bad.append(f"{path} (must be an array of tables)")
                continue
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    bad += unknown_keys(item, spec[0], f"{path}[{i}]")
        elif isinstance(value, dict):
            bad += unknown_keys(value, spec, path)
        else:
            bad.append(f"{path} (must be a table)")
    return bad
