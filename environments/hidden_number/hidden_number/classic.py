"""HiddenNumber-v1 as a classic verifiers multi-turn environment (verifiers <= 0.3.1).

The env plays the game (game.py): `setup_state` reads the row's range (`info.lo`, `info.hi`),
`env_response` answers each guess, a stop condition ends the game when the row's budget
(`info.max_guesses`) is spent, and the right guess ends it with a final "Correct!". The
constructor's `max_turns` caps every episode. Reward 1 when one of the guesses within the budget
is the row's answer, else 0; `guesses` (weight 0) counts the guesses made.
"""
from __future__ import annotations

import verifiers as vf

if not hasattr(vf, "MultiTurnEnv"):
    raise ImportError(f"HiddenNumber-v1 needs verifiers' classic API (<= 0.3.1); found "
                      f"{getattr(vf, '__version__', '?')}")

from datasets import Dataset  # noqa: E402

from .game import SYSTEM_PROMPT, feedback, parse_guess, splits  # noqa: E402


def _text(msg) -> str:
    content = msg.get("content") if isinstance(msg, dict) else getattr(msg, "content", None)
    return content if isinstance(content, str) else ""


def _role(msg) -> str | None:
    return msg.get("role") if isinstance(msg, dict) else getattr(msg, "role", None)


class GuessParser(vf.Parser):
    """A reply's guess: the number in its first <guess>N</guess>."""

    def parse(self, text: str) -> str | None:
        g = parse_guess(text)
        return None if g is None else str(g)


def found(completion, answer, info=None, **kwargs) -> float:
    """1.0 when one of the first info.max_guesses guesses is the hidden number."""
    budget = int((info or {})["max_guesses"])
    guesses = [parse_guess(_text(m)) for m in completion or [] if _role(m) == "assistant"]
    return 1.0 if str(answer) in {str(g) for g in guesses[:budget] if g is not None} else 0.0


def guesses(completion, **kwargs) -> float:
    """How many guesses the episode took (a count, not a score)."""
    return float(sum(1 for m in completion or [] if _role(m) == "assistant"))


class HiddenNumberEnv(vf.MultiTurnEnv):
    def __init__(self, max_turns: int = 8, **kwargs):
        super().__init__(max_turns=max_turns, **kwargs)

    async def setup_state(self, state, **kwargs):
        info = state["info"]
        state["lo"], state["hi"] = int(info["lo"]), int(info["hi"])
        return state

    @vf.stop
    async def out_of_guesses(self, state, **kwargs) -> bool:
        return len(state["trajectory"]) >= int(state["info"]["max_guesses"])

    async def env_response(self, messages, state, **kwargs):
        last = next((m for m in reversed(messages) if _role(m) == "assistant"), None)
        state["lo"], state["hi"], reply, done = feedback(
            parse_guess(_text(last)), int(state["answer"]), state["lo"], state["hi"])
        out = [vf.UserMessage(content=reply)]
        if done:
            state["final_env_response"] = out
        return out


def load_environment(seed: int = 0, num_train_examples: int = -1, num_eval_examples: int = -1,
                     max_turns: int = 8, **kwargs) -> vf.Environment:
    rows = splits(seed)
    train = rows["train"] if num_train_examples < 0 else rows["train"][:num_train_examples]
    test = rows["test"] if num_eval_examples < 0 else rows["test"][:num_eval_examples]
    parser = GuessParser()
    rubric = vf.Rubric(funcs=[found, guesses], weights=[1.0, 0.0], parser=parser)
    return HiddenNumberEnv(dataset=Dataset.from_list(train), eval_dataset=Dataset.from_list(test),
                           system_prompt=SYSTEM_PROMPT, parser=parser, rubric=rubric,
                           max_turns=max_turns, **kwargs)
