"""Loopback servers for tests: a scripted chat-completions server and a uvicorn runner.

:class:`ScriptedServer` is a real HTTP server on loopback speaking the chat-completions
protocol with scripted replies. It stands in for an LLM server (vLLM, llama.cpp ...) that
cannot run in unit tests; the HTTP traffic, status codes, headers and timing are real.
:func:`running` serves an ASGI app (the MemAgent server) with a real uvicorn.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedServer:
    """Serves ``(status, content)`` replies in order (the last one repeats).

    Attributes:
        requests: JSON bodies received, in order.
        max_in_flight: the most requests handled at the same time.
    """

    def __init__(
        self,
        replies: list[tuple[int, Any]],
        delay: float = 0.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.replies = deque(replies)
        self.delay = delay
        self.headers = headers or {}
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    status, content = (
                        server.replies.popleft() if len(server.replies) > 1 else server.replies[0]
                    )
                time.sleep(server.delay)
                if callable(content):
                    content = content(body)
                if status == 200:
                    payload = {
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": content}}
                        ]
                    }
                else:
                    payload = {"error": {"message": str(content)}}
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in server.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)
                finally:
                    with server._lock:
                        server.in_flight -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running(app: Any, *, timeout: float = 60.0) -> Iterator[str]:
    """Serve the ASGI ``app`` with uvicorn on a free loopback port; yields ``.../v1``.

    The server runs in a daemon thread and is stopped when the block ends.
    """
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="error")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + timeout
    while not server.started and time.time() < deadline:
        if not thread.is_alive():
            raise RuntimeError("uvicorn exited before it started")
        time.sleep(0.02)
    if not server.started:
        raise RuntimeError(f"uvicorn did not start within {timeout} s")
    try:
        yield f"http://127.0.0.1:{server.config.port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
