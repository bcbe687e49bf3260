"""An OpenAI-compatible chat-completions server whose "model" is MemAgent.

Any OpenAI client can send a prompt far longer than the backend's window: the server
reads it chunk by chunk with MemAgent and returns the final answer.

How a request becomes (document, question):

* if the request body has a ``question`` field (``extra_body={"question": ...}`` in the
  ``openai`` client), the question is that field and the document is the text of all
  messages;
* otherwise the question is the last paragraph (after the last blank line) of the last
  user message, and the document is everything before it (earlier messages included).

Routes: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``.
Streaming is not supported (``stream: true`` gets HTTP 400).

Example:
    >>> from lc_agents.server import create_app
    >>> app = create_app(backend)  # doctest: +SKIP
    >>> import uvicorn; uvicorn.run(app, host="127.0.0.1", port=8080)  # doctest: +SKIP
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict

from lc_agents.backends.base import ChatBackend
from lc_agents.errors import AgentError, BackendError, EmptyReplyError, InputError
from lc_agents.memagent import MemAgent, MemAgentConfig

__all__ = ["MODEL_NAME", "ChatMessage", "ChatRequest", "create_app", "split_request"]

MODEL_NAME = "memagent"


class ChatMessage(BaseModel):
    """One message of a chat-completions request."""

    model_config = ConfigDict(extra="allow")
    role: str
    content: str | None = None


class ChatRequest(BaseModel):
    """The chat-completions request body (unknown fields are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")
    model: str = MODEL_NAME
    messages: list[ChatMessage]
    stream: bool = False
    question: str | None = None


def split_request(messages: list[dict[str, Any]], question: str | None = None) -> tuple[str, str]:
    """Split chat messages into ``(document, question)`` (see the module docstring).

    Raises:
        InputError: no user message, or no question can be found.
    """
    texts = [str(m.get("content") or "") for m in messages if m.get("role") != "system"]
    if not any(m.get("role") == "user" for m in messages):
        raise InputError("the request has no user message")
    if question is not None:
        if not question.strip():
            raise InputError("the 'question' field is empty")
        return "\n\n".join(t for t in texts if t.strip()), question.strip()
    last = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    content = str(messages[last].get("content") or "").strip()
    head, sep, tail = content.rpartition("\n\n")
    if not sep or not head.strip() or not tail.strip():
        raise InputError(
            "cannot tell the document from the question: put the question in the last "
            "paragraph of the last user message (after a blank line), or send a 'question' field"
        )
    earlier = [
        str(m.get("content") or "")
        for m in messages[:last]
        if m.get("role") != "system" and str(m.get("content") or "").strip()
    ]
    return "\n\n".join([*earlier, head]), tail.strip()


def create_app(
    backend: ChatBackend, config: MemAgentConfig | None = None, *, tokenizer: Any = None
) -> Any:
    """A FastAPI app serving MemAgent over ``backend``.

    Args:
        backend: the chat backend the agent uses.
        config: MemAgent settings (default :class:`MemAgentConfig`).
        tokenizer: tokenizer counting tokens (default: the backend's, else the embedded one).
    """
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import JSONResponse

    agent = MemAgent(backend, config, tokenizer=tokenizer)
    app = FastAPI(title="lc-agents MemAgent", version="1")

    def _error(status: int, message: str, kind: str) -> JSONResponse:
        return JSONResponse(
            status_code=status,
            content={"error": {"message": message, "type": kind, "code": status}},
        )

    @app.exception_handler(HTTPException)
    async def _http_error(_: Any, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), "invalid_request_error")

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "lc-agents"}],
        }

    @app.post("/v1/chat/completions")
    def chat_completions(request: ChatRequest) -> Any:
        if request.stream:
            return _error(400, "streaming is not supported", "invalid_request_error")
        messages = [m.model_dump() for m in request.messages]
        try:
            document, question = split_request(messages, request.question)
            result = agent.run(document, question)
        except InputError as exc:
            return _error(400, str(exc), "invalid_request_error")
        except EmptyReplyError as exc:
            return _error(502, str(exc), "empty_reply")
        except BackendError as exc:
            return _error(502, str(exc), "backend_error")
        except AgentError as exc:
            return _error(500, str(exc), "server_error")
        completion_tokens = len(agent.tokenizer.encode(result.answer, add_special_tokens=False))
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model or MODEL_NAME,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": result.answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": result.document_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": result.document_tokens + completion_tokens,
            },
            "memagent": {
                "chunks": result.n_chunks,
                "memory": result.memory,
                "seconds": round(result.seconds, 3),
            },
        }

    return app
