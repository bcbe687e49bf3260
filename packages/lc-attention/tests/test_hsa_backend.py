"""HSA's chunk attention takes the shared backend vocabulary."""

from __future__ import annotations

import pytest
import torch

import lc_kernels
from lc_attention.hsa import HSATransformerConfig
from lc_attention.hsa.attention import hsa_attention
from lc_attention.hsa.retrieval import chunk_scores, select_chunks
from lc_kernels import Backend


def _inputs() -> tuple[torch.Tensor, ...]:
    """Queries over 4 chunks of 16 tokens (the Triton kernels' smallest block), 2 KV heads
    of 2 query heads each, chunks chosen causally by random retrieval scores."""
    g = torch.Generator().manual_seed(3)
    b, c, s, gk, h, d, dr = 1, 4, 16, 2, 4, 16, 8
    t = c * s + 5
    q = torch.randn(b, t, h, d, generator=g)
    ck = torch.randn(b, c, s, gk, d, generator=g)
    cv = torch.randn(b, c, s, gk, d, generator=g)
    rq = torch.randn(b, t, gk, dr, generator=g)
    lm = torch.randn(b, c, gk, dr, generator=g)
    idx, w = select_chunks(chunk_scores(rq, lm, s), top_k=2)
    return q, ck, cv, idx, w


def test_triton_matches_the_gather_path_under_the_interpreter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    q, ck, cv, idx, w = _inputs()
    ref = hsa_attention(q, ck, cv, idx, w, backend="torch")
    seen: list[object] = []
    real = lc_kernels.selected_attention

    def spy(*args: object, **kwargs: object) -> torch.Tensor:
        seen.append(kwargs.get("backend"))
        return real(*args, **kwargs)

    monkeypatch.setattr(lc_kernels, "selected_attention", spy)
    out = hsa_attention(q, ck, cv, idx, w, backend="triton")
    assert seen == [Backend.TRITON, Backend.TRITON]  # one call per selected slot
    rel = (out - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()
    assert float(rel) < 1e-5


def test_the_old_kernel_spelling_is_refused_with_the_new_one() -> None:
    q, ck, cv, idx, w = _inputs()
    with pytest.raises(
        ValueError,
        match=r"^backend='kernel' was removed in lc-attention 0\.16; "
        r"use backend='triton' \(Backend\.TRITON\)$",
    ):
        hsa_attention(q, ck, cv, idx, w, backend="kernel")
    with pytest.raises(
        ValueError,
        match=r"^HSATransformerConfig\.backend='kernel' was removed in lc-attention 0\.16; "
        r"use HSATransformerConfig\.backend='triton'",
    ):
        HSATransformerConfig(vocab_size=16, backend="kernel")


def test_a_backend_outside_the_vocabulary_is_refused_by_name() -> None:
    q, ck, cv, idx, w = _inputs()
    with pytest.raises(ValueError, match=r"\('auto', 'torch', 'triton'\), got 'fla'"):
        hsa_attention(q, ck, cv, idx, w, backend="fla")
    with pytest.raises(ValueError, match=r"HSATransformerConfig\.backend must be one of"):
        HSATransformerConfig(vocab_size=16, backend="gather")
