"""Decode-time hyper-parameters of LycheeDecode."""

from __future__ import annotations

from dataclasses import dataclass

BACKENDS = ("auto", "kernels", "gather")


@dataclass(frozen=True)
class LycheeConfig:
    """How hybrid-head decoding runs (the roles themselves live in a ``RoleMap``).

    Args:
        topk: token positions each retrieval head publishes and each sparse head
            attends to (the paper's token budget).
        block_size: block length of the block-wise top-k of the retrieval heads (the
            ``"kernels"`` backend keeps a partial top-k per block, then merges; the
            ``"gather"`` backend keeps the ``topk`` blocks with the largest maxima, then
            selects among their elements). Both give the exact top-k, so this is a speed
            knob, not a quality knob.
        backend: ``"kernels"`` calls ``lc_kernels.decode`` (Triton on CUDA, its
            references elsewhere); ``"gather"`` is plain PyTorch that reads only the
            selected rows of the cache (the fast path on CPU); ``"auto"`` picks
            ``"kernels"`` on CUDA and ``"gather"`` elsewhere.

    Raises:
        ValueError: a field out of range (the message names field, value and allowed).

    Example:
        >>> LycheeConfig(topk=128).block_size
        16
    """

    topk: int = 256
    block_size: int = 16
    backend: str = "auto"

    def __post_init__(self) -> None:
        for name in ("topk", "block_size"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
