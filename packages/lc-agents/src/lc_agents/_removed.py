"""Names removed after their deprecation: using one raises an error that names its
replacement.

A module lists its removed names in a mapping ``{name: home_module}`` and ends with::

    def __getattr__(name: str) -> NoReturn:
        raise removed_attribute(__name__, name, _REMOVED)

A class replaces a removed method by ``old = RemovedMethod("new")``: reading it raises
``AttributeError`` (so ``hasattr`` is false) naming the method to call instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

__all__ = ["RemovedMethod", "removed_attribute"]

_RELEASE = "lc-agents 0.11"


def removed_attribute(module: str, name: str, homes: Mapping[str, str]) -> AttributeError:
    """The error for attribute ``name`` of module ``module``, which is not there.

    Args:
        module: the module's ``__name__``.
        name: the attribute asked for.
        homes: ``{name: new_module}`` of the names removed from ``module``.

    Returns:
        An ``AttributeError`` naming the new module of a removed name, else the usual
        "has no attribute" error.

    Examples:
        >>> str(removed_attribute("old.place", "sqrt", {"sqrt": "math"}))
        'old.place.sqrt was removed in lc-agents 0.11; import it from math'
        >>> str(removed_attribute("old.place", "cbrt", {"sqrt": "math"}))
        "module 'old.place' has no attribute 'cbrt'"
    """
    home = homes.get(name)
    if home is None:
        return AttributeError(f"module {module!r} has no attribute {name!r}", name=name)
    return AttributeError(
        f"{module}.{name} was removed in {_RELEASE}; import it from {home}", name=name
    )


class RemovedMethod:
    """A class attribute standing for a removed method; reading it raises ``AttributeError``.

    Examples:
        >>> class Box:
        ...     def size(self) -> int:
        ...         return 3
        ...     length = RemovedMethod("size")
        >>> hasattr(Box(), "length")
        False
        >>> Box().length()
        Traceback (most recent call last):
        ...
        AttributeError: Box.length was removed in lc-agents 0.11; call size
    """

    def __init__(self, replacement: str) -> None:
        self.replacement = replacement
        self.qualname = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.qualname = f"{owner.__name__}.{name}"

    def __get__(self, obj: Any, owner: type | None = None) -> NoReturn:
        raise AttributeError(
            f"{self.qualname} was removed in {_RELEASE}; call {self.replacement}",
            name=self.name,
            obj=obj,
        )
