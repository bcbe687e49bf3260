"""Field checks of the config dataclasses, with one error message format.

A config's ``__post_init__`` lists ``(field, value, ok, allowed)`` and calls
:func:`check_fields`, which raises for the first failing check::

    ValueError: LdarConfig.heads=0 is invalid; allowed: >= 1
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["check_fields"]


def check_fields(owner: str, checks: Iterable[tuple[str, Any, bool, str]]) -> None:
    """Raise ``ValueError`` for the first ``(name, value, ok, allowed)`` whose ``ok`` is false.

    Args:
        owner: the config's class name, which prefixes the field in the message.
        checks: per field, its name, its value, whether it is valid, and a short phrase
            of what is allowed.

    Raises:
        ValueError: ``"{owner}.{name}={value!r} is invalid; allowed: {allowed}"``.

    Examples:
        >>> check_fields("Cfg", [("k", 3, True, ">= 1")])
        >>> check_fields("Cfg", [("k", 0, False, ">= 1")])
        Traceback (most recent call last):
        ...
        ValueError: Cfg.k=0 is invalid; allowed: >= 1
    """
    for name, value, ok, allowed in checks:
        if not ok:
            raise ValueError(f"{owner}.{name}={value!r} is invalid; allowed: {allowed}")
