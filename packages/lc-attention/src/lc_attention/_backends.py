"""Backend spellings that lc-attention no longer accepts, refused with the one to use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lc_kernels.backend import Backend, parse_backend


def check_backend(
    value: object,
    allowed: Iterable[Backend],
    removed: Mapping[str, Backend],
    name: str = "backend",
) -> Backend:
    """[parse_backend][lc_kernels.backend.parse_backend] that names the replacement of a
    removed spelling.

    Args:
        value: a [Backend][lc_kernels.backend.Backend] or its string.
        allowed: the members the op accepts.
        removed: spellings of earlier releases, each mapped to the member replacing it.
        name: the argument's name in messages.

    Raises:
        ValueError: ``value`` is a removed spelling (the message names its replacement)
            or not one of ``allowed`` (the message lists them).

    Example:
        >>> check_backend("torch", (Backend.AUTO, Backend.TORCH), {"gather": Backend.TORCH})
        <Backend.TORCH: 'torch'>
        >>> check_backend("gather", (Backend.AUTO, Backend.TORCH), {"gather": Backend.TORCH})
        Traceback (most recent call last):
        ...
        ValueError: backend='gather' was removed in lc-attention 0.16; use backend='torch' (Backend.TORCH)
    """
    if isinstance(value, str) and not isinstance(value, Backend) and value in removed:
        new = removed[value]
        raise ValueError(
            f"{name}={value!r} was removed in lc-attention 0.16; "
            f"use {name}={new.value!r} (Backend.{new.name})"
        )
    return parse_backend(value, allowed, name=name)
