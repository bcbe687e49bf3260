"""One spelling per concept: the old keywords warn (naming the new one and the release
that removes them) and still behave the same."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

from lc_attention.dssa import DSSAConfig, dssa_attention
from lc_attention.hsa import HSATransformer, HSATransformerConfig, hsa_attention, select_chunks
from lc_attention.nsa import CompressionMLP, NSAConfig

REMOVAL = "lc-attention 0.17"


def _warns(old: str, new: str):
    return pytest.warns(DeprecationWarning, match=rf"{old}= is deprecated.*{REMOVAL}.*{new}=")


def test_dssa_window_size_is_window() -> None:
    with _warns("window_size", "window"):
        old = DSSAConfig(window_size=128, topk=4, block_size=64, dense_len=0)
    new = DSSAConfig(window=128, topk=4, block_size=64, dense_len=0)
    assert old == new
    with pytest.warns(DeprecationWarning, match=r"DSSAConfig.window_size .*DSSAConfig.window"):
        assert new.window_size == 128
    with _warns("window_size", "window"):
        assert DSSAConfig.small(window_size=128) == DSSAConfig.small(window=128)
    with _warns("window_size", "window"):
        assert DSSAConfig.training_free(window_size=64) == DSSAConfig.training_free(window=64)
    assert dataclasses.replace(old, window=64) == dataclasses.replace(new, window=64)
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 300, 4, 16, generator=g), torch.randn(1, 300, 2, 16, generator=g)
    torch.testing.assert_close(dssa_attention(q, k, k, old), dssa_attention(q, k, k, new))


def test_both_spellings_at_once_is_an_error() -> None:
    with pytest.raises(TypeError, match="not both"):
        DSSAConfig(window=64, window_size=64)


def test_new_spellings_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DSSAConfig.small(window=128)
        NSAConfig.small(topk=4, window=64, stride=4)
        HSATransformerConfig(vocab_size=8, topk=1, query_chunk=8)


def test_nsa_top_k_window_size_kernel_stride() -> None:
    kw = {"top_k": 4, "window_size": 64, "kernel_stride": 4}
    with (
        _warns("top_k", "topk"),
        _warns("window_size", "window"),
        _warns("kernel_stride", "stride"),
    ):
        old = NSAConfig.small(**kw)
    assert old == NSAConfig.small(topk=4, window=64, stride=4)
    with pytest.warns(DeprecationWarning, match=r"NSAConfig.top_k"):
        assert old.top_k == 4
    with _warns("kernel_stride", "stride"):
        mlp = CompressionMLP(8, kernel_stride=4, head_dim=8, hidden=16)
    assert mlp.stride == 4


def test_hsa_top_k_and_query_block() -> None:
    with _warns("top_k", "topk"), _warns("query_block", "query_chunk"):
        old = HSATransformerConfig(vocab_size=16, dim=32, chunk_size=4, window=8, top_k=2,
                                   query_block=8)  # fmt: skip
    new = HSATransformerConfig(vocab_size=16, dim=32, chunk_size=4, window=8, topk=2, query_chunk=8)
    assert old == new
    tokens = torch.randint(0, 16, (1, 24), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(HSATransformer(old)(tokens), HSATransformer(new)(tokens))
    scores = torch.randn(1, 5, 1, 4, generator=torch.Generator().manual_seed(1))
    with _warns("top_k", "topk"):
        i_old, w_old = select_chunks(scores, top_k=2)
    i_new, w_new = select_chunks(scores, topk=2)
    assert torch.equal(i_old, i_new)
    assert torch.equal(w_old, w_new)
    q = torch.randn(1, 8, 4, 16)
    kv = torch.randn(1, 2, 4, 2, 16)
    idx, w = torch.zeros(1, 8, 2, 1, dtype=torch.long), torch.ones(1, 8, 2, 1)
    with _warns("query_block", "query_chunk"):
        a = hsa_attention(q, kv, kv, idx, w, backend="torch", query_block=3)
    torch.testing.assert_close(a, hsa_attention(q, kv, kv, idx, w, backend="torch", query_chunk=3))


def test_errors_name_the_parameter_as_spelled() -> None:
    with _warns("top_k", "topk"), pytest.raises(ValueError, match="top_k"):
        NSAConfig(top_k=2)
    with pytest.raises(ValueError, match=r"^topk"):
        NSAConfig(topk=2)
