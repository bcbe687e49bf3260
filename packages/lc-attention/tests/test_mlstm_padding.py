"""The mLSTM kernel path pads the sequence to the chunk multiple the kernel requires.

NX-AI's ``mlstm_kernels`` chunkwise kernel needs CUDA and ``T`` a multiple of its chunk
size. Here a stand-in for that kernel (the exact parallel form, refusing any ``T`` that is
not a multiple of the chunk) runs the padding and unpadding on CPU.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from lc_attention.linear.mlstm import (
    MLSTM_KERNEL_CHUNK,
    mlstm,
    mlstm_chunkwise_padded,
    mlstm_parallel,
)

# the module (``lc_attention.linear.mlstm`` as an attribute is the function of that name)
mlstm_mod = importlib.import_module("lc_attention.linear.mlstm")

torch.set_num_threads(1)


def _standin_chunkwise_kernel(*, q, k, v, i, f, eps):
    """Stand-in for ``mlstm_kernels``' ``chunkwise--triton_xl_chunk`` (``[B, H, T, D]``
    inputs, ``[B, H, T]`` gates): the parallel form, with the kernel's length rule."""
    t = q.shape[2]
    if t % MLSTM_KERNEL_CHUNK or t % 16:
        raise AssertionError(f"the chunkwise kernel needs T % {MLSTM_KERNEL_CHUNK} == 0, got {t}")
    tr = [x.transpose(1, 2) for x in (q, k, v, i, f)]
    return mlstm_parallel(*tr, eps=eps)[0].transpose(1, 2)


def _inputs(t: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(2, t, 2, 8, generator=g, dtype=torch.float64) for _ in range(2))
    v = torch.randn(2, t, 2, 4, generator=g, dtype=torch.float64)
    i, f = (torch.randn(2, t, 2, generator=g, dtype=torch.float64) for _ in range(2))
    return [x.requires_grad_() for x in (q, k, v, i, f)]


@pytest.mark.parametrize("t", [1, 17, 128, 131])
def test_padded_kernel_call_equals_the_parallel_form_forward_and_backward(t: int) -> None:
    xs = _inputs(t, seed=t)
    got = mlstm_chunkwise_padded(_standin_chunkwise_kernel, *xs, eps=1e-6)
    want = mlstm_parallel(*xs, eps=1e-6)[0]
    assert got.shape == want.shape == (2, t, 2, 4)
    torch.testing.assert_close(got, want)
    w = torch.randn(want.shape, generator=torch.Generator().manual_seed(1), dtype=want.dtype)
    g_got = torch.autograd.grad((got * w).sum(), xs)
    g_want = torch.autograd.grad((want * w).sum(), xs)
    for a, b in zip(g_got, g_want, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b)


def test_mlstm_kernel_backend_pads_any_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """``mlstm(backend=...)`` on the kernel path, with the stand-in in place of the GPU
    kernel (and of the CUDA check), gives the PyTorch form's output for any ``T``."""
    monkeypatch.setattr(mlstm_mod, "resolve", lambda backend, allowed, x: "mlstm_kernels")
    monkeypatch.setattr(mlstm_mod, "load", lambda module, name: lambda _: _standin_chunkwise_kernel)
    xs = [x.detach() for x in _inputs(45, seed=3)]
    got = mlstm(*xs, backend="mlstm_kernels")
    torch.testing.assert_close(got, mlstm(*xs, backend="torch"))
