"""Input checks and small helpers shared by every op of lc-kernels."""

from __future__ import annotations

import math
import os
from typing import Any

import torch

from lc_kernels.backend import KERNEL_BACKENDS, Backend, parse_backend

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
TRITON_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def dot_precision(dtype: torch.dtype) -> str:
    """``input_precision`` of the kernels' ``tl.dot``: exact ``"ieee"`` for float32 inputs
    (the results match the fp32 references), ``"tf32"`` otherwise (fp16 / bf16 inputs
    are exact in it)."""
    return "ieee" if dtype == torch.float32 else "tf32"


def triton_available() -> bool:
    """Whether ``triton`` can be imported in this process."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def interpreter_on() -> bool:
    """Whether Triton's CPU interpreter was requested (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def resolve_backend(backend: Backend | str, device: torch.device, dtype: torch.dtype) -> Backend:
    """Map ``backend`` to ``Backend.TRITON`` or ``Backend.TORCH`` (equal to their strings).

    ``auto`` picks Triton for CUDA tensors of a dtype the kernels support and the
    reference everywhere else. ``triton`` on CPU tensors needs Triton's interpreter.
    """
    backend = parse_backend(backend, KERNEL_BACKENDS)
    if backend is Backend.TORCH:
        return Backend.TORCH
    if backend is Backend.AUTO:
        ok = device.type == "cuda" and dtype in TRITON_DTYPES and triton_available()
        return Backend.TRITON if ok else Backend.TORCH
    if not triton_available():
        raise RuntimeError("backend='triton' needs the 'triton' package, which is not installed")
    if device.type != "cuda" and not interpreter_on():
        raise ValueError(
            f"backend='triton' needs CUDA tensors (got device {device}); on CPU set "
            "TRITON_INTERPRET=1 before importing triton, or use backend='torch'"
        )
    if dtype not in TRITON_DTYPES:
        raise TypeError(f"backend='triton' supports float16, bfloat16 and float32, got {dtype}")
    return Backend.TRITON


def check_qkv(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, fewer_queries: bool = False
) -> tuple[int, int, int, int, int]:
    """Check ``q [B, T, HQ, D]``, ``k, v [B, T, HKV, D]``; return ``(B, T, HQ, HKV, D)``.

    With ``fewer_queries`` the keys may outnumber the queries (``q [B, Tq, HQ, D]``,
    ``k, v [B, Tk, HKV, D]``, ``Tq <= Tk``); the returned ``T`` is then ``Tq``.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 4:
            raise ValueError(
                f"{name} must have shape [batch, seq, heads, head_dim], got {tuple(x.shape)}"
            )
        if x.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{name} has dtype {x.dtype}; allowed: {FLOAT_DTYPES}")
        if not x.is_contiguous():
            raise ValueError(f"{name} must be contiguous (call .contiguous() first)")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must share a device, got {q.device}, {k.device}, {v.device}")
    if k.shape != v.shape:
        raise ValueError(
            f"k and v must have the same shape, got {tuple(k.shape)} and {tuple(v.shape)}"
        )
    b, t, hq, d = q.shape
    if fewer_queries and (k.shape[0] != b or k.shape[1] < t or k.shape[3] != d):
        raise ValueError(
            f"q {tuple(q.shape)} and k {tuple(k.shape)} must agree on batch and head_dim, "
            "with no more queries than keys (queries sit at the end of the keys)"
        )
    if not fewer_queries and (k.shape[0] != b or k.shape[1] != t or k.shape[3] != d):
        raise ValueError(
            f"q {tuple(q.shape)} and k {tuple(k.shape)} must agree on batch, seq and head_dim"
        )
    hkv = k.shape[2]
    if hkv == 0 or hq % hkv != 0:
        raise ValueError(
            f"mismatched heads: {hq} query heads is not a multiple of {hkv} key/value heads"
        )
    return b, t, hq, hkv, d


def check_cu_seqlens(
    cu_seqlens: torch.Tensor | None,
    batch: int,
    seq: int,
    device: torch.device,
    check: bool = True,
) -> torch.Tensor:
    """Validate packed-sequence offsets; return them as int64 (``[0, T]`` when ``None``).

    With ``cu_seqlens`` the batch dimension must be 1 and the offsets ``[N + 1]`` must
    start at 0, never decrease and end at ``T``. The value checks read the device;
    ``check=False`` skips them (shape, dtype and device are still checked).
    """
    if cu_seqlens is None:
        return torch.arange(batch + 1, device=device, dtype=torch.int64) * seq
    if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
        raise ValueError("cu_seqlens must be a 1-D tensor of N + 1 sequence offsets")
    if cu_seqlens.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"cu_seqlens must be int32 or int64, got {cu_seqlens.dtype}")
    if cu_seqlens.device != device:
        raise ValueError(f"cu_seqlens is on {cu_seqlens.device}, the inputs on {device}")
    if batch != 1:
        raise ValueError(f"with cu_seqlens the batch dimension must be 1, got {batch}")
    cu = cu_seqlens.to(torch.int64)
    if not check:
        return cu
    if int(cu[0]) != 0 or int(cu[-1]) != seq or bool((cu[1:] < cu[:-1]).any()):
        raise ValueError(
            f"cu_seqlens must start at 0, never decrease and end at seq={seq}; got {cu.tolist()}"
        )
    return cu


def check_kv_valid(
    kv_valid: torch.Tensor | None, batch: int, keys: int, device: torch.device
) -> None:
    """Check an optional key padding mask ``kv_valid [B, Tk]`` (bool, True = real key)."""
    if kv_valid is None:
        return
    if not isinstance(kv_valid, torch.Tensor):
        raise TypeError(f"kv_valid must be a torch.Tensor or None, got {type(kv_valid).__name__}")
    if kv_valid.dtype != torch.bool:
        raise TypeError(f"kv_valid must be a bool tensor (True = real key), got {kv_valid.dtype}")
    if tuple(kv_valid.shape) != (batch, keys):
        raise ValueError(
            f"kv_valid must have shape [batch={batch}, keys={keys}], got {tuple(kv_valid.shape)}"
        )
    if kv_valid.device != device:
        raise ValueError(f"kv_valid is on {kv_valid.device}, the inputs on {device}")


def default_scale(scale: float | None, head_dim: int) -> float:
    """``1 / sqrt(head_dim)`` unless ``scale`` is given."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite float, got {scale}")
    return float(scale)


def token_positions(cu: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
    """For packed tokens ``0..total-1``: (sequence id, position inside its sequence)."""
    idx = torch.arange(total, device=cu.device)
    seq_id = torch.searchsorted(cu[1:], idx, right=True)
    return seq_id, idx - cu[seq_id]


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp32 accumulation for half types, fp64 kept as fp64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


class _Zeros(torch.autograd.Function):
    """Zeros of a given shape whose backward gives zero gradients to ``inputs``."""

    @staticmethod
    def forward(ctx: Any, shape: tuple[int, ...], like: torch.Tensor, *inputs: torch.Tensor):  # type: ignore[override]
        ctx.metas = [(x.shape, x.dtype, x.device) for x in (like, *inputs)]
        return like.new_zeros(shape)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        return (None, *(torch.zeros(s, dtype=dt, device=dev) for s, dt, dev in ctx.metas))


def zeros_output(shape: tuple[int, ...], like: torch.Tensor, *inputs: torch.Tensor) -> torch.Tensor:
    """``like.new_zeros(shape)`` connected to autograd: backward gives ``like`` and every
    tensor of ``inputs`` a zero gradient of its own shape.

    The result of an op that has nothing to compute (an empty batch, no queries, no key
    in reach) so that ``.backward()`` still works and returns zero (or empty) gradients.
    """
    if not torch.is_grad_enabled() or not any(x.requires_grad for x in (like, *inputs)):
        return like.new_zeros(shape)
    return _Zeros.apply(tuple(shape), like, *inputs)
