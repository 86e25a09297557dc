"""Every default of a run, in one table the run model (state.RunState) is built from.

Kept free of imports so that `driver --help` shows the same values without loading pydantic.
"""
from __future__ import annotations

TEACHERS = ("builtin", "agent", "llm")
BACKENDS = ("prime_rl", "local")

# The knobs whose default depends on the backend (a CLI flag left unset takes these). The
# local row is sized so that a whole default run, controls included, takes about ten minutes
# on 2 CPU cores; the prime_rl row is the seed procedure's standard for a GPU node.
BACKEND_DEFAULTS: dict[str, dict] = {
    "prime_rl": {"model": "Qwen/Qwen3-0.6B", "batch_size": 512, "rollouts_per_example": 16,
                 "steps_per_run": 100, "max_completion_tokens": 1024, "temperature": 1.0,
                 "lr": None, "budget_seconds": 10 * 3600},
    # temperature 0.7 and lr 5e-5, a compromise read off bench/rl_headroom.py on the first-stage
    # demo student (README, "Lift research"): at 1e-4 iter_0 alone eroded its planted skill, at
    # 1e-5 nothing moved at all. The demo student's planted habit was chosen at these settings.
    "local": {"model": "builtin:tiny-char-qwen2", "batch_size": 64, "rollouts_per_example": 4,
              "steps_per_run": 30, "max_completion_tokens": 96, "temperature": 0.7,
              "lr": 5e-5, "budget_seconds": 4 * 60},
}

# The rest, whatever the backend
RUN_DEFAULTS: dict = {
    "max_iters": 15,
    "eval_examples": 200,
    "teacher": "builtin",
    "teacher_retries": 3,
    "stall_timeout_s": 1800,
    "probe_prompts": 32,
    "probe_min_live": 0.1,
    "seed": 0,
    # prime-rl classic's [orchestrator.buffer] online_difficulty_filtering: off, as there
    "difficulty_filter": False,
}

MIN_PROMPTS_PER_STEP = 16   # GRPO compares within groups; fewer prompts a step is mostly noise


def batch_problem(batch_size: int, rollouts_per_example: int) -> str | None:
    """What is wrong with a batch size for a group size, or None: the one statement of the rule
    the run model (flags) and the dialect (a config file's own values) both enforce."""
    if batch_size % rollouts_per_example:
        return (f"batch_size {batch_size} is not divisible by rollouts_per_example "
                f"{rollouts_per_example}")
    prompts = batch_size // rollouts_per_example
    if prompts < MIN_PROMPTS_PER_STEP:
        return (f"batch_size {batch_size} / rollouts_per_example {rollouts_per_example} = "
                f"{prompts} unique prompts per step; GRPO needs at least {MIN_PROMPTS_PER_STEP}")
    return None
