"""Decode-time state of an NSA layer."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import torch


@dataclass
class NSACache:
    """Key/value cache of one [NativeSparseAttention][lc_attention.nsa.layer.NativeSparseAttention] layer.

    Holds the unrotated keys and values seen so far (``[B, L, H_kv, D]``), their RoPE'd
    keys, and the compressed keys/values of every complete span (``[B, C, H_kv, D]``).
    New spans are compressed as soon as their last token arrives, so each step costs
    O(new tokens) compression work. Start with an empty ``NSACache()``.
    """

    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    k_rot: torch.Tensor | None = None
    k_cmp: torch.Tensor | None = None
    v_cmp: torch.Tensor | None = None
    meta: dict[str, int] = field(default_factory=dict)

    @property
    def length(self) -> int:
        """Number of cached tokens."""
        return 0 if self.k is None else int(self.k.shape[1])


def masked_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float
) -> torch.Tensor:
    """``q [B, n, HQ, D]`` over ``k, v [B, L, H_kv, D]`` with ``mask [B, n, H_kv or 1, L]``;
    empty rows give 0.

    Deprecated (removed in 0.15): NSA's decoding calls lc-kernels' compressed attention
    and the package's shared masked SDPA instead.
    """
    warnings.warn(
        "lc_attention.nsa.cache.masked_attention is deprecated and will be removed in 0.15",
        DeprecationWarning,
        stacklevel=2,
    )
    from lc_attention._sdpa import masked_sdpa

    return masked_sdpa(q, k, v, mask.permute(0, 2, 1, 3), scale)
