"""One vocabulary for the choice of compute path, shared by lc-kernels and lc-attention.

Every public function or config of the two packages that lets the caller pick how an op
is computed takes a ``backend`` argument whose value is a [Backend][lc_kernels.backend.Backend]
member or its string. The words mean the same thing everywhere:

- ``"auto"``: the fastest path the inputs allow (a GPU kernel for CUDA tensors when one is
  installed, PyTorch elsewhere);
- ``"torch"``: plain PyTorch, on any device;
- ``"triton"``: lc-kernels' Triton kernels (CUDA tensors, or CPU tensors under Triton's
  interpreter, ``TRITON_INTERPRET=1``);
- ``"fla"``: flash-linear-attention's kernels (optional library, CUDA only);
- ``"mlstm_kernels"``: NX-AI's ``mlstm_kernels`` (optional library, CUDA only).

Each op accepts the subset it has (e.g. ``(auto, torch, triton)`` for the kernels of this
package, ``(auto, torch, fla)`` for gated linear attention) and names that subset in its
error message. Spellings that an op accepted before this enum existed are mapped to a
member with a ``DeprecationWarning`` for one release
([parse_backend][lc_kernels.backend.parse_backend]'s ``deprecated``).
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Iterable, Mapping


class Backend(enum.StrEnum):
    """How an op is computed. A ``str`` enum: ``Backend.TRITON == "triton"``.

    Example:
        >>> Backend("triton") is Backend.TRITON, Backend.TORCH == "torch"
        (True, True)
    """

    AUTO = "auto"
    TORCH = "torch"
    TRITON = "triton"
    FLA = "fla"
    MLSTM_KERNELS = "mlstm_kernels"


#: the backends of every lc-kernels op
KERNEL_BACKENDS: tuple[Backend, ...] = (Backend.AUTO, Backend.TRITON, Backend.TORCH)


def parse_backend(
    value: object,
    allowed: Iterable[Backend] = KERNEL_BACKENDS,
    *,
    deprecated: Mapping[str, Backend] | None = None,
    name: str = "backend",
    stacklevel: int = 3,
) -> Backend:
    """Check ``value`` against the backends an op accepts and return it as a member.

    Args:
        value: a [Backend][lc_kernels.backend.Backend] or its string.
        allowed: the members this op accepts.
        deprecated: old spellings still accepted for one release, each mapped to the
            member that replaces it; using one warns with a ``DeprecationWarning``.
        name: the argument's name in messages (e.g. ``"DSSAConfig.backend"``).
        stacklevel: passed to ``warnings.warn`` (3: the caller of the caller).

    Returns:
        The member.

    Raises:
        ValueError: ``value`` is not one of ``allowed`` (the message lists them).

    Warns:
        DeprecationWarning: ``value`` is one of the ``deprecated`` spellings.

    Example:
        >>> parse_backend("torch")
        <Backend.TORCH: 'torch'>
        >>> parse_backend("fla", (Backend.AUTO, Backend.TORCH))
        Traceback (most recent call last):
        ...
        ValueError: backend must be one of ('auto', 'torch'), got 'fla'
    """
    allowed = tuple(allowed)
    if deprecated and isinstance(value, str) and not isinstance(value, Backend):
        new = deprecated.get(value)
        if new is not None:
            warnings.warn(
                f"{name}={value!r} is deprecated and will be removed in the next release; "
                f"use {name}={new.value!r} (Backend.{new.name})",
                DeprecationWarning,
                stacklevel=stacklevel,
            )
            return new
    member: Backend | None = None
    if isinstance(value, str):
        try:
            member = Backend(value)
        except ValueError:
            member = None
    if member is None or member not in allowed:
        names = tuple(a.value for a in allowed)
        raise ValueError(f"{name} must be one of {names}, got {value!r}")
    return member
