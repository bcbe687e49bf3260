"""Renamed parameters: old keyword spellings that keep working, with a warning, for a while.

lc-kernels and lc-attention spell each concept one way (``topk`` for a number of
selected blocks or positions, ``window`` for a number of recent tokens, ``stride`` for
the distance between compressed spans). A parameter or config field that was spelled
otherwise keeps its old keyword until the release named in its warning:

- [renamed_params][lc_kernels.renames.renamed_params] wraps a function;
- [renamed_fields][lc_kernels.renames.renamed_fields] wraps a dataclass (its
  constructor, ``dataclasses.replace``, and a read-only alias for the old attribute);
- [renamed_kwargs][lc_kernels.renames.renamed_kwargs] maps a ``**overrides`` dict (presets).

An error raised while checking such a value names it as the caller spelled it
([spelled][lc_kernels.renames.spelled]), so old code keeps its old messages.
"""

from __future__ import annotations

import functools
import warnings
import weakref
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=type)

#: new name -> old name, for the parameters the current call spelled the old way
_CALL: ContextVar[Mapping[str, str] | None] = ContextVar("lc_renamed_call", default=None)
#: the same for objects built with old keywords, by ``id`` (removed when they die)
_OBJECTS: dict[int, Mapping[str, str]] = {}


def _message(owner: str, old: str, new: str, removal: str) -> str:
    return f"{owner}: {old}= is deprecated and will be removed in {removal}; use {new}="


def _remap(
    owner: str,
    renames: Mapping[str, str],
    removal: str,
    kwargs: dict[str, Any],
    stacklevel: int,
) -> dict[str, str]:
    """Move old keywords of ``kwargs`` to their new names, in place, with a warning each.

    Returns ``{new: old}`` for the keywords moved.
    """
    used: dict[str, str] = {}
    for old, new in renames.items():
        if old not in kwargs:
            continue
        if new in kwargs:
            raise TypeError(f"{owner}: give {new}= or the deprecated {old}=, not both")
        warnings.warn(_message(owner, old, new, removal), DeprecationWarning, stacklevel)
        kwargs[new] = kwargs.pop(old)
        used[new] = old
    return used


def renamed_kwargs(
    owner: str,
    renames: Mapping[str, str],
    removal: str,
    kwargs: dict[str, Any],
    stacklevel: int = 4,
) -> dict[str, Any]:
    """``kwargs`` with its old keywords moved to their new names (a copy), warning on each.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True):
        ...     renamed_kwargs("f", {"top_k": "topk"}, "0.10", {"top_k": 3})
        {'topk': 3}
    """
    out = dict(kwargs)
    _remap(owner, renames, removal, out, stacklevel)
    return out


def renamed_params(
    renames: Mapping[str, str], removal: str
) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a function whose keywords ``renames`` (old -> new) were renamed.

    Calling it with an old keyword warns (``DeprecationWarning`` naming the new keyword
    and ``removal``, the release that drops the old one) and passes the value on under
    the new name; giving both raises ``TypeError``.

    Example:
        >>> import warnings
        >>> @renamed_params({"top_k": "topk"}, "lc-kernels 0.10")
        ... def pick(topk: int = 1) -> int:
        ...     return topk
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always")
        ...     pick(top_k=3), str(w[0].message)
        (3, 'pick: top_k= is deprecated and will be removed in lc-kernels 0.10; use topk=')
    """

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        owner = fn.__qualname__.removesuffix(".__init__")

        @functools.wraps(fn)
        def inner(*args: P.args, **kwargs: P.kwargs) -> R:
            if not any(old in kwargs for old in renames):
                return fn(*args, **kwargs)
            used = _remap(owner, renames, removal, kwargs, 3)
            token = _CALL.set(used)
            try:
                return fn(*args, **kwargs)
            finally:
                _CALL.reset(token)

        return inner

    return wrap


def renamed_fields(renames: Mapping[str, str], removal: str) -> Callable[[C], C]:
    """Decorate a dataclass whose fields ``renames`` (old -> new) were renamed.

    The constructor accepts the old keywords with a ``DeprecationWarning``; reading the
    old attribute warns and returns the new one (``dataclasses.replace`` takes the new
    names only).

    Example:
        >>> import dataclasses, warnings
        >>> @renamed_fields({"window_size": "window"}, "lc-attention 0.17")
        ... @dataclasses.dataclass(frozen=True)
        ... class Cfg:
        ...     window: int = 4
        >>> with warnings.catch_warnings(record=True):
        ...     warnings.simplefilter("always")
        ...     Cfg(window_size=8), Cfg(window=8).window_size
        (Cfg(window=8), 8)
    """

    def wrap(cls: C) -> C:
        owner = cls.__name__
        init = cls.__init__  # type: ignore[misc]

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            if not any(old in kwargs for old in renames):
                init(self, *args, **kwargs)
                return
            used = _remap(owner, renames, removal, kwargs, 3)
            token = _CALL.set(used)
            try:
                init(self, *args, **kwargs)
            finally:
                _CALL.reset(token)
            key = id(self)
            _OBJECTS[key] = used
            weakref.finalize(self, _OBJECTS.pop, key, None)

        cls.__init__ = __init__  # type: ignore[misc]
        for old, new in renames.items():

            def alias(self: Any, _old: str = old, _new: str = new) -> Any:
                msg = (
                    f"{owner}.{_old} is deprecated and will be removed in {removal}; "
                    f"use {owner}.{_new}"
                )
                warnings.warn(msg, DeprecationWarning, 2)
                return getattr(self, _new)

            setattr(cls, old, property(alias, doc=f"Deprecated alias of ``{new}``."))
        return cls

    return wrap


def spelled(new: str, obj: object | None = None) -> str:
    """How the caller spelled parameter ``new``: its old name if the current call (or
    the construction of ``obj``) used the old keyword, else ``new``. For error messages.

    Example:
        >>> spelled("topk")
        'topk'
    """
    if obj is not None and id(obj) in _OBJECTS:
        return _OBJECTS[id(obj)].get(new, new)
    return (_CALL.get() or {}).get(new, new)
