"""A tool-using classic env (verifiers' ToolEnv) for the tests: the model looks a word's code up
with the `lookup` tool and answers it. Its episodes go on while the model calls tools, so a
trainer that cannot parse tool calls cannot play it."""
import verifiers as vf
from datasets import Dataset

CODES = {"apple": "A1", "pear": "P2", "plum": "P3", "fig": "F4"}


def lookup(word: str) -> str:
    """The code of a word."""
    return CODES.get(word, "unknown")


def correct(completion, answer, **kwargs) -> float:
    text = "".join(getattr(m, "content", None) or (m.get("content") if isinstance(m, dict) else "") or ""
                   for m in completion or [])
    return 1.0 if answer in text else 0.0


def load_environment(**kwargs) -> vf.Environment:
    rows = [{"question": f"What is the code of {w}? Use the lookup tool.", "answer": c}
            for w, c in CODES.items()] * 10
    return vf.ToolEnv(tools=[lookup], dataset=Dataset.from_list(rows), eval_dataset=Dataset.from_list(rows[:8]),
                      rubric=vf.Rubric(funcs=[correct]), max_turns=4, **kwargs)
