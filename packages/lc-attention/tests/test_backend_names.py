"""One backend vocabulary across the methods (lc_kernels.Backend); old spellings are refused."""

from __future__ import annotations

import warnings

import pytest
import torch

from lc_attention.dssa import DSSAConfig
from lc_attention.linear import gated_linear_attention, mlstm
from lc_attention.lychee import LycheeConfig, hybrid_decode_attention
from lc_kernels import Backend


def _decode_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 4, 8, generator=g), *(torch.randn(2, 40, 2, 8, generator=g),) * 2


@pytest.mark.parametrize(("old", "new"), [("gather", Backend.TORCH), ("kernels", Backend.TRITON)])
def test_lychee_old_spellings_are_refused_with_the_new_one(old: str, new: Backend) -> None:
    message = (
        rf"backend='{old}' was removed in lc-attention 0\.16; "
        rf"use backend='{new.value}' \(Backend\.{new.name}\)"
    )
    with pytest.raises(ValueError, match=message):
        LycheeConfig(backend=old)
    q, k, v = _decode_inputs()
    retrieval = [True, False, True, False]
    idx = torch.randint(0, 40, (2, 4, 6), generator=torch.Generator().manual_seed(1))
    with pytest.raises(ValueError, match=message):
        hybrid_decode_attention(q, k, v, retrieval=retrieval, indices=idx, topk=6, backend=old)
    # the new spelling takes the old one's place
    assert LycheeConfig(backend=new.value).backend is new


def test_new_spellings_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert LycheeConfig(backend="torch").backend is Backend.TORCH
        assert LycheeConfig(backend=Backend.TRITON).backend is Backend.TRITON
        assert DSSAConfig(backend="triton").backend is Backend.TRITON
        assert DSSAConfig(backend=Backend.TORCH) == DSSAConfig(backend="torch")
        q, k, v = _decode_inputs()
        hybrid_decode_attention(
            q, k, v, retrieval=[True] * 4, indices=None, topk=5, backend=Backend.TORCH
        )


def test_each_method_names_the_backends_it_has() -> None:
    with pytest.raises(
        ValueError, match=r"DSSAConfig.backend must be one of \('auto', 'triton', 'torch'\)"
    ):
        DSSAConfig(backend="fla")
    with pytest.raises(ValueError, match=r"one of \('auto', 'torch', 'triton'\), got 'kernel'"):
        LycheeConfig(backend="kernel")
    x = torch.randn(1, 5, 2, 4)
    with pytest.raises(ValueError, match=r"one of \('auto', 'torch', 'fla'\)"):
        gated_linear_attention(x, x, x, -torch.rand(1, 5, 2, 4), backend=Backend.TRITON)
    i = torch.zeros(1, 5, 2)
    with pytest.raises(ValueError, match=r"one of \('auto', 'torch', 'mlstm_kernels'\)"):
        mlstm(x, x, x, i, i, backend="triton")
    torch.testing.assert_close(
        mlstm(x, x, x, i, i, backend=Backend.TORCH), mlstm(x, x, x, i, i, backend="torch")
    )


def test_triton_on_cpu_without_interpreter_is_a_clear_error(monkeypatch) -> None:
    """``"triton"`` means lc-kernels' Triton kernels everywhere: on CPU tensors they need
    the interpreter (the removed ``"kernels"`` fell back to the references there)."""
    import lc_kernels._common

    # as without TRITON_INTERPRET=1 (the variable itself must stay: triton reads it once)
    monkeypatch.setattr(lc_kernels._common, "interpreter_on", lambda: False)
    q, k, v = _decode_inputs()
    with pytest.raises(ValueError, match="backend='triton' needs CUDA tensors"):
        hybrid_decode_attention(
            q, k, v, retrieval=[True] * 4, indices=None, topk=5, backend="triton"
        )
    with pytest.raises(ValueError, match="backend='kernels' was removed"):
        hybrid_decode_attention(
            q, k, v, retrieval=[True] * 4, indices=None, topk=5, backend="kernels"
        )
