"""A faithful double of an LLM API on 127.0.0.1: OpenAI's /v1/chat/completions and Anthropic's
/v1/messages request and response shapes, with usage. Replies come from a script of callables
that receive the request body; every request is recorded for assertions."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeLLM:
    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

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
