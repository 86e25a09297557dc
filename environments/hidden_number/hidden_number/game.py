"""The game itself, with no verifiers in it: the rows, one turn of feedback, and a reference
player. The environment (classic.py), its warm-start corpus and its family generator
(generators/hidden_number.py) all play through `feedback`, so they cannot disagree on a rule.

A row is a range [lo, hi], a hidden number in it (the row's answer) and a guess budget. Each turn
the player guesses; the env answers Higher or Lower with the range that is left, flags a guess
outside that range or a reply it cannot read (each still costs a guess), and ends the game on
the right number or when the budget is spent.
"""
from __future__ import annotations

import math
import random
import re

SYSTEM_PROMPT = "Find the hidden number. Reply with one guess per turn as <guess>N</guess>."
GUESS = re.compile(r"<guess>\s*(-?\d+)\s*</guess>")
MIN_WIDTH, MAX_WIDTH = 5, 40      # how many numbers a range holds
MAX_LO = 30                       # the lowest number a range can start from


def parse_guess(text: str | None) -> int | None:
    """The first <guess>N</guess> of a reply, or None."""
    m = GUESS.search(text or "")
    return int(m.group(1)) if m else None


def needed(width: int) -> int:
    """Guesses that halving the range always finds the number in."""
    return max(1, math.ceil(math.log2(width + 1)))


def feedback(guess: int | None, secret: int, lo: int, hi: int) -> tuple[int, int, str, bool]:
    """One turn: (the range left, the env's reply, whether the number was found)."""
    if guess is None:
        return lo, hi, f"No guess read. Reply with <guess>N</guess>, N from {lo} to {hi}.", False
    if guess < lo or guess > hi:
        return lo, hi, f"{guess} is out of range: the number is from {lo} to {hi}.", False
    if guess == secret:
        return guess, guess, "Correct!", True
    if guess < secret:
        return guess + 1, hi, f"Higher: from {guess + 1} to {hi}.", False
    return lo, guess - 1, f"Lower: from {lo} to {guess - 1}.", False


# The question's wording: what is hidden, how the game is opened, and how the range and the
# budget are put, and how it closes (the range always reads "from LO to HI", as the env's replies
# do). 30,720 wordings, so rows that differ only in their numbers are still told apart by their
# words (the dataset gate's clone rule).
THINGS = ["a locker code", "a page of a book", "a seat number", "a raffle ticket", "a house number",
          "a jersey number", "a room on the floor", "a lottery ball", "a parking spot", "a bus route",
          "a dice total", "a card in the deck", "a track on the album", "a box on the shelf",
          "a floor of the tower", "a row in the theatre", "a hole on the course", "a cabin on the ship",
          "a stall at the market", "a platform at the station", "a tile on the board", "a coin in the jar",
          "a key on the ring", "a step of the stairs", "a drawer in the cabinet", "a bed in the ward",
          "a lane in the pool", "a stop on the line", "a chapter of the story", "a gate at the airport",
          "a pier in the harbour", "a tent at the camp", "a bench in the park", "a desk in the class",
          "a bin in the yard", "a candle on the cake", "a bead on the string", "a peg on the wall",
          "a slot in the rack", "a mark on the ruler"]
OPENERS = ["Guess {thing}.", "I picked {thing}.", "Find {thing}.", "Someone hid {thing}.",
           "Think of {thing}.", "Track down {thing}."]
RANGES = ["It is from {lo} to {hi}.", "It lies from {lo} to {hi}.", "Range: from {lo} to {hi}.",
          "Somewhere from {lo} to {hi}."]
BUDGETS = ["You have {g} guesses.", "{g} guesses allowed.", "Budget: {g} guesses.",
           "At most {g} guesses."]
CLOSERS = ["", "Good luck.", "Go.", "Start now.", "Your turn.", "Begin.", "Ready?", "Off you go."]


def question(lo: int, hi: int, max_guesses: int, rng: random.Random) -> str:
    parts = [rng.choice(OPENERS).format(thing=rng.choice(THINGS)), rng.choice(RANGES).format(lo=lo, hi=hi),
             rng.choice(BUDGETS).format(g=max_guesses), rng.choice(CLOSERS)]
    return " ".join(p for p in parts if p)


def make_row(lo: int, hi: int, secret: int, max_guesses: int, rng: random.Random, **info) -> dict:
    return {"question": question(lo, hi, max_guesses, rng), "answer": str(secret),
            "info": {"lo": lo, "hi": hi, "max_guesses": max_guesses, **info}}


def draw(rng: random.Random) -> dict:
    """A row of the hub's distribution: a budget of exactly what halving needs, or one more."""
    width = rng.randint(MIN_WIDTH, MAX_WIDTH)
    lo = rng.randint(1, MAX_LO)
    hi = lo + width - 1
    return make_row(lo, hi, rng.randint(lo, hi), needed(width) + rng.randint(0, 1), rng)


def halving_moves(lo: int, hi: int, secret: int, max_guesses: int) -> list[str]:
    """The reference player: the middle of the range left, each turn, until found or out of
    guesses. Its replies, one per turn."""
    moves = []
    while len(moves) < max_guesses:
        g = (lo + hi) // 2
        moves.append(f"<guess>{g}</guess>")
        lo, hi, _, found = feedback(g, secret, lo, hi)
        if found:
            break
    return moves


def play(moves: list[str], lo: int, hi: int, secret: int, max_guesses: int) -> list[dict]:
    """The messages after the prompt when `moves` are played (the env's replies between them,
    as the env writes them): a reference trajectory."""
    out: list[dict] = []
    for k, move in enumerate(moves[:max_guesses]):
        out.append({"role": "assistant", "content": move})
        lo, hi, reply, found = feedback(parse_guess(move), secret, lo, hi)
        if found or k == max_guesses - 1:
            break
        out.append({"role": "user", "content": reply})
    return out


def splits(seed: int = 0, n_train: int = 2000, n_test: int = 200) -> dict[str, list[dict]]:
    """Disjoint train and test rows (no (range, number, budget) in both)."""
    rng = random.Random(f"hidden-number|{seed}")
    seen: set = set()
    out: dict[str, list[dict]] = {"train": [], "test": []}
    for name, n in (("test", n_test), ("train", n_train)):
        while len(out[name]) < n:
            row = draw(rng)
            key = (row["info"]["lo"], row["info"]["hi"], row["answer"], row["info"]["max_guesses"])
            if key in seen:
                continue
            seen.add(key)
            out[name].append(row)
    return out


def warm_start_corpus(count: int, seed: int = 0, slip_share: float = 0.0, env_seed: int = 0) -> list[dict]:
    """`count` rows shaped like the train rows, drawn fresh (none of either split), each with a
    reference trajectory (`info.reference_trajectory`: the halving player's replies and the env's
    feedback between them). `slip_share` of them start with a guess at the range's low end
    instead of its middle, so a student warm-started on them does not always halve."""
    held = {(r["info"]["lo"], r["info"]["hi"], r["answer"]) for rows in splits(env_seed).values()
            for r in rows}
    rng = random.Random(f"hidden-number-warm|{seed}")
    out: list[dict] = []
    while len(out) < count:
        row = draw(rng)
        i = row["info"]
        if (i["lo"], i["hi"], row["answer"]) in held:
            continue
        secret = int(row["answer"])
        moves = halving_moves(i["lo"], i["hi"], secret, i["max_guesses"])
        if rng.random() < slip_share and int(row["answer"]) != i["lo"]:
            lo, hi, _, _ = feedback(i["lo"], secret, i["lo"], i["hi"])
            moves = [f"<guess>{i['lo']}</guess>"] + halving_moves(lo, hi, secret, i["max_guesses"] - 1)
        traj = play(moves, i["lo"], i["hi"], secret, i["max_guesses"])
        out.append({"prompt": [{"role": "system", "content": SYSTEM_PROMPT},
                               {"role": "user", "content": row["question"]}],
                    "answer": row["answer"], "info": {**i, "reference_trajectory": traj}})
    return out
