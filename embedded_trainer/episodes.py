"""Multi-turn episodes, played by the environment's own rollout loop.

A multi-turn verifiers environment decides its episodes itself: `MultiTurnEnv.rollout` runs
its `setup_state`, checks its stop conditions (the turn limit `max_turns`, a
`final_env_response`, the env's own `@vf.stop` methods) before every turn, asks the model for
a reply, and answers with `env_response`. The embedded trainer does not copy that loop: it runs
it, handing each episode a verifiers Client (`StudentClient`) that answers from the student.
The replies of every live episode are sampled together, one batch per turn (`Turns`), so a
group of episodes costs what one batch of single-turn completions costs per turn.

What training needs comes from the trajectory verifiers records: each turn's prompt ids, the
sampled completion ids and their behaviour log-probs. An episode's sequence is its first prompt,
then each turn's completion (the model's tokens: mask 1, log-probs kept) and the tokens the next
turn's prompt adds (the env's feedback and the chat template's markers: mask 0), so the loss
and the log-probs see the model's own tokens only. Where a turn's prompt does not extend the
sequence so far (a chat template that re-renders earlier turns), the episode is trained on the
turns before it.

Tool-using environments (`tool_defs`: ToolEnv, StatefulToolEnv) are played the same way, as
vLLM serves them: where the env offers tools, each reply's text is parsed for tool calls as
vLLM's `hermes` tool parser parses it (rl_contract/tool_calls.py, which cites it: the Qwen2
family's format, `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; a malformed call
leaves the text as content and calls nothing), and the reply carries them as `tool_calls`. The
env runs its tools; their results come back as tool messages, which the student's chat template
renders (`<|tool|>...<|end|>`) into the next turn's prompt, masked like any env message. Where the
template renders a parsed call back differently from the text sampled (a call written with other
spacing, text after the call), the next prompt does not extend the sequence, and the episode is
trained on the turns before it.

Imports point one way: this module imports sampling.py (the sampler, `Scored`); rollouts.py
imports this one.
"""
from __future__ import annotations

import asyncio
import contextvars
import time

import torch

from embedded_trainer.sampling import Scored, render_prompt, sample
from rl_contract import tool_calls

_EPISODE: contextvars.ContextVar[int] = contextvars.ContextVar("episode")


def is_multi_turn(env) -> bool:
    """Is `env` one whose episodes the env plays (a MultiTurnEnv that is not single-turn)?"""
    import verifiers as vf

    return isinstance(env, vf.MultiTurnEnv) and not isinstance(env, vf.SingleTurnEnv)


class Turns:
    """The turn batcher: each live episode asks for one reply; once every live episode is
    waiting (or done), their prompts are sampled as one batch, in episode order (so a batch's
    random draws are the same in a resumed run)."""

    def __init__(self, model, tok, max_new: int, temperature: float, generator):
        self.model, self.tok, self.max_new = model, tok, max_new
        self.temperature, self.generator = temperature, generator
        self.pending: dict[int, tuple[list[int], asyncio.Future]] = {}
        self.gen_s = 0.0

    async def reply(self, prompt_ids: list[int]) -> dict:
        fut = asyncio.get_running_loop().create_future()
        self.pending[_EPISODE.get()] = (prompt_ids, fut)
        return await fut

    def flush(self) -> None:
        order = sorted(self.pending)
        batch = [self.pending.pop(e) for e in order]
        t0 = time.perf_counter()
        res = sample(self.model, [ids for ids, _ in batch], 1, self.max_new, self.temperature,
                     self.tok.eos_token_id, self.tok.pad_token_id, self.generator)
        self.gen_s += time.perf_counter() - t0
        for k, (_, fut) in enumerate(batch):
            n = int(res["lengths"][k])
            fut.set_result({"ids": res["tokens"][k, :n].tolist(), "logps": res["logps"][k, :n].tolist(),
                            "truncated": bool(res["truncated"][k])})

    async def drive(self, tasks: list[asyncio.Task]) -> None:
        """Let the episodes run; sample whenever every live one waits for the model."""
        while True:
            live = [t for t in tasks if not t.done()]
            if not live:
                return
            for _ in range(1000):   # an episode's own awaits (env_response, stop checks) run first
                await asyncio.sleep(0)
                live = [t for t in tasks if not t.done()]
                if len(self.pending) >= len(live):
                    break
            if live and self.pending and len(self.pending) >= len(live):
                self.flush()
            elif live:
                await asyncio.sleep(0.001)   # an episode awaits something else (the env's I/O)


def student_client(tok, turns: Turns, seq_len: int):
    """A verifiers Client whose model is the student: the prompt rendered with its chat template,
    one reply sampled through `turns`, returned with its token ids and log-probs (the
    trajectory keeps them). A prompt that leaves no room for a reply within `seq_len` raises
    verifiers' OverlongPromptError, which ends the episode as verifiers ends it."""
    import verifiers as vf
    from verifiers.types import Response, ResponseMessage, ResponseTokens, ToolCall

    class StudentClient(vf.Client):
        def setup_client(self, config):
            return None

        async def to_native_tool(self, tool):
            return tool

        async def to_native_prompt(self, messages):
            return [as_dict(m) for m in messages], {}

        async def get_native_response(self, prompt, model, sampling_args, tools=None, **kwargs):
            ids = render_prompt(tok, prompt)
            if len(ids) + 1 > seq_len:
                raise vf.OverlongPromptError(f"{len(ids)} prompt tokens leave no room within seq_len {seq_len}")
            got = await turns.reply(ids)
            room = seq_len - len(ids)
            return {"prompt_ids": ids, "ids": got["ids"][:room], "logps": got["logps"][:room],
                    "truncated": got["truncated"] or len(got["ids"]) > room, "tools": bool(tools),
                    "turn": len([m for m in prompt if m.get("role") == "assistant"])}

        async def raise_from_native_response(self, response):
            return None

        async def from_native_response(self, r):
            ids = r["ids"]
            text_ids = ids[:-1] if ids and ids[-1] == tok.eos_token_id else ids
            text = tok.decode(text_ids, skip_special_tokens=False)
            content, calls = tool_calls.parse(text) if r["tools"] else (text, [])
            return Response(id="student", created=int(time.time()), model="student", message=ResponseMessage(
                content=content, tool_calls=[ToolCall(id=f"call_{r['turn']}_{k}", name=c["name"],
                                                      arguments=c["arguments"]) for k, c in enumerate(calls)] or None,
                finish_reason=("tool_calls" if calls else "length" if r["truncated"] else "stop"),
                is_truncated=r["truncated"],
                tokens=ResponseTokens(prompt_ids=r["prompt_ids"], prompt_mask=[0] * len(r["prompt_ids"]),
                                      completion_ids=ids, completion_mask=[1] * len(ids),
                                      completion_logprobs=r["logps"])))

        async def close(self):
            return None

    return StudentClient(None)


def as_dict(message) -> dict:
    """A message as a plain dict the chat template renders (verifiers keeps pydantic messages):
    {role, content}, with an assistant's tool calls and a tool message's call id where present."""
    return tool_calls.as_dict(message)


def sequence(prompt_ids: list[int], trajectory) -> tuple[list[int], list[int], list[float]]:
    """(tokens after the prompt, their mask: 1 on the model's own tokens, their behaviour
    log-probs: 0 elsewhere) from a rollout's trajectory, as far as each turn's prompt extends
    the sequence before it."""
    seq, mask, logps = list(prompt_ids), [0] * len(prompt_ids), [0.0] * len(prompt_ids)
    for step in trajectory:
        t = step.get("tokens")
        if not t or list(t["prompt_ids"][:len(seq)]) != seq:
            break
        added = list(t["prompt_ids"][len(seq):])
        seq += added + list(t["completion_ids"])
        mask += [0] * len(added) + [1] * len(t["completion_ids"])
        logps += [0.0] * len(added) + [float(x) for x in t["completion_logprobs"]]
    n = len(prompt_ids)
    return seq[n:], mask[n:], logps[n:]


def play_and_score(model, tok, prompts: list[list[int]], envs: list, rows: list[dict], group: int,
                   max_new: int, temperature: float, generator, seq_len: int):
    """`group` episodes per prompt (prompt i is rows[i] of envs[i], rendered), each played by its
    env's own rollout loop and scored by its rubric over the whole episode. Returns a Scored
    batch whose tokens are everything after the prompt and whose mask marks the model's tokens."""
    turns = Turns(model, tok, max_new, temperature, generator)
    client = student_client(tok, turns, seq_len)
    n = len(prompts) * group
    states: list = [None] * n
    score_ms = [0.0] * n

    async def one(k: int):
        _EPISODE.set(k)
        row, env = rows[k // group], envs[k // group]
        state = await env.rollout({"prompt": row["prompt"], "example_id": row["example_id"],
                                   "answer": row.get("answer", ""), "info": row.get("info") or {}},
                                  client, "student", {})
        t0 = time.perf_counter()
        await env.rubric.score_rollout(state)
        await env.rubric.cleanup(state)
        score_ms[k] = (time.perf_counter() - t0) * 1000
        states[k] = state

    async def run():
        tasks = [asyncio.ensure_future(one(k)) for k in range(n)]
        await turns.drive(tasks)
        await asyncio.gather(*tasks)

    t0 = time.perf_counter()
    asyncio.run(run())
    total_s = time.perf_counter() - t0
    seqs = [sequence(prompts[k // group], states[k].get("trajectory") or []) for k in range(n)]
    width = max([1] + [len(s) for s, _, _ in seqs])
    tokens = torch.full((n, width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.bool)
    logps = torch.zeros((n, width), dtype=torch.float32)
    for k, (s, m, lp) in enumerate(seqs):
        tokens[k, :len(s)] = torch.tensor(s, dtype=torch.long)
        mask[k, :len(m)] = torch.tensor(m, dtype=torch.bool)
        logps[k, :len(lp)] = torch.tensor(lp, dtype=torch.float32)
    scores, texts, truncated = [], [], []
    for k, st in enumerate(states):
        completion = [as_dict(m) for m in (st.get("completion") or [])]
        texts.append("\n".join(reply_text(m) for m in completion if m["role"] == "assistant"))
        truncated.append(bool(st.get("is_truncated")))
        scores.append({"reward": float(st["reward"] or 0.0), "metrics": dict(st.get("metrics") or {}),
                       "scoring_ms": score_ms[k], "completion": completion,
                       "stop_condition": st.get("stop_condition"),
                       "error": None if st.get("error") is None else repr(st.get("error"))[:300]})
    return Scored(tokens, mask.sum(1), logps, truncated, texts, scores, turns.gen_s,
                  max(0.0, total_s - turns.gen_s), mask=mask)


def reply_text(message: dict) -> str:
    """An assistant message as the model wrote it: its text, then its tool calls in the format
    it writes them (rl_contract/tool_calls.py)."""
    calls = "".join(tool_calls.render(c["name"], c["arguments"]) for c in tool_calls.message_calls(message))
    return (message.get("content") or "") + calls
