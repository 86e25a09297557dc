"""A user's own multi-turn env, as a new user writes one: find a hidden integer in a range from
higher/lower feedback within a number of guesses. Its class has no constructor of its own: the
loader hands `max_turns=14` and a setting of its own (`say_range`, which env_response reads) to
verifiers' MultiTurnEnv, which keeps both as attributes. env_response reads `info.lo` and
`info.hi`; the rubric reads the answer and `info.max_guesses`. No family generator."""
import random
import re

import verifiers as vf
from datasets import Dataset

SYSTEM_PROMPT = "Guess the hidden number. Answer with <guess>N</guess>."


def _guess(text):
    m = re.search(r"<guess>\s*(-?\d+)\s*</guess>", text or "")
    return int(m.group(1)) if m else None


def _text(m):
    return (m.get("content") if isinstance(m, dict) else getattr(m, "content", None)) or ""


def _role(m):
    return m.get("role") if isinstance(m, dict) else getattr(m, "role", None)


class GuessEnv(vf.MultiTurnEnv):
    async def env_response(self, messages, state, **kwargs):
        info, secret = state["info"], int(state["answer"])
        guesses = [_guess(_text(m)) for m in messages if _role(m) == "assistant"]
        g = guesses[-1]
        if g is None:
            reply = "Say <guess>N</guess>."
        elif g < info["lo"] or g > info["hi"]:
            reply = f"Out of range ({info['lo']}-{info['hi']})."
        elif g == secret:
            state["final_env_response"] = [vf.UserMessage(content="Yes!")]
            return state["final_env_response"]
        else:
            reply = "Higher." if g < secret else "Lower."
            if self.say_range:
                lo = max([x + 1 for x in guesses if x is not None and x < secret] + [info["lo"]])
                hi = min([x - 1 for x in guesses if x is not None and x > secret] + [info["hi"]])
                reply += f" It is from {lo} to {hi}."
        return [vf.UserMessage(content=reply)]


def found_it(completion, answer, info=None, **kwargs) -> float:
    guesses = [_guess(_text(m)) for m in completion or [] if _role(m) == "assistant"]
    return 1.0 if int(answer) in guesses[:int(info["max_guesses"])] else 0.0


def rows(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        lo = rng.randint(1, 50)
        hi = lo + rng.randint(10, 60)
        out.append({"question": f"The number is between {lo} and {hi}.", "answer": str(rng.randint(lo, hi)),
                    "info": {"lo": lo, "hi": hi, "max_guesses": 7}})
    return out


def load_environment(max_turns: int = 14, say_range: bool = True, **kwargs) -> vf.Environment:
    return GuessEnv(dataset=Dataset.from_list(rows(0, 300)), eval_dataset=Dataset.from_list(rows(1, 60)),
                    system_prompt=SYSTEM_PROMPT, rubric=vf.Rubric(funcs=[found_it]), max_turns=max_turns,
                    say_range=say_range, **kwargs)
