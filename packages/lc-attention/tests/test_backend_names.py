"""One backend vocabulary across the methods (lc_kernels.Backend) and the old spellings."""

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
def test_lychee_old_spellings_warn_and_keep_working(old: str, new: Backend) -> None:
    with pytest.warns(DeprecationWarning, match=rf"backend='{old}' is deprecated.*'{new.value}'"):
        cfg = LycheeConfig(backend=old)
    assert cfg.backend == (old if old == "kernels" else new)
    q, k, v = _decode_inputs()
    retrieval = [True, False, True, False]
    idx = torch.randint(0, 40, (2, 4, 6), generator=torch.Generator().manual_seed(1))
    want = hybrid_decode_attention(
        q, k, v, retrieval=retrieval, indices=idx, topk=6, backend="torch"
    )
    with pytest.warns(DeprecationWarning, match=f"backend='{old}'"):
        got = hybrid_decode_attention(
            q, k, v, retrieval=retrieval, indices=idx, topk=6, backend=old
        )
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)


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
    the interpreter, which the deprecated ``"kernels"`` did not (it fell back to the
    references, as it still does for this release)."""
    import lc_kernels._common

    # as without TRITON_INTERPRET=1 (the variable itself must stay: triton reads it once)
    monkeypatch.setattr(lc_kernels._common, "interpreter_on", lambda: False)
    q, k, v = _decode_inputs()
    with pytest.raises(ValueError, match="backend='triton' needs CUDA tensors"):
        hybrid_decode_attention(
            q, k, v, retrieval=[True] * 4, indices=None, topk=5, backend="triton"
        )
    with pytest.warns(DeprecationWarning, match="backend='kernels'"):
        out, _ = hybrid_decode_attention(
            q, k, v, retrieval=[True] * 4, indices=None, topk=5, backend="kernels"
        )
    want, _ = hybrid_decode_attention(
        q, k, v, retrieval=[True] * 4, indices=None, topk=5, backend="torch"
    )
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
