"""The LLM teacher: one chat call per attempt to an OpenAI-compatible endpoint or Anthropic's
Messages API.

The prompt is rendered from templates/teacher_llm/ out of the Brief alone (train rollouts,
hub_env.json, prior reports, eval accuracies as numbers, the gate's last lines), so nothing from
an eval rollout can reach it. The reply carries the four files between `<<<FILE name>>>` and
`<<<END FILE>>>` markers; a reply missing one is re-asked (up to MAX_FORMAT_RETRIES) before the
attempt fails. A gate rejection comes back through the phase machine: the next attempt's prompt
carries the gate's lines and the rejected script. Tokens and cost go to teacher_usage.json,
which the iteration's metrics entry carries.
"""
from __future__ import annotations

import json
import os
import re
import time

from driver import resources
from driver.errors import DriverError
from driver.gates import hparams, rules
from driver.run.files import atomic_write_json, atomic_write_text, read_json
from driver.teachers import OUTPUTS, Brief, outputs_present
from driver.run.arm_files import ArmFiles, rejected

MAX_FORMAT_RETRIES = 2
PROMPT_ROWS = 60            # failed rows shown in full-ish form; the rest are counted only
FIELD_CHARS = 700           # each prompt/completion/info is cut to this many characters
# files a reply may add: this iteration's hyperparameters (checked with the dataset gate)
OPTIONAL = (ArmFiles.HPARAMS, ArmFiles.AUX_REWARDS)
_FILE = re.compile(r"<<<FILE\s+([\w.\-]+)\s*>>>\n?(.*?)\n?<<<END FILE>>>", re.S)


def parse_files(text: str) -> dict[str, str]:
    """The files of a reply, by name; only the four outputs are kept."""
    return {name: body.rstrip() + "\n" for name, body in _FILE.findall(text)
            if name in OUTPUTS or name in OPTIONAL}


def _clip(value, n: int = FIELD_CHARS) -> str:
    if isinstance(value, list):   # chat messages: the user's turn is the problem
        msgs = [m for m in value if isinstance(m, dict) and m.get("role") != "system"]
        # an episode's messages keep their roles: whose turn said what
        value = " ".join((f"[{m.get('role')}] " if len(msgs) > 1 else "") + str(m.get("content", ""))
                         for m in msgs)
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + " …"


def render_prompt(brief: Brief) -> tuple[str, str]:
    """(system, user) for this attempt. Only Brief fields go in: never an eval rollout."""
    env = resources.jinja()
    rows = brief.failures()
    shown = [{"idx": r.get("idx", i), "step": r.get("step"), "reward": r.get("reward"),
              "turns": r.get("turns"), "stop_condition": r.get("stop_condition"),
              "prompt": _clip(r.get("prompt")),
              "completion": _clip(r.get("completion"), 2400 if r.get("turns", 1) > 1 else 1200),
              "answer": _clip(r.get("answer"), 200),
              "info": _clip(r.get("info"), 400)} for i, r in enumerate(rows[:PROMPT_ROWS])]
    prior = [(p.parent.name, p.read_text(encoding="utf-8")[:4000])
             for p in brief.prior_reports[-2:] if p.exists()]
    rejected_script = None
    if brief.attempt:
        old = rejected(brief.iter_dir, ArmFiles.GENERATOR, brief.attempt)
        if old.exists():
            rejected_script = old.read_text(encoding="utf-8")[:12000]
    system = env.get_template("teacher_llm/system.md.j2").render()
    user = env.get_template("teacher_llm/user.md.j2").render(
        b=brief, hub_json=json.dumps(brief.hub, indent=2, default=str)[:8000], rows=shown,
        total_rows=len(rows), prior=prior, rejected_script=rejected_script, rules=rules,
        hparams_bounds=hparams.bounds_markdown())
    return system, user


class LLMTeacher:
    name = "llm"

    def __init__(self, cfg):
        self.cfg = cfg   # driver.state.LLMConfig

    # ---- the endpoint -----------------------------------------------------------------------
    def _key(self) -> str | None:
        return os.environ.get(self.cfg.key_env) or None

    def _endpoint(self, openai_path: str, anthropic_path: str) -> tuple[str, dict]:
        """The URL of one of the API's paths and the headers every request to it carries (the
        key, where its variable is set, as the API expects it)."""
        c, key = self.cfg, self._key()
        if c.api == "anthropic":
            return (c.base_url.rstrip("/") + anthropic_path,
                    {"anthropic-version": "2023-06-01", **({"x-api-key": key} if key else {})})
        return (c.base_url.rstrip("/") + openai_path,
                {"authorization": f"Bearer {key}"} if key else {})

    def chat(self, system: str, messages: list[dict]) -> tuple[str, dict]:
        """One call; returns (text, {"input_tokens", "output_tokens"})."""
        import httpx

        c = self.cfg
        url, headers = self._endpoint("/chat/completions", "/v1/messages")
        headers["content-type"] = "application/json"
        if c.api == "anthropic":
            body = {"model": c.model, "max_tokens": c.max_tokens, "system": system,
                    "messages": messages}
        else:
            body = {"model": c.model, "max_tokens": c.max_tokens,
                    "messages": [{"role": "system", "content": system}, *messages]}
        try:
            r = httpx.post(url, json=body, headers=headers, timeout=c.timeout_s)
        except httpx.HTTPError as e:
            raise DriverError(f"the LLM teacher could not reach {url}: {e}. Check --llm-base-url "
                              "and the network, then `driver resume`.") from None
        if r.status_code in (401, 403):
            raise DriverError(f"{url} refused the request ({r.status_code}): set {c.key_env} to a "
                              "valid key, then `driver resume`.")
        if r.status_code >= 400:
            raise DriverError(f"{url} answered {r.status_code}: {r.text[:300]}. Fix the cause, "
                              "then `driver resume`.")
        try:
            data = r.json()
            if c.api == "anthropic":
                text = "".join(b.get("text", "") for b in data["content"] if b.get("type") == "text")
                u = data.get("usage") or {}
                usage = {"input_tokens": u.get("input_tokens", 0), "output_tokens": u.get("output_tokens", 0)}
            else:
                text = data["choices"][0]["message"]["content"] or ""
                u = data.get("usage") or {}
                usage = {"input_tokens": u.get("prompt_tokens", 0), "output_tokens": u.get("completion_tokens", 0)}
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise DriverError(f"{url} returned a reply that is not a {c.api} chat response "
                              f"({type(e).__name__}: {e}); check --llm-api and --llm-base-url.") from None
        return text, usage

    def check_endpoint(self, timeout_s: float = 5.0) -> str:
        """A line for `driver run`'s header: whether the endpoint answers now, asked with the
        free model-listing request both APIs serve (GET .../models), never a billed call. The
        teacher's first call comes only after iter_0 has trained, so an endpoint that does not
        answer, a key it refuses or a model it does not list is said before those hours are
        spent. Not a refusal: `driver resume` continues a run stopped by any of them, and an
        endpoint may be started while iter_0 trains."""
        import httpx

        c, key = self.cfg, self._key()
        url, headers = self._endpoint("/models", "/v1/models")
        later = ("iter_0 trains first; the teacher's first call, after it, fails the same way "
                 "unless this is fixed by then (`driver resume` continues the run)")
        try:
            r = httpx.get(url, headers=headers, timeout=timeout_s)
        except httpx.HTTPError as e:
            return (f"LLM teacher: WARNING {url} did not answer ({type(e).__name__}: {e}); "
                    f"check --llm-base-url. {later}")
        if r.status_code in (401, 403):
            why = (f"{c.key_env} is not set" if not key else f"it refused the key in {c.key_env}")
            return (f"LLM teacher: WARNING {url} answered {r.status_code}: {why}. {later}")
        listed = None   # the models it lists, where the whole list came back
        if r.status_code == 200:
            try:
                body = r.json()
                # Anthropic pages its list (has_more): a model past the first page is not missing
                listed = None if body.get("has_more") else [m["id"] for m in body["data"]]
            except (ValueError, KeyError, TypeError, AttributeError):
                pass
        if listed is not None and c.model not in listed:
            return (f"LLM teacher: WARNING {c.base_url} answers, but --llm-model {c.model} is not "
                    f"among the {len(listed)} models it lists "
                    f"({', '.join(listed[:5])}{', ...' if len(listed) > 5 else ''}). {later}")
        return (f"LLM teacher: {c.model} at {c.base_url} ({c.api} API; {url} answered "
                f"{r.status_code}{', the model listed' if listed else ''})")

    # ---- the contract -----------------------------------------------------------------------
    def teach(self, brief: Brief) -> None:
        if outputs_present(brief.iter_dir):
            return
        system, user = render_prompt(brief)
        messages = [{"role": "user", "content": user}]
        usage_path = brief.iter_dir / ArmFiles.TEACHER_USAGE
        usage = read_json(usage_path) if usage_path.exists() else new_usage(self.cfg)
        for ask in range(MAX_FORMAT_RETRIES + 1):
            t0 = time.time()
            text, u = self.chat(system, messages)
            record_call(usage, self.cfg, u, attempt=brief.attempt, seconds=time.time() - t0)
            atomic_write_json(usage_path, usage)
            files = parse_files(text)
            missing = [n for n in OUTPUTS if n not in files]
            if not missing:
                for name in (*OUTPUTS, *(n for n in OPTIONAL if n in files)):
                    atomic_write_text(brief.iter_dir / name, files[name])
                return
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content":
                          f"Your reply is missing {', '.join(missing)}. Reply again with all four "
                          "files, each between <<<FILE name>>> and <<<END FILE>>>."}]
        raise DriverError(f"the LLM teacher's replies never carried all four files (missing "
                          f"{', '.join(missing)} after {MAX_FORMAT_RETRIES + 1} asks); try another "
                          "--llm-model, then `driver resume`.")


def new_usage(cfg) -> dict:
    return {"model": cfg.model, "api": cfg.api, "calls": 0, "input_tokens": 0,
            "output_tokens": 0, "cost_usd": None, "per_call": []}


def record_call(usage: dict, cfg, u: dict, attempt: int, seconds: float) -> None:
    usage["calls"] += 1
    usage["input_tokens"] += int(u["input_tokens"])
    usage["output_tokens"] += int(u["output_tokens"])
    if cfg.price_in is not None and cfg.price_out is not None:
        usage["cost_usd"] = round((usage["input_tokens"] * cfg.price_in
                                   + usage["output_tokens"] * cfg.price_out) / 1e6, 6)
    usage["per_call"].append({"attempt": attempt, **u, "seconds": round(seconds, 2)})
