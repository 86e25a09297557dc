"""A toy verifiers environment for trainer tests: "<n> even?" -> "yes" / "no".

Short prompts and 2-3 token answers keep a real GRPO step well under a second, and a barely
warm-started model answers both ways, so groups carry reward variance (a real gradient).
Train: n % 5 != 0; eval: n % 5 == 0 (disjoint by construction).
"""
import verifiers as vf
from datasets import Dataset


def _row(n: int, with_reference: bool = True) -> dict:
    answer = "yes" if n % 2 == 0 else "no"
    info = {"n": n, "reference_completion": answer} if with_reference else {"n": n}
    return {"question": f"{n} even?", "answer": answer, "info": info}


def exact(completion, answer, **kwargs) -> float:
    text = completion[-1]["content"] if isinstance(completion, list) else completion
    return 1.0 if (text or "").strip() == answer else 0.0


def load_environment(with_reference: bool = True, **kwargs) -> vf.Environment:
    train = [_row(n, with_reference) for n in range(1000) if n % 5]
    evals = [_row(n, with_reference) for n in range(1000) if n % 5 == 0]
    parser = vf.Parser()
    return vf.SingleTurnEnv(dataset=Dataset.from_list(train), eval_dataset=Dataset.from_list(evals),
                            parser=parser, rubric=vf.Rubric(funcs=[exact], weights=[1.0], parser=parser),
                            **kwargs)
