"""A snapshot of prime-rl's CURRENT config schema (v0.8.1.dev67, `559b447`), written from the
reference notes and the config classes' field lists, not imported from prime-rl.

Same notation as classic_schema: a dict is a closed table, OPEN a table whose keys are not
pinned, LEAF a value, a one-element list an array of tables. prime-rl's config classes forbid
unknown keys, so a key outside a closed table fails validation after the launch.
"""
from __future__ import annotations

from typing import Any

from driver.dialects.classic_schema import LEAF, OPEN, unknown_keys as _unknown_keys

# a taskset's own fields sit beside `id` (no `args`); they are the taskset's TasksetConfig's,
# checked by prime-rl only where the taskset is importable
_ENV = {"taskset": OPEN, "agent": {"harness": OPEN, "runtime": OPEN, "*": OPEN}, "*": OPEN}
_SOURCE = {"env": _ENV, "serve": OPEN, "name": LEAF, "ratio": LEAF}
_TRAIN_SOURCE = {**_SOURCE, "sampling": OPEN, "group_size": LEAF, "algo": OPEN, "curriculum": OPEN}
_EVAL_SOURCE = {**_SOURCE, "sampling": OPEN, "num_examples": LEAF, "group_size": LEAF, "interval": LEAF}
_CKPT = {"output_dir": LEAF, "interval": LEAF, "keep_last": LEAF, "keep_interval": LEAF}
_RESUME = {"step": LEAF, "dir": LEAF}

SCHEMA = {
    "trainer": OPEN,
    "orchestrator": {
        "algo": OPEN, "model": OPEN, "tokenizer": OPEN, "renderer": OPEN, "log": OPEN,
        "env_vars": OPEN, "monitors": OPEN, "collect_inference_metrics": LEAF,
        "inference_metrics_roles": LEAF, "ckpt": OPEN, "resume": _RESUME,
        "weight_broadcast": OPEN, "rollout_transport": OPEN, "output_dir": LEAF,
        "tasks_per_minute": LEAF, "env_server_base_port": LEAF, "batch_size": LEAF,
        "token_batch_size": LEAF, "concurrency": OPEN, "group_size": LEAF, "seq_len": LEAF,
        "num_train_workers": LEAF, "pad_to_multiple_of": LEAF, "max_steps": LEAF,
        "max_off_policy_steps": LEAF, "heartbeat": OPEN,
        "train": {"source": [_TRAIN_SOURCE],
                  "sampling": {"temperature": LEAF, "max_completion_tokens": LEAF, "extra_body": OPEN},
                  "filter_zero_advantages": LEAF},
        "eval": {"source": [_EVAL_SOURCE], "sampling": OPEN, "num_examples": LEAF,
                 "group_size": LEAF, "interval": LEAF, "skip_first_step": LEAF,
                 "retrigger_on_resume": LEAF},
    },
    "inference": OPEN, "env_vars": OPEN, "run": {"name": LEAF, "dir": LEAF},
    "output_dir": LEAF, "clean": LEAF, "log": OPEN, "ckpt": _CKPT, "resume": _RESUME,
    "monitors": {"wandb": OPEN, "file": OPEN, "prime": OPEN}, "model": OPEN, "tokenizer": OPEN,
    "max_steps": LEAF, "seq_len": LEAF, "weight_broadcast": OPEN, "rollout_transport": OPEN,
    "deployment": OPEN, "slurm": OPEN, "dry_run": LEAF,
}

# the standalone `evals` entrypoint's config (EvalsConfig)
EVALS_SCHEMA = {
    "model": LEAF, "output_dir": LEAF, "log": OPEN, "monitors": OPEN, "weight_broadcast": OPEN,
    "online": {"broadcasts_dir": LEAF, "max_steps": LEAF, "resume_step": LEAF},
    "eval": {**SCHEMA["orchestrator"]["eval"], "client": OPEN, "env_server_base_port": LEAF,  # type: ignore[index]
             "concurrency": OPEN},
}

# what a classic config's key became (named in the refusal)
CLASSIC_HINTS = {
    "orchestrator.rollouts_per_example": "rollouts_per_example is orchestrator.group_size",
    "orchestrator.train.env": "[[orchestrator.train.env]] is [[orchestrator.train.source]] with env.taskset",
    "orchestrator.eval.env": "[[orchestrator.eval.env]] is [[orchestrator.eval.source]]",
    "ckpt.resume_step": "[ckpt] resume_step is [resume] step (or dir)",
    "wandb": "[wandb] is [monitors.wandb]",
    "clean_output_dir": "clean_output_dir is clean",
    "orchestrator.train.sampling.max_tokens": "max_tokens is max_completion_tokens",
}

# Models prime-rl's `renderer = auto` resolves: the keys of renderers 0.1.10's
# MODEL_RENDERER_MAP (the first release with the renderers prime-rl v0.8.1.dev67 pins; the pin
# itself is unreleased). Any other model needs [orchestrator.renderer] name.
RENDERER_MODELS = frozenset({
    'MiniMaxAI/MiniMax-M2', 'MiniMaxAI/MiniMax-M2.5', 'PrimeIntellect/Qwen3-0.6B',
    'PrimeIntellect/Qwen3-1.7B', 'Qwen/Qwen3-0.6B', 'Qwen/Qwen3-1.7B', 'Qwen/Qwen3-14B',
    'Qwen/Qwen3-235B-A22B', 'Qwen/Qwen3-30B-A3B', 'Qwen/Qwen3-30B-A3B-Instruct-2507',
    'Qwen/Qwen3-30B-A3B-Thinking-2507', 'Qwen/Qwen3-32B', 'Qwen/Qwen3-4B',
    'Qwen/Qwen3-4B-Instruct-2507', 'Qwen/Qwen3-4B-Thinking-2507', 'Qwen/Qwen3-8B',
    'Qwen/Qwen3-VL-30B-A3B-Instruct', 'Qwen/Qwen3-VL-4B-Instruct', 'Qwen/Qwen3-VL-8B-Instruct',
    'Qwen/Qwen3.5-0.8B', 'Qwen/Qwen3.5-122B-A10B', 'Qwen/Qwen3.5-2B', 'Qwen/Qwen3.5-35B-A3B',
    'Qwen/Qwen3.5-397B-A17B', 'Qwen/Qwen3.5-4B', 'Qwen/Qwen3.5-9B', 'Qwen/Qwen3.6-35B-A3B',
    'Qwen/Qwen3.8-27B', 'THUDM/GLM-4.5-Air', 'deepseek-ai/DeepSeek-R1',
    'deepseek-ai/DeepSeek-R1-0528', 'deepseek-ai/DeepSeek-V3', 'deepseek-ai/DeepSeek-V3-Base',
    'google/gemma-4-26B-A4B-it', 'google/gemma-4-31B-it', 'google/gemma-4-E2B-it',
    'google/gemma-4-E4B-it', 'meta-llama/Llama-3.2-1B-Instruct',
    'meta-llama/Llama-3.2-3B-Instruct', 'moonshotai/Kimi-K2-Instruct', 'moonshotai/Kimi-K2.5',
    'moonshotai/Kimi-K2.6', 'nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16',
    'nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16',
    'nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16',
    'nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8',
    'nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-BF16', 'openai/gpt-oss-120b',
    'openai/gpt-oss-20b', 'poolside/Laguna-M.1', 'poolside/Laguna-S-2.1',
    'poolside/Laguna-XS-2.1', 'poolside/Laguna-XS.2', 'tencent/Hy3', 'tencent/Hy3-FP8',
    'thinkingmachines/Inkling', 'thinkingmachines/Inkling-Small', 'zai-org/GLM-4.5-Air',
    'zai-org/GLM-4.7-Flash', 'zai-org/GLM-5', 'zai-org/GLM-5-FP8', 'zai-org/GLM-5.1',
})
RENDERER_MODELS_EXAMPLE = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B")


def has_renderer(model: str) -> bool:
    return model in RENDERER_MODELS


def unknown_keys(cfg: dict, schema: Any = None) -> list[str]:
    return _unknown_keys(cfg, SCHEMA if schema is None else schema)
