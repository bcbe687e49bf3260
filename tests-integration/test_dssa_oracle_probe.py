"""The oracle-selection probe of benchmarks/dssa_oracle.py against brute force."""

from __future__ import annotations

import importlib.util
import math
import pathlib
import sys

import pytest
import torch

from lc_attention.dssa import DSSAConfig
from lc_attention.dssa.attention import dense_attention

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def oracle():
    spec = importlib.util.spec_from_file_location("dssa_oracle", ROOT / "benchmarks/dssa_oracle.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["dssa_oracle"] = module
    spec.loader.exec_module(module)
    return module


def _qkv(t: int, s: int, hq: int = 4, hkv: int = 2, d: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, t, hq, d, generator=g)
    k = torch.randn(1, s, hkv, d, generator=g)
    v = torch.randn(1, s, hkv, d, generator=g)
    return q, k, v


@pytest.mark.parametrize(("query_block", "t"), [(1, 40), (8, 40), (8, 37)])
def test_block_scores_are_the_true_attention_mass(oracle, query_block: int, t: int) -> None:
    s, bs = 80, 16
    q, k, _ = _qkv(t, s)
    cfg = DSSAConfig(
        kernel_size=8,
        stride=8,
        block_size=bs,
        window=16,
        topk=3,
        dense_len=0,
        query_block=query_block,
    )
    start, scale = s - t, 0.3
    got = oracle.oracle_block_scores(q, k, start, cfg, scale)
    ng = (start + t - 1) // query_block - start // query_block + 1
    want = torch.zeros(1, ng, 2, s // bs, dtype=torch.float64)
    for i in range(t):
        p = start + i
        grp = p // query_block - start // query_block
        for h in range(4):
            logits = [scale * float(q[0, i, h] @ k[0, j, h // 2]) for j in range(p + 1)]
            m = max(logits)
            z = sum(math.exp(x - m) for x in logits)
            for j, x in enumerate(logits):
                want[0, grp, h // 2, j // bs] += math.exp(x - m) / z
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("query_block", [1, 16])
def test_with_every_block_kept_the_oracle_is_dense_attention(oracle, query_block: int) -> None:
    q, k, v = _qkv(128, 128)
    cfg = DSSAConfig(
        kernel_size=16,
        stride=16,
        block_size=16,
        window=16,
        topk=8,
        dense_len=0,
        query_block=query_block,
    )
    out = oracle.oracle_dssa_attention(q, k, v, cfg)
    ref = dense_attention(q, k, v, 1 / math.sqrt(8), None)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_the_oracle_keeps_the_block_that_holds_the_attention(oracle) -> None:
    # One key aligned with every query: the oracle must attend to its block, and the
    # output is then that key's value for every query after it.
    q, k, v = _qkv(32, 256, hq=2, hkv=1, d=8, seed=1)
    q = q * 0.01
    k[0, 70] = 0.0
    k[0, 70, 0, 0] = 40.0
    q[0, :, :, 0] = 1.0
    cfg = DSSAConfig(
        kernel_size=16,
        stride=16,
        block_size=16,
        window=16,
        topk=3,
        dense_len=0,
        query_block=16,
    )
    out = oracle.oracle_dssa_attention(q, k, v, cfg)
    torch.testing.assert_close(out[0, :, 0], v[0, 70, 0].expand(32, 8), rtol=1e-3, atol=1e-3)
