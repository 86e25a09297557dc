"""Stand-in for prime-rl's GPU-only inference server (vLLM engine + vllm-router), for CPU tests.

One process serves the HTTP surface prime-rl's orchestrator, `rl` launcher and `evals` call, on
two ports sharing one in-memory state: the server (router) port and, when given, the engine's
"backend" (admin) port. It is started by tests/prime_rl_real/bin/inference; run it with the
prime-rl test venv's python (starlette and uvicorn come with `mcp` there).

    python inference_standin.py --model DIR --port P [--backend-port B] [--policy mixed]
        [--router forward|data-only] [--no-metrics] [--log FILE] [--max-model-len 4096]

Every flag has an environment twin, read when the flag is absent: PRL_STANDIN_POLICY,
PRL_STANDIN_ROUTER, PRL_STANDIN_METRICS (0 = off), PRL_STANDIN_LOG.

Endpoints, each with the prime-rl caller it serves (current 559b447, classic 09e2977):
  GET  /health               src/prime_rl/utils/client.py:174-199@559b447, :286@09e2977
                             (503 until both ports listen, then 200)
  GET  /v1/models            client.py:159-170@559b447 (`data[].id`); src/prime_rl/orchestrator/inference_metrics.py:361-375@559b447
                             and renderers.client._resolve_max_prompt_len (`data[].max_model_len`)
  POST /pause, /resume       client.py:253-271@559b447 (`/pause?mode=keep&clear_cache=false`), :315,327@09e2977
                             (while paused, generate/chat requests wait for /resume, as vLLM's pause does)
  POST /update_weights       client.py:274-320@559b447 (JSON `{"weight_dir": ...}`), :358@09e2977
  POST /load_lora_adapter    client.py:366-373@559b447 (`{"lora_name", "lora_path"}`), :422@09e2977
  POST /v1/load_lora_adapter, /v1/unload_lora_adapter (client.py:384@559b447), /init_broadcaster
                             (client.py:423,461@559b447, :476@09e2977): 200, recorded
  POST /inference/v1/generate token in / token out, as renderers.client.generate (renderers 0.1.10
                             client.py:308-356) posts and parses it; also classic's prompt-logprob
                             scoring call, src/prime_rl/orchestrator/utils.py:103-131@09e2977
  POST /v1/chat/completions  OpenAI chat.completion with `usage` (eval clients, harnesses)
  POST /v1/completions       OpenAI text completion (verifiers' legacy completions client)
  GET  /metrics              vLLM-style Prometheus text, in the form
                             src/prime_rl/orchestrator/inference_metrics.py:88-119,377-414@559b447 parses
                             (`vllm:cache_config_info{kv_cache_size_tokens=..}`, `vllm:kv_cache_usage_perc`);
                             with metrics off it answers 404, so `evals` refuses to start
                             (src/prime_rl/evals/evals.py:166-176@559b447)

Router knob: `forward` (both ports serve everything) or `data-only` (the server port answers 404
to /pause, /resume, /update_weights, /load_lora_adapter, /metrics: a router that does not forward
admin calls; prime-rl's launcher sends those to the backend port, configs/rl.py:816-824@559b447).

Reply policy: `mixed` (per prompt, the k-th sampled reply is "yes" or "no", alternating from a
start fixed by the prompt's hash, so each GRPO group of 2+ gets both), `constant` (always "yes":
zero advantages), `error` (HTTP 500 on every generate/chat/completion request), or
`module:function` (`f(messages, index) -> str`; token-in prompts arrive decoded as one user message).

Request log: one JSON line per request to --log / PRL_STANDIN_LOG, with the policy and weight_dir
in force when the request was answered.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import importlib
import json
import os
import signal
import sys
import time
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

ADMIN_PATHS = {"/pause", "/resume", "/update_weights", "/load_lora_adapter", "/metrics"}
LOGPROB = -0.5


class State:
    def __init__(self, args):
        from transformers import AutoTokenizer

        self.model_path = args.model
        self.served_name = args.served_model_name or args.model
        self.max_model_len = args.max_model_len
        self.policy_name = args.policy
        self.router = args.router
        self.metrics_on = args.metrics
        self.log_path = args.log
        self.server_port = args.port
        self.backend_port = args.backend_port
        self.tok = AutoTokenizer.from_pretrained(args.model)
        self.weight_dir: str | None = None
        self.loras: dict[str, str] = {}
        self.enable_lora = args.enable_lora
        self.ready = False
        self.resumed = asyncio.Event()
        self.resumed.set()
        self.running = 0
        self.seen: dict[str, int] = {}
        self.served = 0
        self.reply_fn = None
        if args.policy not in ("mixed", "constant", "error"):
            mod, _, fn = args.policy.partition(":")
            if not fn:
                raise SystemExit(f"inference_standin: bad policy {args.policy!r} (mixed|constant|error|module:function)")
            self.reply_fn = getattr(importlib.import_module(mod), fn)

    def log(self, request: Request, status: int, **extra) -> None:
        if not self.log_path:
            return
        rec = {"time": time.time(), "port": request.scope["server"][1], "role": request.scope["app"].state.role,
               "method": request.method, "path": request.url.path, "status": status,
               "policy": self.policy_name, "weight_dir": self.weight_dir, **extra}
        with open(self.log_path, "a") as f:
            f.write(json.dumps(rec) + "\n")

    def replies(self, messages: list[dict], key: str, n: int) -> list[str]:
        """`n` reply texts for a prompt; `key` identifies the prompt, the index counts its samples."""
        out = []
        for _ in range(n):
            index = self.seen.get(key, 0)
            self.seen[key] = index + 1
            if self.reply_fn is not None:
                out.append(str(self.reply_fn(messages, index)))
            elif self.policy_name == "constant":
                out.append("yes")
            else:
                out.append("yes" if (int(key[:8], 16) + index) % 2 == 0 else "no")
        return out

    def encode(self, text: str, max_tokens, stop_ids: list[int] | None) -> tuple[list[int], str]:
        """Reply token ids ending in the stop token (as vLLM returns them), truncated to max_tokens."""
        ids = self.tok.encode(text, add_special_tokens=False)
        eos = (stop_ids or [self.tok.eos_token_id])[0]
        if eos is not None:
            ids = ids + [eos]
        if max_tokens is not None and len(ids) > int(max_tokens):
            return ids[: int(max_tokens)], "length"
        return ids, "stop"


def prompt_key(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def state_of(request: Request) -> State:
    return request.scope["app"].state.shared


async def health(request: Request):
    st = state_of(request)
    status = 200 if st.ready else 503
    st.log(request, status)
    return Response(status_code=status)


async def models(request: Request):
    st = state_of(request)
    st.log(request, 200)
    cards = [{"id": st.served_name, "object": "model", "created": 0, "owned_by": "vllm", "root": st.model_path,
              "parent": None, "max_model_len": st.max_model_len}]
    cards += [{"id": name, "object": "model", "created": 0, "owned_by": "vllm", "root": path,
               "parent": st.served_name, "max_model_len": st.max_model_len} for name, path in st.loras.items()]
    return JSONResponse({"object": "list", "data": cards})


async def _body(request: Request) -> dict:
    try:
        return await request.json()
    except Exception:
        return {}


async def admin(request: Request):
    """pause / resume / update_weights / LoRA / init_broadcaster: record and answer 200."""
    st = state_of(request)
    path = request.url.path
    body = await _body(request) if request.method == "POST" else {}
    if path == "/pause":
        st.resumed.clear()
    elif path == "/resume":
        st.resumed.set()
    elif path == "/update_weights":
        st.weight_dir = body.get("weight_dir")
    elif path.endswith("/load_lora_adapter"):
        if not st.enable_lora:
            # prime-rl's /load_lora_adapter returns vLLM's ErrorResponse with its status
            # (inference/vllm/server.py:110-116@559b447); an engine started without enable_lora
            # has no LoRA manager to load into. The exact status is vLLM's: open to a GPU
            # (bench/gpu_facts.sh, section 6); here a 400.
            st.log(request, 400, body=body, note="LoRA is not enabled (no --enable-lora)")
            return JSONResponse({"error": {"message": "LoRA is not enabled on this server", "code": 400}},
                                status_code=400)
        st.loras[str(body.get("lora_name"))] = str(body.get("lora_path"))
        st.weight_dir = body.get("lora_path", st.weight_dir)
    elif path.endswith("/unload_lora_adapter"):
        st.loras.pop(str(body.get("lora_name")), None)
    st.log(request, 200, params=dict(request.query_params), body=body)
    return JSONResponse({"status": "ok"})


def _metrics_text(st: State) -> str:
    labels = f'engine="0",model_name="{st.served_name}"'
    return "\n".join([
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
        "# TYPE vllm:cache_config_info gauge",
        f'vllm:cache_config_info{{block_size="16",engine="0",kv_cache_size_tokens="{64 * st.max_model_len}",'
        f'num_gpu_blocks="{4 * st.max_model_len}"}} 1.0',
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{labels}}} {min(1.0, st.running / 64):.4f}",
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{labels}}} {st.running}.0",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{labels}}} 0.0",
        "# HELP vllm:request_success_total Count of successfully processed requests.",
        "# TYPE vllm:request_success_total counter",
        f"vllm:request_success_total{{{labels}}} {st.served}.0",
        "",
    ])


async def metrics(request: Request):
    st = state_of(request)
    if not st.metrics_on:
        st.log(request, 404)
        return PlainTextResponse("metrics off", status_code=404)
    st.log(request, 200)
    return PlainTextResponse(_metrics_text(st), media_type="text/plain; version=0.0.4")


async def _sample(request: Request, st: State, messages: list[dict], key: str, n: int):
    """Wait out a pause, then pick the replies (or None under the `error` policy)."""
    await st.resumed.wait()
    if st.policy_name == "error":
        return None
    return st.replies(messages, key, n)


def _error(request: Request, st: State, **extra):
    st.log(request, 500, **extra)
    return JSONResponse({"object": "error", "message": "inference stand-in: policy=error", "type": "InternalServerError",
                         "code": 500}, status_code=500)


def _logprob_content(ids: list[int], as_ids: bool, st: State) -> list[dict]:
    out = []
    for i in ids:
        tok = f"token_id:{i}" if as_ids else st.tok.decode([i])
        out.append({"token": tok, "logprob": LOGPROB, "bytes": list(tok.encode()), "top_logprobs": []})
    return out


async def generate(request: Request):
    """vLLM's token-in/token-out endpoint; reply shape checked by renderers.client._parse_completion_logprobs."""
    st = state_of(request)
    body = await _body(request)
    prompt_ids = list(body.get("token_ids") or [])
    sp = body.get("sampling_params") or {}
    n = int(sp.get("n") or 1)
    key = prompt_key(prompt_ids)
    info = {"model": body.get("model"), "prompt_hash": key[:16], "n": n}
    messages = [{"role": "user", "content": st.tok.decode(prompt_ids, skip_special_tokens=False)}]
    st.running += 1
    try:
        texts = await _sample(request, st, messages, key, n)
    finally:
        st.running -= 1
    if texts is None:
        return _error(request, st, **info)
    choices = []
    for index, text in enumerate(texts):
        ids, finish = st.encode(text, sp.get("max_tokens"), sp.get("stop_token_ids"))
        choices.append({"index": index, "token_ids": ids, "finish_reason": finish,
                        "logprobs": {"content": _logprob_content(ids, True, st)} if sp.get("logprobs") is not None
                        else None})
    reply = {"request_id": body.get("request_id") or f"gen-{uuid.uuid4().hex}", "choices": choices,
             "prompt_logprobs": None, "kv_transfer_params": None}
    if sp.get("prompt_logprobs"):
        reply["prompt_logprobs"] = [None] + [{str(i): {"logprob": LOGPROB, "rank": 1,
                                                       "decoded_token": st.tok.decode([i])}} for i in prompt_ids[1:]]
    st.served += 1
    st.log(request, 200, **info, replies=texts)
    return JSONResponse(reply)


def _usage(prompt_len: int, completion_ids: list[list[int]]) -> dict:
    done = sum(len(c) for c in completion_ids)
    return {"prompt_tokens": prompt_len, "completion_tokens": done, "total_tokens": prompt_len + done}


async def chat_completions(request: Request):
    st = state_of(request)
    body = await _body(request)
    messages = body.get("messages") or []
    n = int(body.get("n") or 1)
    key = prompt_key(messages)
    info = {"model": body.get("model"), "prompt_hash": key[:16], "n": n}
    st.running += 1
    try:
        texts = await _sample(request, st, messages, key, n)
    finally:
        st.running -= 1
    if texts is None:
        return _error(request, st, **info)
    try:
        prompt_ids = list(st.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                     return_dict=True)["input_ids"])
    except Exception:
        prompt_ids = st.tok.encode(json.dumps(messages), add_special_tokens=False)
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    stop_ids = body.get("stop_token_ids")
    as_ids = bool(body.get("return_tokens_as_token_ids"))
    choices, all_ids = [], []
    for index, text in enumerate(texts):
        ids, finish = st.encode(text, max_tokens, stop_ids)
        all_ids.append(ids)
        content = st.tok.decode(ids, skip_special_tokens=True)
        choice = {"index": index, "message": {"role": "assistant", "content": content, "tool_calls": [],
                                              "reasoning_content": None},
                  "finish_reason": finish,
                  "logprobs": {"content": _logprob_content(ids, as_ids, st)} if body.get("logprobs") else None}
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
        choices.append(choice)
    reply = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
             "model": body.get("model") or st.served_name, "choices": choices,
             "usage": _usage(len(prompt_ids), all_ids)}
    if body.get("return_token_ids"):
        reply["prompt_token_ids"] = prompt_ids
    st.served += 1
    st.log(request, 200, **info, replies=texts)
    return JSONResponse(reply)


async def completions(request: Request):
    st = state_of(request)
    body = await _body(request)
    prompt = body.get("prompt") or ""
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        prompt = st.tok.decode(prompt, skip_special_tokens=False)
    prompt = prompt if isinstance(prompt, str) else str(prompt)
    n = int(body.get("n") or 1)
    key = prompt_key(prompt)
    info = {"model": body.get("model"), "prompt_hash": key[:16], "n": n}
    st.running += 1
    try:
        texts = await _sample(request, st, [{"role": "user", "content": prompt}], key, n)
    finally:
        st.running -= 1
    if texts is None:
        return _error(request, st, **info)
    prompt_ids = st.tok.encode(prompt, add_special_tokens=False)
    choices, all_ids = [], []
    for index, text in enumerate(texts):
        ids, finish = st.encode(text, body.get("max_tokens"), body.get("stop_token_ids"))
        all_ids.append(ids)
        choice = {"index": index, "text": st.tok.decode(ids, skip_special_tokens=True), "finish_reason": finish,
                  "logprobs": None}
        if body.get("logprobs") is not None:
            choice["logprobs"] = {"tokens": [st.tok.decode([i]) for i in ids], "token_logprobs": [LOGPROB] * len(ids),
                                  "top_logprobs": None, "text_offset": None}
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
            choice["prompt_token_ids"] = prompt_ids
        choices.append(choice)
    st.served += 1
    st.log(request, 200, **info, replies=texts)
    return JSONResponse({"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                         "model": body.get("model") or st.served_name, "choices": choices,
                         "usage": _usage(len(prompt_ids), all_ids)})


async def not_forwarded(request: Request):
    st = state_of(request)
    st.log(request, 404, note="router does not forward admin calls (PRL_STANDIN_ROUTER=data-only)")
    return JSONResponse({"error": "not found"}, status_code=404)


def make_app(state: State, role: str) -> Starlette:
    """`role` is "server" (router port) or "backend" (engine port)."""
    blocked = role == "server" and state.router == "data-only" and state.backend_port is not None
    admin_routes = ["/pause", "/resume", "/update_weights", "/load_lora_adapter", "/v1/load_lora_adapter",
                    "/v1/unload_lora_adapter", "/init_broadcaster"]
    routes = [Route("/health", health), Route("/v1/models", models),
              Route("/inference/v1/generate", generate, methods=["POST"]),
              Route("/v1/chat/completions", chat_completions, methods=["POST"]),
              Route("/v1/completions", completions, methods=["POST"])]
    for path in admin_routes:
        routes.append(Route(path, not_forwarded if blocked and path in ADMIN_PATHS else admin, methods=["POST"]))
    routes.append(Route("/metrics", not_forwarded if blocked else metrics))
    app = Starlette(routes=routes)
    app.state.shared = state
    app.state.role = role
    return app


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self):   # signals are handled once, in main(), for both servers
        yield


async def main(args) -> None:
    state = State(args)
    ports = [("server", args.port)] + ([("backend", args.backend_port)] if args.backend_port is not None else [])
    servers = [_Server(uvicorn.Config(make_app(state, role), host=args.host, port=port, log_level="warning",
                                      lifespan="off", timeout_graceful_shutdown=0.5, timeout_keep_alive=5))
               for role, port in ports]

    def stop(*_):
        state.resumed.set()
        for s in servers:
            s.should_exit = True

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)

    async def mark_ready():
        while not all(s.started for s in servers):
            if any(s.should_exit for s in servers):
                return
            await asyncio.sleep(0.05)
        state.ready = True
        print(f"inference stand-in ready: model={state.served_name} ports={[p for _, p in ports]} "
              f"policy={state.policy_name} router={state.router} metrics={state.metrics_on}", flush=True)

    ready = asyncio.create_task(mark_ready())
    results = await asyncio.gather(*(s.serve() for s in servers), return_exceptions=True)
    ready.cancel()
    if not all(s.started for s in servers):   # a port was taken: uvicorn exits without raising
        stop()
        raise SystemExit(f"inference stand-in: could not listen on {[p for _, p in ports]}: {results}")


def parse_args(argv=None):
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="local model dir (tokenizer); served under this name")
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True, help="server (router) port")
    p.add_argument("--backend-port", type=int, default=None, help="engine (admin) port; none = one port")
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--enable-lora", action="store_true", help="vllm.enable_lora: adapters load")
    p.add_argument("--max-lora-rank", type=int, default=None)
    p.add_argument("--policy", default=env("PRL_STANDIN_POLICY") or "mixed")
    p.add_argument("--router", choices=["forward", "data-only"], default=env("PRL_STANDIN_ROUTER") or "forward")
    p.add_argument("--no-metrics", dest="metrics", action="store_false",
                   default=env("PRL_STANDIN_METRICS", "1") not in ("0", "false", "off", "no"))
    p.add_argument("--log", default=env("PRL_STANDIN_LOG") or None)
    return p.parse_args(argv)


if __name__ == "__main__":
    a = parse_args()
    if a.backend_port == a.port:
        a.backend_port = None
    sys.path.insert(0, os.getcwd())   # so a `module:function` policy can live in the test's cwd
    asyncio.run(main(a))
