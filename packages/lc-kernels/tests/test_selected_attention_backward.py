"""The shared backward of selected attention: exact against the reference, no atomics,
and a float scratch of at most twice the bytes of ``q``.

The scratch is measured by recording every new floating-point storage the backward
launcher creates (a ``TorchDispatchMode``), apart from its outputs dQ, dK, dV.
"""

from __future__ import annotations

import inspect
import itertools

import pytest
import torch
from lck_helpers import random_selection, rel_rms
from torch.utils._python_dispatch import TorchDispatchMode

from lc_kernels import selected_attention
from lc_kernels.selected_attention import triton as kernels
from lc_kernels.selected_attention.function import build_plan, dedup_indices, query_layout

torch.set_num_threads(1)


class _NewFloatStorages(TorchDispatchMode):
    """Bytes of each floating-point storage first seen as an op's output."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for x in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0:
                st = x.untyped_storage()
                self.seen.setdefault(st.data_ptr(), st.nbytes())
        return out


def _packed(seed, n, hkv, g, d, s, bs, forced=True):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(n, hkv * g, d, generator=gen)
    k, v = (torch.randn(n, hkv, d, generator=gen) for _ in range(2))
    do = torch.randn(n, hkv * g, d, generator=gen)
    idx = random_selection(gen, 1, n, hkv, s, bs, p_unused=0.1).view(n, hkv, s)
    if forced:  # every query selects block 0: one long block -> query list per head
        idx[:, :, 0] = 0
    return q, k, v, do, dedup_indices(idx.int()).contiguous()


def _backward(q, k, v, do, idx, bs, chunk=None):
    n = q.shape[0]
    cu = torch.tensor([0, n])
    plan = build_plan(idx, cu, bs, 1 << 30)
    _, kbos, qpos = query_layout(cu, cu, n)
    o, lse = kernels.nsa_forward(q, k, v, idx, kbos, qpos, None, bs, 0.3)
    return kernels.selected_backward(
        q, k, v, idx, kbos, qpos, None, plan, o, lse, do, bs, 0.3, chunk=chunk
    )


def _reference_grads(q, k, v, do, idx, bs):
    qq, kk, vv = (x.double().unsqueeze(0).requires_grad_(True) for x in (q, k, v))
    o = selected_attention(qq, kk, vv, idx.unsqueeze(0), bs, 0.3, backend="torch")
    o.backward(do.double().unsqueeze(0))
    return [x.grad[0] for x in (qq, kk, vv)]


@pytest.mark.parametrize("chunk", [None, 3])
def test_backward_matches_reference_with_and_without_partials(chunk):
    """``chunk=3`` cuts every block's query list into many chunks (the partial path)."""
    q, k, v, do, idx = _packed(0, 50, 2, 2, 16, 3, 16)
    got = _backward(q, k, v, do, idx, 16, chunk)
    for name, a, r in zip(("dq", "dk", "dv"), got, _reference_grads(q, k, v, do, idx, 16)):
        assert rel_rms(a, r) < 1e-5, name


def test_backward_scratch_is_what_it_reports_and_at_most_twice_q():
    q, k, v, do, idx = _packed(1, 64, 1, 2, 16, 4, 16)
    n, hq, d = q.shape
    cu = torch.tensor([0, n])
    plan = build_plan(idx, cu, 16, 1 << 30)
    _, kbos, qpos = query_layout(cu, cu, n)
    o, lse = kernels.nsa_forward(q, k, v, idx, kbos, qpos, None, 16, 0.3)
    before = {x.untyped_storage().data_ptr() for x in (q, k, v, do, o, lse)}
    rec = _NewFloatStorages()
    with rec:
        dq, dk, dv = kernels.selected_backward(
            q, k, v, idx, kbos, qpos, None, plan, o, lse, do, 16, 0.3
        )
    skip = before | {x.untyped_storage().data_ptr() for x in (dq, dk, dv)}
    scratch = sum(b for p, b in rec.seen.items() if p not in skip)
    told = kernels.backward_scratch_bytes(n, hq, 1, d, 4, 16, q.dtype, plan["blk_bos"].numel())
    assert scratch == told["partials"] + told["delta"]
    assert scratch <= 2 * q.numel() * q.element_size()


def test_backward_scratch_budget_over_training_shapes():
    """The reported scratch (float buffers and work lists) stays within 2x ``q`` where the
    partial dQ of the former FSA backward took ``S`` times ``q`` in fp32."""
    worst = 0.0
    grid = itertools.product(
        (4096, 65536),  # N
        (1, 2, 4, 8, 16),  # G
        (1, 2, 8),  # H_kv
        (64, 128),  # D
        (1, 16, 32),  # S
        (16, 64, 128),  # block size
        (torch.float16, torch.bfloat16, torch.float32),
    )
    for n, g, hkv, d, s, bs, dtype in grid:
        rep = kernels.backward_scratch_bytes(n, hkv * g, hkv, d, s, bs, dtype, -(-n // bs))
        worst = max(worst, rep["total"] / rep["q_bytes"])
    assert worst <= 2.0, worst


def test_no_atomics_left_in_the_kernels():
    assert "tl.atomic" not in inspect.getsource(kernels)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("order", ["fsa", "nsa"])
def test_gpu_backward_is_deterministic_and_fsa_peak_scratch_bounded(order):
    gen = torch.Generator().manual_seed(0)
    t, hkv, g, d, bs, s = 4096, 2, 4, 64, 64, 16
    x = [torch.randn(1, t, hkv * (g if i == 0 else 1), d, generator=gen) for i in range(3)]
    q, k, v = (y.cuda().bfloat16().requires_grad_(True) for y in x)
    idx = random_selection(gen, 1, t, hkv, s, bs, p_unused=0.0)
    idx[..., 0] = 0
    idx = idx.cuda()
    do = torch.randn_like(q)
    o = selected_attention(q, k, v, idx, bs, backend="triton", order=order, check=False)
    grads = [torch.autograd.grad(o, (q, k, v), do, retain_graph=True) for _ in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(*grads, strict=True))
    if order == "nsa":  # the NSA forward keeps no block -> query index: built in backward
        return
    del grads
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
    torch.cuda.synchronize()
    outputs = sum(y.numel() * y.element_size() for y in (dq, dk, dv))
    q_bytes = q.numel() * q.element_size()
    assert torch.cuda.max_memory_allocated() - base <= outputs + 2 * q_bytes
