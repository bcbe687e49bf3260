"""Exception types of lc-agents.

Every error a user can cause (bad input, unreachable server, empty reply) derives from
:class:`AgentError`, so the CLI can print one clear line and exit non-zero instead of a
traceback.
"""

from __future__ import annotations


class AgentError(Exception):
    """Base class of the errors lc-agents raises on purpose."""


class ModelLoadError(AgentError):
    """A model or tokenizer could not be found or loaded."""


class BackendError(AgentError):
    """A chat backend failed to produce a reply."""


class BackendUnreachableError(BackendError):
    """The backend could not be reached (connection refused, DNS, timeout) after retries."""


class BackendHTTPError(BackendError):
    """The backend answered with an HTTP error status.

    Attributes:
        status_code: the HTTP status of the last response.
        body: the first characters of the response body, for the message.
    """

    def __init__(self, message: str, status_code: int, body: str = "") -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class EmptyReplyError(BackendError):
    """The model returned an empty reply where text was required."""


class InputError(AgentError):
    """The document or question given to an agent is unusable (empty, undecodable ...)."""


class CheckpointError(AgentError):
    """A checkpoint file does not belong to the run that tries to resume from it."""
