"""Names that moved to another module: they still resolve, with a ``DeprecationWarning``.

A module lists its moved names in a mapping ``{name: new_module}`` and ends with::

    def __getattr__(name: str) -> Any:
        return moved_attribute(__name__, name, _MOVED)

so ``from lc_agents.ace import Embedder`` keeps working for one release and says where
the name lives now.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from importlib import import_module
from typing import Any

__all__ = ["REMOVED_IN", "moved_attribute"]

REMOVED_IN = "0.10"


def moved_attribute(module: str, name: str, moved: Mapping[str, str]) -> Any:
    """The object ``name`` of module ``module`` that now lives in ``moved[name]``.

    Args:
        module: the old module's ``__name__``.
        name: the attribute asked for.
        moved: ``{name: new_module}`` of the old module.

    Returns:
        ``getattr(import_module(moved[name]), name)``, after a ``DeprecationWarning``
        naming the new import path.

    Raises:
        AttributeError: ``name`` is not a moved name (the usual module error).

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     f = moved_attribute("old.place", "sqrt", {"sqrt": "math"})
        >>> f(9.0), caught[0].category.__name__
        (3.0, 'DeprecationWarning')
        >>> str(caught[0].message)
        'old.place.sqrt is deprecated and will be removed in lc-agents 0.10; import it from math'
    """
    target = moved.get(name)
    if target is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated and will be removed in lc-agents {REMOVED_IN}; "
        f"import it from {target}",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(import_module(target), name)
