"""The one backend vocabulary: parsing, errors, deprecated spellings, use by the ops."""

from __future__ import annotations

import warnings

import pytest
import torch

from lc_kernels import Backend, parse_backend
from lc_kernels._common import resolve_backend
from lc_kernels.backend import KERNEL_BACKENDS
from lc_kernels.decode import block_topk


def test_members_are_their_strings() -> None:
    assert [b.value for b in Backend] == ["auto", "torch", "triton", "fla", "mlstm_kernels"]
    assert Backend.TRITON == "triton"
    assert f"{Backend.TORCH}" == "torch"
    assert {"fla": 1}[Backend.FLA] == 1  # hashes as its string


@pytest.mark.parametrize("value", ["auto", "triton", "torch", *KERNEL_BACKENDS])
def test_parse_accepts_strings_and_members(value: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = parse_backend(value)
    assert got is Backend(value)


@pytest.mark.parametrize("value", ["cuda", "fla", "kernels", None, 3, Backend.FLA])
def test_parse_rejects_what_the_op_does_not_have(value: object) -> None:
    with pytest.raises(ValueError, match=r"backend must be one of \('auto', 'triton', 'torch'\)"):
        parse_backend(value)


def test_deprecated_spelling_warns_and_maps() -> None:
    with pytest.warns(DeprecationWarning, match=r"op.backend='old' is deprecated.*'torch'"):
        got = parse_backend("old", deprecated={"old": Backend.TORCH}, name="op.backend")
    assert got is Backend.TORCH
    with warnings.catch_warnings():  # a member is never taken for a deprecated spelling
        warnings.simplefilter("error")
        assert parse_backend(Backend.TORCH, deprecated={"torch": Backend.TRITON}) is Backend.TORCH


def test_resolve_backend_returns_members() -> None:
    cpu = torch.device("cpu")
    assert resolve_backend("auto", cpu, torch.float32) is Backend.TORCH
    assert resolve_backend(Backend.TORCH, cpu, torch.float16) is Backend.TORCH
    with pytest.raises(ValueError, match="backend must be one of"):
        resolve_backend("kernel", cpu, torch.float32)


def test_ops_take_members_like_strings() -> None:
    scores = torch.randn(2, 3, 40, generator=torch.Generator().manual_seed(0))
    a = block_topk(scores, 5, block_size=16, backend=Backend.TORCH)
    b = block_topk(scores, 5, block_size=16, backend="torch")
    torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="backend must be one of"):
        block_topk(scores, 5, block_size=16, backend=Backend.FLA)
