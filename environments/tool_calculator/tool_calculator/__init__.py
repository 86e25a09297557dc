"""ToolCalculator-v1: a sum or a product of two numbers, which the model gets by calling the
env's calculator tools (`add(a, b)`, `multiply(a, b)`) with the right arguments, then answers
as <answer>N</answer>. A classic verifiers tool-using environment (verifiers' ToolEnv,
`load_environment`, verifiers <= 0.3.1); the problems and the tools are in problems.py, the env
in classic.py; the v1 taskset form (`ToolCalculatorTaskset`, exported in __all__ as
prime-rl >= v0.8.1 requires) in taskset.py, its tools a shared MCP toolset.

Each row: `question`, `answer` (the result), `info` with `op` (add or multiply), `a` and `b`.
Reward 1 when the last reply's answer is the result, else 0; the tool calls are counted (weight
0). Nothing rewards a call as such: the model calls a tool because it cannot do the arithmetic.
"""
from __future__ import annotations

from .problems import SYSTEM_PROMPT, TOOLS, add, multiply, reference_moves, warm_start_corpus  # noqa: F401

__all__ = ["ToolCalculatorTaskset"]

# The embedded trainer's built-in student for this env (`driver run --backend local` takes it for
# the bare builtin:tiny-char-qwen2): StockArithmetic's four-layer base student (shipped prebuilt),
# which already copies a question's numbers in order into its worked chain, continued by SFT for
# 100 steps of 16 on fresh episodes of the reference player (call the tool the question names
# with its two numbers, answer the tool's result), a fifth of them calling the other tool. A
# two-layer student from fresh weights learns the format in 150 steps but not yet to copy a
# number (it writes the same call for every question and wins none); this one wins about half.
STUDENT_RECIPE = ("builtin:tiny-char-qwen2?init=tiny-char-qwen2-8abbfb3ce29d62e3&corpus=stream&sft_steps=100"
                  "&sft_batch=16&c_slip_share=0.2")


def load_environment(seed: int = 0, num_train_examples: int = -1, num_eval_examples: int = -1,
                     max_turns: int = 3, **kwargs):
    """The classic tool-using environment (needs verifiers <= 0.3.1)."""
    from .classic import load_environment as classic

    return classic(seed=seed, num_train_examples=num_train_examples,
                   num_eval_examples=num_eval_examples, max_turns=max_turns, **kwargs)


def __getattr__(name: str):
    # imported on first use: verifiers.v1 takes seconds to import
    if name == "ToolCalculatorTaskset":
        from .taskset import ToolCalculatorTaskset

        return ToolCalculatorTaskset
    raise AttributeError(f"module 'tool_calculator' has no attribute {name!r}")
