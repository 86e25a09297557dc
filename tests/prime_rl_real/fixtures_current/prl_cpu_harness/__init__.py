"""An in-process harness for prime-rl's CPU tests: one chat completion per rollout, posted to
the interception endpoint the rollout hands it, then a synthetic success.

verifiers' `Harness.launch` contract allows this: "a harness may run its loop in-process instead
of launching a program, as long as every model call goes through `endpoint` + `secret` — it then
returns a synthetic success `ProgramResult`" (verifiers/v1/harness.py:281-284@a60a606). The
request is the one the null harness's program sends (`AsyncOpenAI(base_url=endpoint,
api_key=secret).chat.completions.create(model=..., messages=...)`,
verifiers/v1/harnesses/null/harness.py:42-47 and program.py:21-26@a60a606), without a uv-managed
subprocess per rollout (notes-cpu.md §2 blockers #11/#12).

Resolved from `harness.id = "prl-cpu-harness"` (verifiers/v1/utils/loaders.py:70-78,133-134,
145-146@a60a606).
"""
from __future__ import annotations

import httpx
from verifiers.v1.configs.harness import HarnessConfig
from verifiers.v1.harness import Harness
from verifiers.v1.runtimes import ProgramResult

__all__ = ["PrlCpuHarness", "PrlCpuHarnessConfig"]


class PrlCpuHarnessConfig(HarnessConfig):
    timeout: float = 60.0


class PrlCpuHarness(Harness[PrlCpuHarnessConfig]):
    APPENDS_SYSTEM_PROMPT = True     # as the null harness (null/harness.py:21@a60a606)
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data) -> ProgramResult:
        system, prompt = self.resolve_prompt(data)
        messages: list[dict] = []
        if system:
            messages.append({"role": "system", "content": system})
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages += [m.model_dump(mode="json", exclude_none=True) if hasattr(m, "model_dump") else m
                         for m in prompt]
        async with httpx.AsyncClient(timeout=self.config.timeout) as client:
            r = await client.post(endpoint.rstrip("/") + "/chat/completions",
                                  headers={"Authorization": f"Bearer {secret}"},
                                  json={"model": ctx.model, "messages": messages})
        if r.status_code >= 400:
            return ProgramResult(1, "", f"chat completion failed: HTTP {r.status_code}: {r.text[:500]}")
        return ProgramResult(0, "", "")
