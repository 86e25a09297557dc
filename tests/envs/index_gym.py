"""A classic env that scores against its own data, as verifiers' ReasoningGymEnv does, without the
reasoning_gym package (tests/test_ground_truth_outside_row.py).

IndexEnv builds a procedural dataset object of its own (`rg_dataset`: `len`, `__getitem__` by
index, `score_answer(answer, entry)`, entries `{"question", "answer", "metadata"}` whose metadata
differs in shape between its two tasks). Its rows' `answer` is the entry's index as a string,
and its reward looks the entry up by that index and hands it to score_answer: a row's answer
is no ground truth, the env's data is. Like ReasoningGymEnv, its class builds its own data and
takes no `dataset` argument. `scorer="hidden"`: the same reward, but the dataset object is held
under a name-mangled attribute with no score_answer (an env that exposes no scorer).
`bounded=False`: an index past the dataset still gives an entry, as in reasoning-gym.
"""
import random

import verifiers as vf
from datasets import Dataset

SYSTEM_PROMPT = "Answer the task. Give only the final answer inside <answer>...</answer>."
WORDS = ["lantern", "orbit", "meadow", "quartz", "harbor", "violet", "canyon", "ember"]


class ProceduralSet:
    """Entries made from (seed, index) alone; an index outside [0, size) is an IndexError, or,
    with bounded=False, an entry like any other (as reasoning-gym's procedural datasets do)."""

    def __init__(self, size: int, seed: int = 0, bounded: bool = True):
        self.size, self.seed, self.bounded = size, seed, bounded

    def __len__(self):
        return self.size

    def __getitem__(self, idx: int) -> dict:
        if self.bounded and not 0 <= idx < self.size:
            raise IndexError(f"index {idx} out of range for a dataset of {self.size}")
        rng = random.Random(self.seed * 1_000_003 + idx)
        if rng.random() < 0.5:
            terms = [rng.randint(10, 99) for _ in range(rng.randint(2, 4))]
            return {"question": "Add: " + " + ".join(map(str, terms)), "answer": str(sum(terms)),
                    "metadata": {"source_dataset": "sums", "terms": terms}}
        word = rng.choice(WORDS)
        return {"question": f"Spell '{word}' backwards.", "answer": word[::-1],
                "metadata": {"source_dataset": "reversal", "word": word, "length": len(word)}}

    def __iter__(self):
        return (self[i] for i in range(self.size))

    def score_answer(self, answer, entry: dict) -> float:
        """1 for the answer; 0.5 for a sum off by one or a reversal right but for case; else 0."""
        if answer is None:
            return 0.0
        meta = entry["metadata"]
        if meta["source_dataset"] == "sums":
            try:
                got = int(str(answer).strip())
            except ValueError:
                return 0.0
            want = sum(meta["terms"])
            return 1.0 if got == want else 0.5 if abs(got - want) == 1 else 0.0
        if answer == entry["answer"]:
            return 1.0
        return 0.5 if str(answer).lower() == meta["word"][::-1] else 0.0


class _Hidden:
    def __init__(self, data: ProceduralSet):
        self._data = data

    def __getitem__(self, idx):
        return self._data[idx]


class IndexEnv(vf.SingleTurnEnv):
    def __init__(self, num_train_examples: int = 200, num_eval_examples: int = 50,
                 system_prompt: str = SYSTEM_PROMPT, parser: vf.Parser | None = None, seed: int = 0,
                 scorer: str = "exposed", bounded: bool = True):
        data = ProceduralSet(num_train_examples + num_eval_examples, seed, bounded)
        if scorer == "hidden":
            self.__store = _Hidden(data)
        else:
            self.rg_dataset = data
        parser = parser or vf.XMLParser(fields=["answer"])
        rubric = vf.Rubric(parser=parser)

        async def check_answer_reward_func(completion, answer, **kwargs) -> float:
            entry = data[int(answer)]
            response = str(parser.parse_answer(completion)).strip()
            return data.score_answer(answer=response, entry=entry)

        rubric.add_reward_func(check_answer_reward_func)
        rubric.add_reward_func(parser.get_format_reward_func(), weight=0.0)
        rows = [{"question": x["question"], "answer": str(i), "info": {"source_dataset": x["metadata"]["source_dataset"]}}
                for i, x in enumerate(data)]
        super().__init__(dataset=Dataset.from_list(rows[:num_train_examples]),
                         eval_dataset=Dataset.from_list(rows[num_train_examples:]),
                         system_prompt=system_prompt, parser=parser, rubric=rubric, message_type="chat")
        self.parser = parser
        self.rubric = rubric


def load_environment(**kwargs) -> vf.Environment:
    return IndexEnv(**kwargs)
