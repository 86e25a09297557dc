"""What the driver reads from an introspected hub env's description (hub_env.json, as
introspect.py writes it): its kind, how its episodes go, the answer format its system prompt
states, the requirement a generated env declares for it, and whether a reward that reads the
env's own state can be scored from a generated row. Plain dict reading: nothing is loaded."""
from __future__ import annotations

import re

from driver.envs import envside
from driver.errors import DriverError

CLASSIC = envside.CLASSIC    # hub_env.json `kind` of a classic env; tasksets.KIND for a v1 taskset


def kind_of(hub: dict) -> str:
    return hub.get("kind") or CLASSIC


def multi_turn(hub: dict | None) -> bool:
    """Whether the hub env's episodes are multi-turn (hub_env.json's interaction kind): a
    generated row's info.reasoning is then its list of replies, one per turn."""
    return ((hub or {}).get("interaction") or {}).get("kind") == "multi_turn"


def interaction_line(hub: dict) -> str:
    """How the env's episodes go, in one line (`driver introspect`, the run header)."""
    it = hub.get("interaction")
    if not it:
        return "episodes: not recorded (a v1 taskset, or a hub_env.json from before they were)"
    words = {"single_turn": "single-turn (one reply, scored)",
             "multi_turn": "multi-turn (the env answers each reply until it stops the episode)",
             "tools": "tool-using (the env runs the model's tool calls until it stops)"}
    line = f"episodes: {words.get(it['kind'], it['kind'])}"
    if it["kind"] == "single_turn":
        return line
    limit = it.get("max_turns")
    line += (f"; max_turns {limit}" if isinstance(limit, int) and limit > 0 else "; no turn limit")
    if kind_of(hub) != CLASSIC:
        # a taskset's turns are its agent's: the driver's null-harness agent sets no max_turns
        line += " (the agent's max_turns, which the driver leaves unset)"
        return line + (f"; tools: {', '.join(it['tools'])}" if it.get("tools") else "")
    if it.get("env_response"):
        line += f"; env_response of {it['env_response']}"
    own = [c for c in it.get("stop_conditions") or [] if c not in VERIFIERS_STOPS]
    if own:
        line += f"; its own stop conditions: {', '.join(own)}"
    if it.get("tools"):
        line += f"; tools: {', '.join(it['tools'])}"
    keys = it.get("env_info_keys_read")
    line += ("; info keys its episode logic reads: " + (", ".join(keys) if keys else "none found")
             if keys is not None else "; info keys its episode logic reads: unknown (a sample episode did not play)")
    return line


def context_lines(hub: dict, positions: int | None, seq_len: int, max_new: int,
                  chars: bool) -> tuple[str | None, str | None]:
    """(the student's context stated beside the env's turn limit, a warning where it cannot hold
    a full episode), for a multi-turn env; (None, None) for a single-turn one. The context is
    the smaller of --seq-len and the student's positions (`positions`, where known). A full
    episode takes at least max_turns replies at the reply limit (`max_new`) and, where the
    student's tokens are characters (`chars`: the built-in student), the prompt; the env's own
    messages come on top. An episode that outgrows the context ends `prompt_too_long`."""
    it = hub.get("interaction") or {}
    if it.get("kind") in (None, "single_turn"):
        return None, None
    context = min(seq_len, positions) if positions else seq_len
    source = (f"the student's {positions} positions" if positions and positions <= seq_len
              else f"--seq-len {seq_len}")
    line = f"student context: {context} tokens ({source})"
    turns = it.get("max_turns")
    if not (isinstance(turns, int) and turns > 0):
        return line + ("; the env sets no turn limit, so the context ends a long episode "
                       "(prompt_too_long)"), None
    prompt = prompt_chars(hub) if chars else 0
    need = turns * max_new + prompt
    line += (f" beside the env's max_turns {turns}: {turns} replies at the reply limit "
             f"({max_new}) take {turns * max_new}" + (f" and the prompt about {prompt}" if prompt else "")
             + (f", leaving {context - need} for the env's messages (about {(context - need) // turns} "
                "a turn)" if need < context else "")
             + "; an episode that outgrows the context ends prompt_too_long, before the turn limit")
    if need <= context:
        return line, None
    return line, (f"warning: the student's context ({context} tokens) cannot hold a full episode of "
                  f"{turns} turns: {turns} replies at the reply limit of {max_new} tokens"
                  + (f" and a prompt of about {prompt}" if prompt else "") + f" take {need}, before "
                  "the env's messages. Episodes that run long end prompt_too_long and score as "
                  "losses whatever the student plays. Use a student with a longer context (the "
                  "built-in student's max_positions, --seq-len), a smaller --max-completion-tokens, "
                  "or an env with fewer turns.")


def prompt_chars(hub: dict) -> int:
    """The longest sample prompt's length in characters (system prompt and question), with the
    chat template's role markers: the built-in student's tokens are characters."""
    questions = [len(str(r.get("question") or "")) for r in hub.get("sample_train_rows") or []]
    return len(hub.get("system_prompt") or "") + max(questions, default=0) + 6


# the stop conditions every classic MultiTurnEnv has (verifiers 0.3.1's multiturn_env.py)
VERIFIERS_STOPS = {"has_error", "has_final_env_response", "max_total_completion_tokens_reached",
                   "max_turns_reached", "prompt_too_long"}
_FORMAT_WORDS = re.compile(r"json|format|answer|reply|respond|tag|<|box|exactly", re.IGNORECASE)


def answer_format_instruction(system_prompt: str) -> str:
    """The sentences of the system prompt that state the answer format."""
    sentences = re.split(r"(?<=[.!?])\s+", system_prompt.strip())
    return " ".join(s for s in sentences if _FORMAT_WORDS.search(s)).strip()


def hub_requirement(hub: dict) -> str:
    """The requirement a generated env declares for the hub env it loads by id: the hub env's
    distribution (hub_env.json's `distribution`, read where it is installed), else its id. A
    platform that installs envs from their wheels' requirements (the Environments Hub's `env
    push` sends them) then installs the hub env with it."""
    dist = hub.get("distribution") or {}
    return str(dist.get("name") or hub["env_id"])


def row_truth(hub: dict) -> dict | None:
    """hub_env.json's reward_reads_env_state when a reward reads the env's own state and the env
    holds a scorer: the generated env scores that reward from the row's info.entry."""
    record = hub.get("reward_reads_env_state") or {}
    return record if record.get("verdict") == "yes" and record.get("scorer") else None


def refuse_unscorable(hub: dict) -> None:
    """Stop before iter_0 when a reward reads the env's own state and the env exposes no scorer
    a generated env could call instead: no generated row could be scored."""
    record = hub.get("reward_reads_env_state") or {}
    if record.get("verdict") == "yes" and not record.get("scorer"):
        raise DriverError(
            f"{hub['env_id']}'s reward ({', '.join(record.get('funcs') or [])}) reads the env's own state, "
            f"not the row: {record.get('evidence', '')}. Rows a teacher writes cannot be scored by it. A "
            "generated env scores such a reward through the env's own scorer: the env needs an attribute "
            "holding an object with score_answer(answer, entry) (answer: the completion as the hub's "
            "parser parses it; entry: a row's ground truth, which a generated row carries as info.entry), "
            "as ReasoningGymEnv's rg_dataset has. Give the env such an attribute, or use an env whose "
            "reward scores from the row, and start the run again.", exit_code=2)
