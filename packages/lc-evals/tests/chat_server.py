"""A stand-in for a model server: stdlib HTTP speaking the chat-completions shape.

It "answers" by a lexical lookup (the needle sentence whose key the question names), so
tests can check the whole HTTP path: request body, response parsing, errors, retries.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatServer:
    """Serves ``POST /v1/chat/completions`` on 127.0.0.1 (random free port)."""

    def __init__(self, fail_first: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail_first = fail_first
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": "not found"})
                if outer.fail_first > 0:
                    outer.fail_first -= 1
                    return self._send(503, {"error": "warming up"})
                prompt = body["messages"][-1]["content"]
                reply = "I could not find it."
                m = re.search(r"for ([\w-]+) mentioned", prompt)
                if m:
                    found = re.search(rf"for {re.escape(m.group(1))} is: ([\w-]+)\.", prompt)
                    if found:
                        reply = f"The answer is {found.group(1)}."
                self._send(
                    200,
                    {
                        "object": "chat.completion",
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply},
                                "finish_reason": "stop",
                            }
                        ],
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
