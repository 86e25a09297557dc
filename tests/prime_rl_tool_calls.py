"""The tool-call settings prime-rl gives a model's inference server, on both generations, for the
trainer doubles (tests/trainer_double.py, trainer_double_current.py, prime_rl_bin/uv).

Both resolve the parser the same way: the setting defaults to "auto", which a validator replaces
by the first pattern of a model-name map that matches (None where none does), and vLLM's
`enable_auto_tool_choice` is turned on exactly when a parser is set:
- classic (09e2977): `[inference.model] tool_call_parser`
  (packages/prime-rl-configs/src/prime_rl/configs/inference.py:60,77-78; the map
  utils/parsers.py:4-19,51-52); `to_vllm` drops a None parser and sets
  `enable_auto_tool_choice = hasattr(namespace, "tool_call_parser")` (:438-442).
- current (559b447): `[inference.vllm] tool_call_parser` (configs/inference.py:75,171-172; the
  map utils/parsers.py:4-25,51-52); `to_namespace` omits a None parser (:587) and sets
  `enable_auto_tool_choice` on its presence unless given (:608-609).
`rl` writes the validated config, the parser resolved, and starts the server on it
(classic entrypoints/rl.py:54-68,162@09e2977; current entrypoints/rl.py:46,87-95,195@559b447).
"""
from __future__ import annotations

import re

_COMMON = [
    (r"^deepseek-ai/DeepSeek-V3\.2", "deepseek_v32"),
    (r"^deepseek-ai/DeepSeek-V3\.1", "deepseek_v31"),
    (r"^zai-org/GLM-4\.5", "glm45"),
    (r"^zai-org/GLM-4\.7", "glm47"),
    (r"^zai-org/GLM-5", "glm47"),
    (r"^MiniMaxAI/MiniMax-M2", "minimax_m2"),
]
PATTERNS = {
    "classic": _COMMON + [   # utils/parsers.py:4-19@09e2977
        (r"^PrimeIntellect/INTELLECT-3", "qwen3_coder"),
        (r"^nvidia/NVIDIA-Nemotron-3", "qwen3_coder"),
        (r"^stepfun-ai/Step-3\.5", "step3p5"),
        (r"^Qwen/Qwen3\.5-", "qwen3_coder"),
        (r"^Qwen/Qwen3-Coder", "qwen3_coder"),
        (r"^Qwen/Qwen3-", "hermes"),
    ],
    "current": [   # utils/parsers.py:4-25@559b447
        (r"^arcee-ai/Trinity-Large-Thinking", "qwen3_coder"),
        (r"^arcee-ai/Trinity-", "hermes"),
    ] + _COMMON + [
        (r"^openai/gpt-oss", "openai"),
        (r"^poolside/Laguna", "poolside_v1"),
        (r"^PrimeIntellect/INTELLECT-3", "qwen3_coder"),
        (r"^nvidia/NVIDIA-Nemotron-3", "qwen3_coder"),
        (r"^stepfun-ai/Step-3\.5", "step3p5"),
        (r"^Qwen/Qwen3\.(5|6|8)-", "qwen3_coder"),
        (r"^Qwen/Qwen3-Coder", "qwen3_coder"),
        (r"^Qwen/Qwen3-", "hermes"),
    ],
}


def resolve(setting, model: str, generation: str) -> str | None:
    """The parser a server gets: an explicit name as given, "auto" (the default) from the model
    name, None for none."""
    if setting != "auto":
        return setting
    return next((name for pattern, name in PATTERNS[generation] if re.search(pattern, model)), None)


def server_settings(parser: str | None, auto_tool_choice=None) -> dict:
    """What vLLM is started with: the parser where one is set, and auto tool choice on exactly
    then unless the config sets it."""
    out = {} if parser is None else {"tool_call_parser": parser}
    out["enable_auto_tool_choice"] = (parser is not None) if auto_tool_choice is None else bool(auto_tool_choice)
    return out
