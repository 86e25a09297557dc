"""A faithful double of an LLM API on 127.0.0.1: OpenAI's /v1/chat/completions and Anthropic's
/v1/messages request and response shapes, with usage, and both APIs' model listing (GET
/v1/models: OpenAI's `{"object": "list", "data": [{"id", "object": "model", ...}]}`, Anthropic's
`{"data": [{"type": "model", "id", ...}], "has_more"}`), which answers 401 without the `key` it
was given, as both do. Replies come from a script of callables that receive the request body;
every POST is recorded in `requests`, every listing in `listings`."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeLLM:
    def __init__(self, script, models=("fake-1",), key: str | None = None, has_more: bool = False):
        self.script = list(script)
        self.requests: list[dict] = []
        self.listings: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code: int, out: dict) -> None:
                data = json.dumps(out).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                fake.listings.append({"path": self.path, "headers": dict(self.headers)})
                if not self.path.endswith("/models"):
                    return self._send(404, {"error": {"message": "not found"}})
                anthropic = "anthropic-version" in self.headers
                given = (self.headers.get("x-api-key") if anthropic
                         else (self.headers.get("authorization") or "").removeprefix("Bearer "))
                if key is not None and given != key:
                    return self._send(401, {"error": {"type": "authentication_error",
                                                      "message": "invalid x-api-key" if anthropic
                                                      else "Incorrect API key provided"}})
                if anthropic:
                    return self._send(200, {"data": [{"type": "model", "id": m, "display_name": m,
                                                      "created_at": "2026-01-01T00:00:00Z"}
                                                     for m in models],
                                            "has_more": has_more, "first_id": models[0] if models else None,
                                            "last_id": models[-1] if models else None})
                self._send(200, {"object": "list", "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in models]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                reply = fake.script.pop(0)(body) if fake.script else "no more replies"
                n_in = sum(len(json.dumps(m)) // 4 for m in body["messages"]) + len(body.get("system", "")) // 4
                if self.path.endswith("/messages"):
                    out = {"type": "message", "role": "assistant", "model": body["model"],
                           "content": [{"type": "text", "text": reply}], "stop_reason": "end_turn",
                           "usage": {"input_tokens": n_in, "output_tokens": len(reply) // 4}}
                elif self.path.endswith("/chat/completions"):
                    out = {"id": "x", "object": "chat.completion", "model": body["model"],
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": reply}}],
                           "usage": {"prompt_tokens": n_in, "completion_tokens": len(reply) // 4,
                                     "total_tokens": n_in + len(reply) // 4}}
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
