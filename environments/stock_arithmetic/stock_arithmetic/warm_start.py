"""A warm-start corpus for a student of StockArithmetic-v1: a stream of fresh problems, each with
its worked reference completion (what the embedded trainer's tiny student learns to read and
compute from, before any RL).

No problem of any hub split (train, validation, test) of the env built with `env_seed` (the
default env is seed 0), nor a permutation of one, is ever emitted: the keys of all three splits
are excluded after normalisation.

Options, each documented where a recipe names it (`c_<option>`):
- `three_digit_share`: the share of problems whose running stock reaches 100 or more (about 18%
  of the train split's problems do, and 55% of the test split's, most of them in its OOD100
  half). A small share plants a documented weakness: a student warm-started on it solves
  such problems sometimes, not never. Negative keeps the natural share.
- `wide_share`: the share of problems drawn with operands up to 100 instead of the train
  split's 50.
- `mixed_share`: the share of problems worded in the corpus's own ledger grammar (many
  openings, verbs, nouns and questions, movements always in chronological order) instead of
  the hub's own wording. A student that has read only the hub's eight items and seven places
  cannot read a question worded any other way; one that has read the grammar can.
- `peak_habit_share` with `peak_habit_from`: a planted *habit* rather than a missing skill. Of
  the problems whose day's peak stock (after both deliveries) is at least `peak_habit_from`,
  this share carry a worked answer whose chain is right but whose JSON reports the peak
  instead of the closing stock. A student warm-started on it knows both answers and mostly
  gives the wrong one there, and only there: the kind of weakness RL is known to fix (pick the
  right one of two things the student can already write), visible in train rollouts as
  failures on large stocks. 0 (the default) plants nothing.
"""
from __future__ import annotations

import json
import random

from .data import build_splits, generate_problem, make_row, reference_completion
from .verifier import normalized_problem


def peak_stock(problem: dict) -> int:
    """The running stock peaks after the two deliveries."""
    return problem["initial"] + sum(problem["deliveries"])


def reaches_three_digits(problem: dict) -> bool:
    return peak_stock(problem) >= 100


def peak_answer_completion(problem: dict) -> str:
    """The worked chain done right, then the peak stock as the answer: the planted habit."""
    right = reference_completion(problem)
    chain = right[:right.index("</think>") + len("</think>")]
    return chain + json.dumps({"final_stock": peak_stock(problem)})


# The corpus's own grammar. It is deliberately broader than the hub's wording (nouns of every
# length, one or several sentences per movement, many questions) so that what a student learns
# is "the numbers, in order", not where the hub's template puts them.
PLACES = ["warehouse", "corner shop", "depot", "school kitchen", "boat yard", "garden centre",
          "hardware store", "clinic", "market stall", "museum shop", "farm", "office",
          "hotel", "pharmacy", "toy shop", "stadium kiosk", "camp", "workshop", "cellar",
          "print room", "station", "village hall", "studio", "barn", "lab", "store"]
ITEMS = ["crates", "boxes", "parcels", "bags of sand", "jars", "candles", "chairs", "tiles",
         "sacks of grain", "bottles of oil", "rolls of paper", "cans", "helmets", "kites",
         "mugs", "bricks", "baskets of eggs", "packs of cards", "pens", "blankets", "tools",
         "spools of thread", "buckets", "maps", "plates", "bolts"]
NAMES = ["Ada", "Ben", "Cleo", "Dev", "Esme", "Finn", "Gita", "Hugo", "Ines", "Jack", "Kofi",
         "Lena", "Milo", "Noor", "Olga", "Pavel", "Ruth", "Sami", "Tess", "Umar", "Vera", "Wen"]
OPENINGS = [
    "{Place} starts the day with {n0} {item}.",
    "The {place} opens with {n0} {item} in stock.",
    "At the {place} there are {n0} {item} this morning.",
    "{Name} counts {n0} {item} at the {place}.",
    "In the morning the {place} holds {n0} {item}.",
    "The ledger of the {place} begins at {n0} {item}.",
    "Stock check: the {place} has {n0} {item}.",
    "{Name} keeps the {place}, which starts with {n0} {item}.",
]
DELIVERIES = [
    "A first delivery brings {a} {item}, and a second delivery brings {b} more.",
    "Then {a} {item} arrive, followed by {b} more.",
    "A van drops off {a} {item}. Later another {b} come in.",
    "Deliveries add {a} {item} and then {b} {item}.",
    "{Name} receives {a} {item}, then {b} more.",
    "First {a} {item} are delivered; next {b} are delivered.",
    "A supplier sends {a} {item}, and a second supplier sends {b}.",
]
WITHDRAWALS = [
    "Then {c} {item} are taken out, and later another {d} are taken out.",
    "Next {c} {item} are sold, and {d} more are sold later.",
    "Customers take {c} {item}. After that {d} {item} leave.",
    "{Name} ships {c} {item}, then ships {d} more.",
    "Orders remove {c} {item} and then {d} {item}.",
    "First {c} {item} go out; later {d} go out.",
    "{c} {item} are used, and then {d} more are used.",
]
QUESTIONS = [
    "How many are in stock at the end of the day?",
    "How many {item} are left?",
    "What is the final stock?",
    "How many {item} remain at closing?",
    "What does the ledger show at the end?",
    "How many {item} does the {place} hold now?",
]


def render_mixed(problem: dict, rng: random.Random) -> str:
    place, item, name = rng.choice(PLACES), rng.choice(ITEMS), rng.choice(NAMES)
    fill = {"place": place, "Place": "The " + place if rng.random() < 0.5 else "A " + place,
            "item": item, "Name": name, "n0": problem["initial"],
            "a": problem["deliveries"][0], "b": problem["deliveries"][1],
            "c": problem["withdrawals"][0], "d": problem["withdrawals"][1]}
    parts = [rng.choice(OPENINGS), rng.choice(DELIVERIES), rng.choice(WITHDRAWALS),
             rng.choice(QUESTIONS)]
    return " ".join(p.format(**fill) for p in parts)


def warm_start_corpus(count: int, seed: int = 0, three_digit_share: float = -1.0,
                      wide_share: float = 0.0, mixed_share: float = 0.0,
                      peak_habit_share: float = 0.0, peak_habit_from: float = 100,
                      env_seed: int = 0) -> list[dict]:
    """`count` rows shaped like the hub's train rows (prompt, answer, info with a
    reference_completion), drawn fresh from `seed`."""
    from . import SYSTEM_PROMPT

    held = {normalized_problem(r["info"]["problem"]) for rows in build_splits(int(env_seed)).values()
            for r in rows}
    rng, text_rng = random.Random(f"warm-start|{seed}"), random.Random(f"warm-text|{seed}")
    # the grammar draws from its own stream, so a corpus without it (mixed_share 0) is exactly
    # the stream that earlier students were built from
    mixed_rng = random.Random(f"warm-mixed|{seed}")
    # likewise: no habit, the same stream. Its name picks which rows carry the habit, so it is
    # part of the shipped demo student's recipe: renamed, the same recipe builds another student
    # (README, "Lift research", on how much that moves the anchor)
    habit_rng = random.Random(f"slip|{seed}")
    out: list[dict] = []
    while len(out) < count:
        wide = rng.random() < wide_share
        want_three = rng.random() < three_digit_share if three_digit_share >= 0 else None
        while True:
            p = generate_problem(rng, 100 if wide else 50)
            if normalized_problem(p) in held:
                continue
            if want_three is None or reaches_three_digits(p) == want_three:
                break
        row = make_row(p, "OOD100" if wide else "ID50", "warm_start", text_rng)
        if (peak_habit_share > 0 and peak_stock(p) >= peak_habit_from
                and habit_rng.random() < peak_habit_share):
            row["info"]["reference_completion"] = peak_answer_completion(p)
        question = row.pop("question")
        if mixed_share > 0 and mixed_rng.random() < mixed_share:
            question = render_mixed(p, mixed_rng)
        row["prompt"] = [{"role": "system", "content": SYSTEM_PROMPT},
                         {"role": "user", "content": question}]
        out.append(row)
    return out
