"""An OpenAI-compatible chat-completions server whose "model" is MemAgent.

Any OpenAI client can send a prompt far longer than the backend's window: the server
reads it chunk by chunk with MemAgent and returns the final answer.

How a request becomes (document, question):

* if the request body has a ``question`` field (``extra_body={"question": ...}`` in the
  ``openai`` client), the question is that field and the document is the text of all
  messages;
* otherwise the question is the last paragraph (after the last blank line) of the last
  user message, and the document is everything before it (earlier messages included).

System and developer messages are instructions, not document text, and are left out.
Message content is a string or a list of text parts (``[{"type": "text", "text": ...}]``,
as the ``openai`` client sends); the parts of one message are joined with a blank line,
so ``[document part, question part]`` works. Parts of any other type get HTTP 400.

Routes: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /v1/models/{id}`` and
``GET /health`` (never behind the API key).

Behaviour an OpenAI client can rely on (vLLM's OpenAI server is the model):

* every request gets its own :class:`~lc_agents.memagent.MemAgent` (the backend
  serializes model calls itself), run in a worker thread, so overlapping requests are
  independent and the event loop stays free;
* ``stream: true`` answers with Server-Sent Events in the ``chat.completion.chunk``
  format: a chunk with ``delta = {"role": "assistant"}``, the answer as a content delta,
  a chunk with ``finish_reason = "stop"`` and an empty delta, then ``data: [DONE]``.
  While MemAgent reads, SSE comment lines (``: reading chunk 3/10``) keep clients and
  proxies from timing out; OpenAI clients ignore them. ``stream_options.include_usage``
  adds a final chunk with the token usage. An error after the stream has started is sent
  as one ``data: {"error": {...}}`` event before ``[DONE]`` (the ``openai`` client raises
  it as ``APIError``);
* errors always have OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``:
  400 for a bad body (invalid JSON, schema errors, non-text content parts, no question),
  401 for a missing or wrong API key, 404 for an unknown model or route, 405 for a wrong
  method, 413 for a body over ``max_body_bytes``, 502 when the backend fails, 504 when a
  request runs past ``request_timeout_s``, 500 only for bugs.

Example:
    >>> from lc_agents.server import create_app
    >>> app = create_app(backend, api_key="secret")  # doctest: +SKIP
    >>> import uvicorn; uvicorn.run(app, host="127.0.0.1", port=8080)  # doctest: +SKIP

    Then, from any OpenAI client::

        client = openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="secret")
        client.chat.completions.create(
            model="memagent",
            messages=[{"role": "user", "content": document + "\\n\\nWho signed the letter?"}],
        )
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException

from lc_agents.backends.base import ChatBackend
from lc_agents.errors import (
    AgentError,
    BackendError,
    BackendHTTPError,
    BackendUnreachableError,
    EmptyReplyError,
    InputError,
)
from lc_agents.memagent import MemAgent, MemAgentConfig

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from lc_agents.memagent import MemAgentResult, MemoryStep

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "MODEL_NAME",
    "ChatMessage",
    "ChatRequest",
    "RequestError",
    "create_app",
    "error_body",
    "message_text",
    "split_request",
]

MODEL_NAME = "memagent"
"""The model id the server answers to by default."""

DEFAULT_MAX_BODY_BYTES = 32 * 2**20
"""Largest request body accepted by default (bytes, 32 MiB)."""

_DRAIN_BYTES = 64 * 2**20  # read (and drop) at most this much of a rejected body
_INSTRUCTION_ROLES = frozenset({"system", "developer"})
_log = logging.getLogger("lc_agents.server")


class RequestError(InputError):
    """A chat-completions request the server cannot answer (HTTP 400).

    Attributes:
        param: the offending field, e.g. ``"messages[0].content[1]"`` (or ``None``).
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class ChatMessage(BaseModel):
    """One message of a chat-completions request.

    ``content`` is a string, a list of content parts or null; it is checked by
    :func:`message_text` (so the error names the message and part).
    """

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Any = None


class StreamOptions(BaseModel):
    """``stream_options`` of a streaming request."""

    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The chat-completions request body (unknown fields are accepted and ignored).

    Sampling fields (``temperature``, ``max_tokens`` ...) are accepted and ignored: the
    agent's configuration decides how the backend decodes.
    """

    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = 1
    question: str | None = None


def error_body(
    message: str, kind: str, *, param: str | None = None, code: str | int | None = None
) -> dict[str, Any]:
    """An error in OpenAI's shape.

    >>> error_body("no such model", "invalid_request_error", param="model", code="model_not_found")
    {'error': {'message': 'no such model', 'type': 'invalid_request_error', 'param': 'model', 'code': 'model_not_found'}}
    """
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def message_text(content: Any, where: str = "content") -> str:
    """The text of one message's ``content``: a string, a list of text parts, or null.

    Text parts are joined with a blank line (one paragraph each).

    >>> message_text([{"type": "text", "text": "Report."}, {"type": "text", "text": "Why?"}])
    'Report.\\n\\nWhy?'

    Raises:
        RequestError: a part that is not a text part, or content of another type.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise RequestError(
            f"{where} must be a string or a list of text parts, got {type(content).__name__}",
            where,
        )
    texts: list[str] = []
    for j, part in enumerate(content):
        loc = f"{where}[{j}]"
        if not isinstance(part, dict):
            raise RequestError(
                f"{loc} must be an object like {{'type': 'text', 'text': '...'}}, "
                f"got {type(part).__name__}",
                loc,
            )
        kind = part.get("type")
        if kind != "text":
            raise RequestError(
                f"{loc} has type {kind!r}: this server reads text only "
                "(content parts of type 'text')",
                loc,
            )
        text = part.get("text")
        if not isinstance(text, str):
            raise RequestError(f"{loc}.text must be a string", f"{loc}.text")
        texts.append(text)
    return "\n\n".join(texts)


def split_request(messages: list[dict[str, Any]], question: str | None = None) -> tuple[str, str]:
    """Split chat messages into ``(document, question)`` (see the module docstring).

    >>> split_request([{"role": "user", "content": "The gauge read 7.\\n\\nWhat did it read?"}])
    ('The gauge read 7.', 'What did it read?')

    Raises:
        RequestError: no user message, content that is not text, no document, or no
            question can be found.
    """
    texts = [
        (i, message_text(m.get("content"), f"messages[{i}].content"))
        for i, m in enumerate(messages)
    ]
    roles = [m.get("role") for m in messages]
    if "user" not in roles:
        raise RequestError("the request has no user message", "messages")
    kept = [(i, t) for i, t in texts if roles[i] not in _INSTRUCTION_ROLES]
    if question is not None:
        if not question.strip():
            raise RequestError("the 'question' field is empty", "question")
        document = "\n\n".join(t for _, t in kept if t.strip())
        if not document.strip():
            raise RequestError("the messages hold no document text to read", "messages")
        return document, question.strip()
    last = max(i for i, r in enumerate(roles) if r == "user")
    content = texts[last][1].strip()
    head, sep, tail = content.rpartition("\n\n")
    if not sep or not head.strip() or not tail.strip():
        raise RequestError(
            "cannot tell the document from the question: put the question in the last "
            "paragraph of the last user message (after a blank line), or send a 'question' field",
            f"messages[{last}].content",
        )
    earlier = [t for i, t in kept if i < last and t.strip()]
    return "\n\n".join([*earlier, head]), tail.strip()


# ---------------------------------------------------------------------------- runs


class _Cancelled(Exception):
    """Raised inside a worker thread to stop a run nobody waits for any more."""


@dataclass(frozen=True)
class _Outcome:
    result: MemAgentResult
    completion_tokens: int


class _Run:
    """One MemAgent run in a worker thread.

    The worker returns an :class:`_Outcome` through the future :meth:`start` gives. A
    streaming run also reports on :attr:`events` (put from the worker thread,
    thread-safely): ``("total", n_chunks)``, ``("step", MemoryStep)`` after every
    chunk, then ``("done", _Outcome)`` or ``("error", exception)``. :meth:`cancel` stops
    the run after the chunk it is reading.
    """

    def __init__(self, agent: MemAgent, document: str, question: str, *, stream: bool) -> None:
        self.agent = agent
        self.document = document
        self.question = question
        self.stream = stream
        self.cancelled = threading.Event()
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()

    def start(self, executor: ThreadPoolExecutor) -> asyncio.Future[_Outcome]:
        return self._loop.run_in_executor(executor, self._work)

    def cancel(self) -> None:
        """Ask the worker to stop after the chunk it is reading."""
        self.cancelled.set()

    def _emit(self, kind: str, value: Any) -> None:
        if not self.stream:
            return
        try:
            self._loop.call_soon_threadsafe(self.events.put_nowait, (kind, value))
        except RuntimeError:  # the event loop is gone (server shut down)
            self.cancelled.set()

    def _on_step(self, step: MemoryStep) -> None:
        if self.cancelled.is_set():
            raise _Cancelled
        self._emit("step", step)

    def _work(self) -> _Outcome:
        try:
            if self.cancelled.is_set():
                raise _Cancelled
            tokenizer = self.agent.tokenizer
            if self.stream:
                n_tokens = len(tokenizer.encode(self.document, add_special_tokens=False))
                self._emit("total", max(1, math.ceil(n_tokens / self.agent.config.chunk_tokens)))
            result = self.agent.run(self.document, self.question, on_step=self._on_step)
            completion = len(tokenizer.encode(result.answer, add_special_tokens=False))
            outcome = _Outcome(result, completion)
        except BaseException as exc:
            self._emit("error", exc)
            raise
        self._emit("done", outcome)
        return outcome


@dataclass(eq=False)
class _Failure(Exception):
    """An error response: HTTP status and OpenAI error fields."""

    status: int
    message: str
    kind: str = "invalid_request_error"
    param: str | None = None
    code: str | int | None = None

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.kind, param=self.param, code=self.code)


def _failure_of(exc: BaseException) -> _Failure:
    """The HTTP error a failed agent run becomes."""
    if isinstance(exc, RequestError):
        return _Failure(400, str(exc), param=exc.param)
    if isinstance(exc, InputError):
        return _Failure(400, str(exc))
    if isinstance(exc, EmptyReplyError):
        return _Failure(502, str(exc), "server_error", code="empty_reply")
    if isinstance(exc, BackendUnreachableError):
        return _Failure(502, str(exc), "server_error", code="backend_unreachable")
    if isinstance(exc, BackendHTTPError):
        return _Failure(502, str(exc), "server_error", code="backend_http_error")
    if isinstance(exc, BackendError):
        return _Failure(502, str(exc), "server_error", code="backend_error")
    if isinstance(exc, AgentError):
        return _Failure(500, str(exc), "server_error", code="agent_error")
    _log.error("MemAgent run failed", exc_info=(type(exc), exc, exc.__traceback__))
    return _Failure(
        500, f"internal error: {type(exc).__name__}: {exc}", "server_error", code="internal_error"
    )


def _timeout_failure(seconds: float) -> _Failure:
    return _Failure(
        504,
        f"the request took longer than the server's limit of {seconds:g} s",
        "server_error",
        code="timeout",
    )


# ---------------------------------------------------------------------------- ASGI guard


class _Guard:
    """ASGI middleware: API key on ``/v1`` routes and the request-body size limit.

    A body over the limit is refused with 413 whether it announces its size
    (``Content-Length``) or not (chunked uploads are counted as they arrive). A refused
    body is read and dropped (up to 64 MiB) before the answer is sent, so that the
    client, still writing, reads the error instead of a reset connection.
    """

    def __init__(self, app: ASGIApp, *, api_key: str | None, max_body_bytes: int) -> None:
        self.app = app
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path = str(scope.get("path", ""))
        if self.api_key is not None and (path == "/v1" or path.startswith("/v1/")):
            failure = self._check_key(headers.get("authorization"))
            if failure is not None:
                await self._reject(scope, receive, send, failure, self.max_body_bytes)
                return
        declared = headers.get("content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                bad = _Failure(400, f"invalid Content-Length header {declared!r}")
                await self._reject(scope, receive, send, bad, 0)
                return
            if length > self.max_body_bytes:
                await self._reject(scope, receive, send, self._too_large(length), _DRAIN_BYTES)
                return
        await self.app(scope, self._counting(receive), send)

    def _check_key(self, authorization: str | None) -> _Failure | None:
        assert self.api_key is not None
        if not authorization:
            return _Failure(
                401,
                "missing API key: send the header 'Authorization: Bearer <key>'",
                code="invalid_api_key",
            )
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), self.api_key.encode()
        ):
            return _Failure(401, "invalid API key", code="invalid_api_key")
        return None

    def _too_large(self, size: int | None) -> _Failure:
        got = f" ({size} bytes)" if size is not None else ""
        return _Failure(
            413,
            f"the request body{got} is larger than the server's limit of "
            f"{self.max_body_bytes} bytes",
            param=None,
            code="request_too_large",
        )

    def _counting(self, receive: Receive) -> Receive:
        seen = 0
        limit = self.max_body_bytes

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    more = bool(message.get("more_body", False))
                    if more:
                        await _drain(receive, _DRAIN_BYTES)
                    raise StarletteHTTPException(413, detail=self._too_large(None).message)
            return message

        return counted

    @staticmethod
    async def _reject(
        scope: Scope, receive: Receive, send: Send, failure: _Failure, drain: int
    ) -> None:
        if drain > 0:
            await _drain(receive, drain)
        extra = {"WWW-Authenticate": "Bearer"} if failure.status == 401 else None
        response = JSONResponse(failure.body(), status_code=failure.status, headers=extra)
        await response(scope, receive, send)


async def _drain(receive: Receive, limit: int) -> None:
    """Read and drop the rest of a request body (at most ``limit`` bytes)."""
    seen = 0
    while seen <= limit:
        message = await receive()
        if message["type"] != "http.request":
            return
        seen += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


# ---------------------------------------------------------------------------- app


def create_app(
    backend: ChatBackend,
    config: MemAgentConfig | None = None,
    *,
    tokenizer: Any = None,
    model_name: str = MODEL_NAME,
    api_key: str | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    request_timeout_s: float | None = None,
    keepalive_s: float = 10.0,
    max_concurrency: int = 32,
) -> FastAPI:
    """A FastAPI app serving MemAgent over ``backend`` as an OpenAI-compatible API.

    Args:
        backend: the chat backend the agents use (shared by all requests; it serializes
            its own model calls).
        config: MemAgent settings (default: the preset suiting the backend's model, see
            :func:`~lc_agents.memagent.default_preset`).
        tokenizer: tokenizer counting tokens (default: the backend's, else the embedded one).
        model_name: the model id the server answers to (``model`` in requests,
            ``/v1/models``); a request naming another model gets 404.
        api_key: if set, ``/v1`` routes need ``Authorization: Bearer <api_key>`` (401
            otherwise); ``/health`` stays open.
        max_body_bytes: largest request body (bytes); larger ones get 413.
        request_timeout_s: seconds a request may take, waiting for a worker included;
            past it the run is stopped after its current chunk and the client gets 504
            (or an error event in a stream). ``None``: no limit.
        keepalive_s: while a stream waits for the next chunk, an SSE comment is sent at
            least this often (seconds).
        max_concurrency: agent runs at once (worker threads); more requests wait.

    Raises:
        ValueError: a bad setting (the message names it).
    """
    if not model_name or not model_name.strip():
        raise ValueError("model_name must be a non-empty model id")
    if api_key is not None and not api_key.strip():
        raise ValueError("api_key must be None or a non-empty string")
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be >= 1, got {max_body_bytes}")
    if request_timeout_s is not None and not request_timeout_s > 0:
        raise ValueError(f"request_timeout_s must be > 0 or None, got {request_timeout_s}")
    if not keepalive_s > 0:
        raise ValueError(f"keepalive_s must be > 0, got {keepalive_s}")
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")

    # One agent built now checks the config and resolves the tokenizer once; each request
    # then gets its own agent (and question scorer) sharing backend and tokenizer.
    prototype = MemAgent(backend, config, tokenizer=tokenizer)
    agent_config, agent_tokenizer = prototype.config, prototype.tokenizer
    executor = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="memagent")
    active: set[_Run] = set()

    def new_agent() -> MemAgent:
        return MemAgent(backend, agent_config, tokenizer=agent_tokenizer)

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        yield
        for run in list(active):
            run.cancel()
        executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="lc-agents MemAgent", version="1", lifespan=lifespan)
    app.add_middleware(_Guard, api_key=api_key, max_body_bytes=max_body_bytes)
    app.state.model_name = model_name
    app.state.config = agent_config

    def respond(failure: _Failure, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(failure.body(), status_code=failure.status, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        status = exc.status_code
        if status == 404:
            failure = _Failure(
                404,
                f"no route {request.method} {request.url.path} (this server has POST "
                "/v1/chat/completions, GET /v1/models, GET /health)",
                code="not_found",
            )
        elif status == 405:
            failure = _Failure(
                405,
                f"method {request.method} is not allowed on {request.url.path}",
                code="method_not_allowed",
            )
        elif status == 413:
            failure = _Failure(413, str(exc.detail), code="request_too_large")
        else:
            kind = "invalid_request_error" if status < 500 else "server_error"
            failure = _Failure(status, str(exc.detail), kind)
        return respond(failure, getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return respond(_validation_failure(exc.errors()))

    @app.exception_handler(Exception)
    async def _bug(_: Request, exc: Exception) -> JSONResponse:
        _log.error("unhandled error", exc_info=(type(exc), exc, exc.__traceback__))
        return respond(
            _Failure(
                500,
                f"internal error: {type(exc).__name__}: {exc}",
                "server_error",
                code="internal_error",
            )
        )

    def model_card() -> dict[str, Any]:
        return {"id": model_name, "object": "model", "created": 0, "owned_by": "lc-agents"}

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_id:path}", response_model=None)
    async def model(model_id: str) -> dict[str, Any] | JSONResponse:
        if model_id != model_name:
            return respond(_unknown_model(model_id, model_name))
        return model_card()

    @app.post(
        "/v1/chat/completions",
        response_model=None,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": ChatRequest.model_json_schema()}},
            }
        },
    )
    async def chat_completions(request: Request) -> Any:
        loop = asyncio.get_running_loop()
        deadline = None if request_timeout_s is None else loop.time() + request_timeout_s
        # The body is parsed here, whatever its Content-Type says (curl -d sends a form
        # type), and validation errors become OpenAI errors naming the field.
        try:
            data = json.loads(await request.body())
        except ValueError as exc:
            return respond(_Failure(400, f"the body is not valid JSON: {exc}"))
        try:
            body = ChatRequest.model_validate(data)
        except ValidationError as exc:
            return respond(_validation_failure(exc.errors()))
        if body.model is not None and body.model != model_name:
            return respond(_unknown_model(body.model, model_name))
        if body.n != 1:
            return respond(
                _Failure(400, f"n must be 1 (one answer per request), got {body.n}", param="n")
            )
        messages = [m.model_dump() for m in body.messages]
        try:
            document, question = split_request(messages, body.question)
        except RequestError as exc:
            return respond(_failure_of(exc))
        run = _Run(new_agent(), document, question, stream=body.stream)
        try:
            future = run.start(executor)
        except RuntimeError:  # the executor is shut down
            return respond(_Failure(503, "the server is shutting down", "server_error"))
        active.add(run)

        def finished(done: asyncio.Future[_Outcome]) -> None:
            active.discard(run)
            if not done.cancelled():
                done.exception()  # retrieved: a stopped or failed run is answered elsewhere

        future.add_done_callback(finished)
        meta = _Meta(f"chatcmpl-{uuid.uuid4().hex}", int(time.time()), model_name)
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            events = _stream_events(
                run, meta, deadline, request_timeout_s, keepalive_s, include_usage
            )
            return StreamingResponse(
                events,
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        try:
            outcome = await _wait(future, run, request, deadline, request_timeout_s)
        except _Failure as failure:
            return respond(failure)
        except _Cancelled:
            return respond(_Failure(499, "the client closed the request", code="client_closed"))
        except Exception as exc:
            return respond(_failure_of(exc))
        return _completion(meta, outcome)

    return app


def _unknown_model(asked: str, served: str) -> _Failure:
    return _Failure(
        404,
        f"the model {asked!r} does not exist; this server serves {served!r}",
        param="model",
        code="model_not_found",
    )


def _validation_failure(errors: Any) -> _Failure:
    """400 from pydantic/FastAPI validation errors: each as ``field: message``."""
    parts: list[str] = []
    param: str | None = None
    for error in list(errors)[:5]:
        loc = [x for x in error.get("loc", ()) if x != "body"]
        if error.get("type") == "json_invalid":
            detail = (error.get("ctx") or {}).get("error", "")
            position = f" at position {loc[0]}" if loc else ""
            parts.append(f"the body is not valid JSON{position}: {detail}".rstrip(": "))
            continue
        where = _dotted(loc)
        if not where:
            parts.append("the body must be a JSON object with a 'messages' list")
            continue
        if param is None:
            param = where
        parts.append(f"{where}: {error.get('msg', 'invalid value')}")
    if not parts:
        parts.append("invalid request body")
    return _Failure(400, "; ".join(parts), param=param)


def _dotted(loc: list[Any]) -> str:
    """``["messages", 0, "role"]`` -> ``"messages[0].role"``."""
    out = ""
    for x in loc:
        if isinstance(x, int):
            out += f"[{x}]"
        else:
            out += f".{x}" if out else str(x)
    return out


async def _wait(
    future: asyncio.Future[_Outcome],
    run: _Run,
    request: Any,
    deadline: float | None,
    timeout_s: float | None,
) -> _Outcome:
    """Wait for a run; stop it on timeout (504) or when the client goes away."""
    loop = asyncio.get_running_loop()
    while True:
        step = 1.0
        if deadline is not None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                run.cancel()
                assert timeout_s is not None
                raise _timeout_failure(timeout_s)
            step = min(step, remaining)
        done, _ = await asyncio.wait({future}, timeout=step)
        if done:
            return future.result()
        if await request.is_disconnected():
            run.cancel()
            raise _Cancelled


@dataclass(frozen=True)
class _Meta:
    id: str
    created: int
    model: str


def _usage(outcome: _Outcome) -> dict[str, int]:
    prompt = outcome.result.document_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": outcome.completion_tokens,
        "total_tokens": prompt + outcome.completion_tokens,
    }


def _extra(outcome: _Outcome) -> dict[str, Any]:
    result = outcome.result
    extra: dict[str, Any] = {
        "chunks": result.n_chunks,
        "memory": result.memory,
        "seconds": round(result.seconds, 3),
    }
    if hasattr(result, "sources"):
        extra["sources"] = list(result.sources)
    if hasattr(result, "found"):
        extra["found"] = bool(result.found)
    return extra


def _completion(meta: _Meta, outcome: _Outcome) -> dict[str, Any]:
    return {
        "id": meta.id,
        "object": "chat.completion",
        "created": meta.created,
        "model": meta.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": outcome.result.answer},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(outcome),
        "memagent": _extra(outcome),
    }


def _sse(data: dict[str, Any] | str) -> str:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n"


async def _stream_events(
    run: _Run,
    meta: _Meta,
    deadline: float | None,
    timeout_s: float | None,
    keepalive_s: float,
    include_usage: bool,
) -> AsyncIterator[str]:
    """The SSE body of a streaming completion (see the module docstring)."""
    loop = asyncio.get_running_loop()

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body: dict[str, Any] = {
            "id": meta.id,
            "object": "chat.completion.chunk",
            "created": meta.created,
            "model": meta.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        body.update(extra)
        return _sse(body)

    total: int | None = None
    read = 0
    try:
        yield chunk({"role": "assistant"})
        while True:
            wait = keepalive_s
            if deadline is not None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    run.cancel()
                    assert timeout_s is not None
                    yield _sse(_timeout_failure(timeout_s).body())
                    break
                wait = min(wait, remaining)
            try:
                kind, value = await asyncio.wait_for(run.events.get(), timeout=wait)
            except TimeoutError:
                of = f"/{total}" if total else ""
                yield f": reading chunk {read + 1}{of}\n\n"
                continue
            if kind == "total":
                total = int(value)
                yield f": reading chunk 1/{total}\n\n"
            elif kind == "step":
                read = value.chunk_index + 1
                if total is not None and read >= total:
                    yield f": read {total} chunk(s), answering\n\n"
                else:
                    of = f"/{total}" if total else ""
                    yield f": reading chunk {read + 1}{of}\n\n"
            elif kind == "done":
                yield chunk({"content": value.result.answer})
                yield chunk({}, "stop", memagent=_extra(value))
                if include_usage:
                    yield _sse(
                        {
                            "id": meta.id,
                            "object": "chat.completion.chunk",
                            "created": meta.created,
                            "model": meta.model,
                            "choices": [],
                            "usage": _usage(value),
                        }
                    )
                break
            elif kind == "error":
                if not isinstance(value, _Cancelled):
                    failure = _failure_of(value)
                    yield _sse(failure.body())
                break
        yield _sse("[DONE]")
    finally:
        run.cancel()  # a no-op after the run ended; stops it if the client went away
