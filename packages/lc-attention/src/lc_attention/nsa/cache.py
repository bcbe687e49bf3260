"""Decode-time state of an NSA layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NoReturn

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


def __getattr__(name: str) -> NoReturn:
    if name == "masked_attention":  # deprecated in 0.14, removed in 0.16
        raise AttributeError(
            f"{__name__}.masked_attention was removed in lc-attention 0.16; use "
            "torch.nn.functional.scaled_dot_product_attention with a boolean attn_mask "
            "(and zero the rows that see no key)",
            name=name,
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}", name=name)
