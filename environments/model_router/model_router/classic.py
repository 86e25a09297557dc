"""model_router as a classic verifiers environment (verifiers <= 0.3.1)."""
from __future__ import annotations

import verifiers as vf

if not hasattr(vf, "SingleTurnEnv"):
    raise ImportError(
        f"the classic model_router environment needs verifiers <= 0.3.1 (found "
        f"{getattr(vf, '__version__', '?')}); with verifiers >= 0.4 use the taskset form, "
        "model_router.ModelRouterTaskset (taskset id model-router)")

from datasets import Dataset  # noqa: E402

from .rows import SYSTEM_PROMPT, route_reward_value, split_rows  # noqa: E402,F401


def load_environment(table_path: str | None = None, seed: int = 0, eval_fraction: float = 0.2,
                     **kwargs) -> vf.Environment:
    train, test = split_rows(table_path, seed, eval_fraction)
    parser = vf.XMLParser(["model"], answer_field="model")

    async def oracle_route(completion, answer, info=None, state=None, **kw) -> float:
        """1 for the oracle model, 0 for another valid model, -1 for no valid route."""
        return route_reward_value(parser.parse_answer(completion), info or {})

    rubric = vf.Rubric(funcs=[oracle_route], weights=[1.0], parser=parser)
    return vf.SingleTurnEnv(
        dataset=Dataset.from_list(train),
        eval_dataset=Dataset.from_list(test),
        system_prompt=SYSTEM_PROMPT, parser=parser, rubric=rubric, **kwargs,
    )
