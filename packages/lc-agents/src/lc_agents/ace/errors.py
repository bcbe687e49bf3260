"""Exception types of the ACE playbook machinery.

All derive from :class:`lc_agents.errors.AgentError`; the validation errors also derive
from :class:`ValueError` so callers that only know the standard library can catch them.
"""

from __future__ import annotations

from lc_agents.errors import AgentError

__all__ = ["CuratorOutputError", "DeltaError", "UnknownBulletError"]


class DeltaError(AgentError, ValueError):
    """A delta operation is malformed (empty content, merge of a bullet with itself ...)."""


class UnknownBulletError(DeltaError):
    """A delta operation names a bullet id that the playbook does not hold."""


class CuratorOutputError(AgentError):
    """A model's reply could not be parsed into the structure a role needs."""
