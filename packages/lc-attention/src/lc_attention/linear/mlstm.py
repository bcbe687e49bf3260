r"""mLSTM (the matrix-memory cell of xLSTM), parallel and recurrent forms.

Per head, with pre-activation input gate ``i_t`` and forget gate ``f_t`` (scalars), the
log forget gate is ``log sigmoid(f_t)`` (``forget_gate="sigmoid"``) or ``f_t`` itself
(``"exp"``, which must then be ``<= 0``). With keys scaled by ``K ** -0.5``:

.. math::

    m_t &= \max(\log f_t + m_{t-1},\; i_t) \\
    C_t &= e^{\log f_t + m_{t-1} - m_t} C_{t-1} + e^{i_t - m_t} k_t^\top v_t \\
    n_t &= e^{\log f_t + m_{t-1} - m_t} n_{t-1} + e^{i_t - m_t} k_t \\
    h_t &= \frac{q_t C_t}{\max(|q_t \cdot n_t|,\, e^{-m_t}) + \epsilon}

``m`` is the stabilizer: it keeps every exponent ``<= 0`` and cancels from ``h`` (up to
``eps``). The parallel form builds the ``T x T`` log-gate matrix
``D_ts = sum_{r=s+1..t} log f_r + i_s`` (``s <= t``), takes ``m_t = max_s D_ts`` and gives
the same ``h``; starting the recurrence from ``m_0 = -inf`` makes the two forms use the
very same stabilizer, so they agree to float rounding even with ``eps > 0``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F

from lc_attention.linear._checks import check_qkv
from lc_attention.linear.backend import MLSTM_BACKENDS, load, resolve
from lc_kernels.backend import Backend

__all__ = [
    "MLSTM_KERNEL_CHUNK",
    "MLSTMState",
    "mlstm",
    "mlstm_chunkwise_padded",
    "mlstm_parallel",
    "mlstm_recurrent",
]

FORGET_GATES = ("sigmoid", "exp")

MLSTM_KERNEL_CHUNK = 128
"""Sequence multiple required by ``mlstm_kernels``' ``chunkwise--triton_xl_chunk`` kernel
(its chunk size; its inner tiles of 16 divide it)."""


class MLSTMState(NamedTuple):
    """Recurrent mLSTM state: ``C [B, H, K, V]``, ``n [B, H, K]``, ``m [B, H]`` (fp32/fp64)."""

    C: torch.Tensor
    n: torch.Tensor
    m: torch.Tensor


def _log_forget(f: torch.Tensor, forget_gate: str) -> torch.Tensor:
    if forget_gate == "sigmoid":
        return F.logsigmoid(f)
    if forget_gate == "exp":
        if (f > 0).any():
            raise ValueError(
                "with forget_gate='exp' the forget gate is a log-gate and must be <= 0, "
                f"got max {f.max().item():.4g}"
            )
        return f
    raise ValueError(f"forget_gate must be one of {FORGET_GATES}, got {forget_gate!r}")


def _check_gates(i: torch.Tensor, f: torch.Tensor, q: torch.Tensor) -> None:
    want = tuple(q.shape[:3])
    for name, x in (("i", i), ("f", f)):
        if tuple(x.shape) != want:
            raise ValueError(
                f"gate {name} must have shape [B, T, H] = {want}, got {tuple(x.shape)}"
            )
        if not torch.isfinite(x).all():
            raise ValueError(f"gate {name} must be finite")


def mlstm_parallel(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i: torch.Tensor,
    f: torch.Tensor,
    *,
    forget_gate: str = "sigmoid",
    eps: float = 1e-6,
    return_state: bool = False,
) -> tuple[torch.Tensor, MLSTMState | None]:
    """Quadratic parallel mLSTM (training form).

    Args:
        q: queries ``[B, T, H, K]``.
        k: keys ``[B, T, H, K]``.
        v: values ``[B, T, H, V]``.
        i: input-gate pre-activations ``[B, T, H]`` (exponential gate).
        f: forget-gate pre-activations ``[B, T, H]``.
        forget_gate: ``"sigmoid"`` or ``"exp"``.
        eps: added to the normalizer.
        return_state: also return the state after the last step (for decoding after a prefill).

    Returns:
        ``(h [B, T, H, V], state or None)``.

    Example:
        >>> import torch
        >>> q = k = v = torch.randn(1, 6, 2, 4)
        >>> h, _ = mlstm_parallel(q, k, v, torch.randn(1, 6, 2), torch.randn(1, 6, 2))
        >>> h.shape
        torch.Size([1, 6, 2, 4])
    """
    check_qkv(q, k, v)
    _check_gates(i, f, q)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    t, dk = q.shape[1], q.shape[-1]
    logf = _log_forget(f.to(acc), forget_gate).transpose(1, 2)  # [B, H, T]
    ig = i.to(acc).transpose(1, 2)
    cum = logf.cumsum(-1)
    causal = torch.ones(t, t, dtype=torch.bool, device=q.device).tril()
    logd = (cum[..., :, None] - cum[..., None, :]).masked_fill(~causal, float("-inf"))
    logd = logd + ig[..., None, :]  # [B, H, T, T]
    m = logd.amax(-1, keepdim=True)
    d = (logd - m).exp()
    qh, kh, vh = (x.to(acc).transpose(1, 2) for x in (q, k, v))
    kh = kh * dk**-0.5
    s = (qh @ kh.transpose(-1, -2)) * d
    norm = torch.maximum(s.sum(-1, keepdim=True).abs(), (-m).exp()) + eps
    h = ((s / norm) @ vh).transpose(1, 2).to(v.dtype)
    if not return_state:
        return h, None
    w = d[..., -1, :]  # weights of every step in the final state, [B, H, T]
    state = MLSTMState(
        C=torch.einsum("bhs,bhsk,bhsv->bhkv", w, kh, vh),
        n=torch.einsum("bhs,bhsk->bhk", w, kh),
        m=m[..., -1, 0],
    )
    return h, state


def mlstm_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i: torch.Tensor,
    f: torch.Tensor,
    *,
    forget_gate: str = "sigmoid",
    eps: float = 1e-6,
    initial_state: MLSTMState | None = None,
) -> tuple[torch.Tensor, MLSTMState]:
    """Step-by-step mLSTM with the stabilizer state (decoding form).

    Shapes as in [mlstm_parallel][lc_attention.linear.mlstm.mlstm_parallel];
    ``initial_state`` defaults to ``C = 0, n = 0, m = -inf``.

    Returns:
        ``(h [B, T, H, V], final MLSTMState)``.

    Example:
        >>> import torch
        >>> q = k = v = torch.randn(1, 6, 2, 4, dtype=torch.float64)
        >>> i, f = torch.randn(1, 6, 2, dtype=torch.float64), torch.randn(1, 6, 2, dtype=torch.float64)
        >>> torch.allclose(mlstm_recurrent(q, k, v, i, f)[0], mlstm_parallel(q, k, v, i, f)[0])
        True
    """
    b, t, h, dk, dv = check_qkv(q, k, v)
    _check_gates(i, f, q)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    logf = _log_forget(f.to(acc), forget_gate)
    ig = i.to(acc)
    if initial_state is None:
        c_state = torch.zeros(b, h, dk, dv, dtype=acc, device=q.device)
        n_state = torch.zeros(b, h, dk, dtype=acc, device=q.device)
        m_state = torch.full((b, h), float("-inf"), dtype=acc, device=q.device)
    else:
        want = {"C": (b, h, dk, dv), "n": (b, h, dk), "m": (b, h)}
        for name, x in zip(("C", "n", "m"), initial_state, strict=True):
            if tuple(x.shape) != want[name]:
                raise ValueError(
                    f"initial_state.{name} must have shape {want[name]}, got {tuple(x.shape)}"
                )
        c_state, n_state, m_state = (x.to(acc) for x in initial_state)
    qs, ks, vs = q.to(acc), k.to(acc) * dk**-0.5, v.to(acc)
    outs = []
    for step in range(t):
        m_new = torch.maximum(logf[:, step] + m_state, ig[:, step])
        a = (logf[:, step] + m_state - m_new).exp()  # 0 when m_state = -inf
        w = (ig[:, step] - m_new).exp()
        c_state = a[..., None, None] * c_state + w[..., None, None] * (
            ks[:, step, :, :, None] * vs[:, step, :, None, :]
        )
        n_state = a[..., None] * n_state + w[..., None] * ks[:, step]
        num = torch.einsum("bhk,bhkv->bhv", qs[:, step], c_state)
        den = torch.maximum(torch.einsum("bhk,bhk->bh", qs[:, step], n_state).abs(), (-m_new).exp())
        outs.append(num / (den[..., None] + eps))
        m_state = m_new
    out = torch.stack(outs, 1) if outs else vs.new_zeros(b, 0, h, dv)
    return out.to(v.dtype), MLSTMState(c_state, n_state, m_state)


def mlstm(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i: torch.Tensor,
    f: torch.Tensor,
    *,
    mode: str = "parallel",
    forget_gate: str = "sigmoid",
    eps: float = 1e-6,
    backend: Backend | str = "auto",
) -> torch.Tensor:
    """mLSTM outputs ``[B, T, H, V]`` with a choice of form and backend.

    ``backend="auto"`` uses NX-AI ``mlstm_kernels`` (chunkwise Triton kernel) on CUDA when it
    is installed and ``forget_gate="sigmoid"``, else the PyTorch ``mode`` form. The kernel
    takes any ``T``: the sequence is padded to a multiple of its chunk
    ([mlstm_chunkwise_padded][lc_attention.linear.mlstm.mlstm_chunkwise_padded]).

    Example:
        >>> import torch
        >>> q = k = v = torch.randn(1, 6, 2, 4)
        >>> mlstm(q, k, v, torch.randn(1, 6, 2), torch.randn(1, 6, 2), backend="torch").shape
        torch.Size([1, 6, 2, 4])
    """
    if mode not in ("parallel", "recurrent"):
        raise ValueError(f"mode must be 'parallel' or 'recurrent', got {mode!r}")
    chosen = resolve(backend, MLSTM_BACKENDS, q)
    if chosen == "mlstm_kernels" and forget_gate == "sigmoid":
        check_qkv(q, k, v)
        _check_gates(i, f, q)
        kernel = load("mlstm_kernels.torch", "get_mlstm_kernel")("chunkwise--triton_xl_chunk")
        return mlstm_chunkwise_padded(kernel, q, k, v, i, f, eps=eps)
    if mode == "recurrent":
        return mlstm_recurrent(q, k, v, i, f, forget_gate=forget_gate, eps=eps)[0]
    return mlstm_parallel(q, k, v, i, f, forget_gate=forget_gate, eps=eps)[0]


def mlstm_chunkwise_padded(
    kernel: Callable[..., torch.Tensor],
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i: torch.Tensor,
    f: torch.Tensor,
    *,
    eps: float = 1e-6,
    multiple: int = MLSTM_KERNEL_CHUNK,
) -> torch.Tensor:
    """Run a chunkwise mLSTM kernel that needs ``T % multiple == 0`` on any ``T``.

    The inputs are padded at the end of the sequence to the next multiple of
    ``multiple`` (zeros for ``q, k, v`` and both gate pre-activations) and the output is
    cut back to ``T``. The mLSTM is causal, so the padded steps change no output before
    them and, their outputs being dropped, send no gradient back: forward and backward
    equal those of the unpadded sequence. A ``T`` that is already a multiple is passed
    as is.

    Args:
        kernel: called as ``kernel(q=, k=, v=, i=, f=, eps=)`` on ``[B, H, T', D]``
            tensors and ``[B, H, T']`` gates (``mlstm_kernels``' convention), returning
            ``[B, H, T', V]``.
        q: queries ``[B, T, H, K]``.
        k: keys ``[B, T, H, K]``.
        v: values ``[B, T, H, V]``.
        i: input-gate pre-activations ``[B, T, H]``.
        f: forget-gate pre-activations ``[B, T, H]``.
        eps: normalizer epsilon.
        multiple: sequence multiple the kernel requires (its chunk size, 128).

    Returns:
        ``h [B, T, H, V]``.

    Example:
        >>> import torch
        >>> def kernel(*, q, k, v, i, f, eps):  # any chunkwise kernel; here the parallel form
        ...     assert q.shape[2] % 128 == 0
        ...     return mlstm_parallel(*(x.transpose(1, 2) for x in (q, k, v, i, f)))[0].transpose(1, 2)
        >>> q = k = v = torch.randn(1, 6, 2, 4); i = f = torch.randn(1, 6, 2)
        >>> mlstm_chunkwise_padded(kernel, q, k, v, i, f).shape
        torch.Size([1, 6, 2, 4])
    """
    if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
        raise ValueError(f"multiple must be an int >= 1, got {multiple!r}")
    t = q.shape[1]
    pad = -t % multiple
    if pad:
        q, k, v = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v))
        i, f = (F.pad(x, (0, 0, 0, pad)) for x in (i, f))
    out = kernel(
        q=q.transpose(1, 2),
        k=k.transpose(1, 2),
        v=v.transpose(1, 2),
        i=i.transpose(1, 2),
        f=f.transpose(1, 2),
        eps=eps,
    )
    out = out.transpose(1, 2)
    return out[:, :t] if pad else out
