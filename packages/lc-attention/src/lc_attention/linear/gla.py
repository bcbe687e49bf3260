r"""Gated linear attention (GLA) and plain linear attention, recurrent and chunked forms.

With queries and keys ``q_t, k_t`` (key dim ``K``), values ``v_t`` (value dim ``V``) and
per-key-dim log-decays ``g_t <= 0``, the state ``S_t`` is a ``K x V`` matrix:

.. math::

    S_t = \operatorname{diag}(e^{g_t}) S_{t-1} + k_t^\top v_t, \qquad o_t = s\, q_t S_t

with ``s = K ** -0.5`` by default. ``g = 0`` (no decay) is plain causal linear attention.

The recurrent form steps through time (decoding). The chunked form splits the sequence into
chunks of ``C`` steps: inside a chunk it builds the ``C x C`` decayed score matrix from the
inclusive cumulative log-decay ``b_t`` (every exponent ``b_t - b_s`` with ``s <= t`` is
``<= 0``, so nothing overflows), and between chunks it carries ``S``. Both forms compute
the same function; they differ only by float rounding.
"""

from __future__ import annotations

import torch

from lc_attention.linear._checks import check_log_decay, check_qkv, check_state
from lc_attention.linear.backend import GLA_BACKENDS, load, resolve
from lc_kernels.backend import Backend

__all__ = [
    "gated_linear_attention",
    "gla_chunk",
    "gla_recurrent",
    "linear_attention",
]


def _prepare(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor | None,
    initial_state: torch.Tensor | None,
    scale: float | None,
) -> tuple[torch.Tensor, float]:
    b, _, h, dk, dv = check_qkv(q, k, v)
    if g is None:
        g = torch.zeros_like(k)
    else:
        check_log_decay(g, k)
    check_state(initial_state, (b, h, dk, dv))
    if scale is None:
        scale = dk**-0.5
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    return g, float(scale)


def gla_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-by-step GLA (the decoding form and the test oracle).

    Args:
        q: queries ``[B, T, H, K]``.
        k: keys ``[B, T, H, K]``.
        v: values ``[B, T, H, V]``.
        g: log-decays ``[B, T, H, K]``, finite and ``<= 0``; ``None`` means 0 (linear attention).
        scale: query scale, default ``K ** -0.5``.
        initial_state: ``[B, H, K, V]`` state before the first step, default zeros.

    Returns:
        ``(o, state)``: outputs ``[B, T, H, V]`` (dtype of ``v``) and the final state
        ``[B, H, K, V]`` (fp32, or fp64 for fp64 inputs).

    Example:
        >>> import torch
        >>> q = k = torch.randn(1, 5, 2, 4); v = torch.randn(1, 5, 2, 3)
        >>> o, s = gla_recurrent(q, k, v, -torch.rand(1, 5, 2, 4))
        >>> o.shape, s.shape
        (torch.Size([1, 5, 2, 3]), torch.Size([1, 2, 4, 3]))
    """
    g, scale = _prepare(q, k, v, g, initial_state, scale)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    bsz, t, h, dk, dv = *q.shape, v.shape[-1]
    state = (
        torch.zeros(bsz, h, dk, dv, dtype=acc, device=q.device)
        if initial_state is None
        else initial_state.to(acc)
    )
    qs, ks, vs, decay = (q.to(acc) * scale), k.to(acc), v.to(acc), g.to(acc).exp()
    outs = []
    for i in range(t):
        state = decay[:, i, :, :, None] * state + ks[:, i, :, :, None] * vs[:, i, :, None, :]
        outs.append(torch.einsum("bhk,bhkv->bhv", qs[:, i], state))
    o = torch.stack(outs, 1) if outs else vs.new_zeros(bsz, 0, h, dv)
    return o.to(v.dtype), state


def gla_chunk(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = 16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked-parallel GLA in PyTorch (the training form); same outputs as the recurrence.

    Memory inside a chunk is ``B * H * C * C * K`` floats for the decayed scores.

    Args:
        q: queries ``[B, T, H, K]``.
        k: keys ``[B, T, H, K]``.
        v: values ``[B, T, H, V]``.
        g: log-decays ``[B, T, H, K]``, finite and ``<= 0``; ``None`` means 0.
        scale: query scale, default ``K ** -0.5``.
        initial_state: ``[B, H, K, V]``, default zeros.
        chunk_size: steps per chunk ``C >= 1``.

    Returns:
        ``(o [B, T, H, V], final_state [B, H, K, V])``.

    Example:
        >>> import torch
        >>> q = k = torch.randn(1, 7, 2, 4, dtype=torch.float64); v = torch.randn(1, 7, 2, 3, dtype=torch.float64)
        >>> g = -torch.rand(1, 7, 2, 4, dtype=torch.float64)
        >>> torch.allclose(gla_chunk(q, k, v, g, chunk_size=3)[0], gla_recurrent(q, k, v, g)[0])
        True
    """
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an int >= 1, got {chunk_size!r}")
    g, scale = _prepare(q, k, v, g, initial_state, scale)
    acc = torch.float64 if q.dtype == torch.float64 else torch.float32
    bsz, t, h, dk, dv = *q.shape, v.shape[-1]
    c = chunk_size
    n = -(-t // c)
    pad = n * c - t

    def split(x: torch.Tensor) -> torch.Tensor:  # [B, T, H, D] -> [B, H, N, C, D]
        x = torch.nn.functional.pad(x.to(acc), (0, 0, 0, 0, 0, pad))
        return x.view(bsz, n, c, h, x.shape[-1]).permute(0, 3, 1, 2, 4)

    qc, kc, vc, gc = split(q * scale), split(k), split(v), split(g)
    bcum = gc.cumsum(3)  # inclusive cumulative log-decay inside each chunk
    causal = torch.ones(c, c, dtype=torch.bool, device=q.device).tril()
    diff = bcum[..., :, None, :] - bcum[..., None, :, :]  # [B, H, N, C(t), C(s), K]
    diff = diff.masked_fill(~causal[:, :, None], float("-inf"))
    scores = torch.einsum("bhntk,bhnsk,bhntsk->bhnts", qc, kc, diff.exp())
    intra = scores @ vc  # [B, H, N, C, V]
    q_dec = qc * bcum.exp()  # query decayed back to the chunk start
    k_dec = kc * (bcum[..., -1:, :] - bcum).exp()  # key decayed forward to the chunk end
    chunk_decay = bcum[..., -1, :].exp()  # [B, H, N, K]
    state = (
        torch.zeros(bsz, h, dk, dv, dtype=acc, device=q.device)
        if initial_state is None
        else initial_state.to(acc)
    )
    inter = []
    for j in range(n):
        inter.append(q_dec[:, :, j] @ state)
        state = (
            chunk_decay[:, :, j, :, None] * state + k_dec[:, :, j].transpose(-1, -2) @ vc[:, :, j]
        )
    o = intra + torch.stack(inter, 2)
    o = o.permute(0, 2, 3, 1, 4).reshape(bsz, n * c, h, dv)[:, :t]
    return o.to(v.dtype), state


def gated_linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    mode: str = "chunk",
    chunk_size: int = 16,
    backend: Backend | str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """GLA with a choice of form and backend.

    Args:
        q: queries ``[B, T, H, K]``.
        k: keys ``[B, T, H, K]``.
        v: values ``[B, T, H, V]``.
        g: log-decays ``[B, T, H, K]`` (``<= 0``); ``None`` gives plain linear attention.
        scale: query scale, default ``K ** -0.5``.
        initial_state: ``[B, H, K, V]``, default zeros.
        mode: ``"chunk"`` (training) or ``"recurrent"`` (decoding).
        chunk_size: chunk length of the PyTorch chunked form.
        backend: ``"auto"`` (flash-linear-attention on CUDA when installed, else PyTorch),
            ``"torch"`` or ``"fla"``.

    Returns:
        ``(o [B, T, H, V], final_state [B, H, K, V])``.

    Example:
        >>> import torch
        >>> q = k = torch.randn(2, 9, 2, 4); v = torch.randn(2, 9, 2, 4)
        >>> o, _ = gated_linear_attention(q, k, v, -torch.rand(2, 9, 2, 4), backend="torch")
        >>> o.shape
        torch.Size([2, 9, 2, 4])
    """
    if mode not in ("chunk", "recurrent"):
        raise ValueError(f"mode must be 'chunk' or 'recurrent', got {mode!r}")
    chosen = resolve(backend, GLA_BACKENDS, q)
    if chosen == "fla":
        g_, scale_ = _prepare(q, k, v, g, initial_state, scale)
        name = "chunk_gla" if mode == "chunk" else "fused_recurrent_gla"
        fn = load("fla.ops.gla", name)
        o, state = fn(
            q, k, v, g_, scale=scale_, initial_state=initial_state, output_final_state=True
        )
        return o, state
    if mode == "recurrent":
        return gla_recurrent(q, k, v, g, scale=scale, initial_state=initial_state)
    return gla_chunk(q, k, v, g, scale=scale, initial_state=initial_state, chunk_size=chunk_size)


def linear_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    mode: str = "chunk",
    chunk_size: int = 16,
    backend: Backend | str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain causal linear attention ``o_t = s q_t sum_{j<=t} k_j^T v_j`` (GLA with ``g = 0``).

    Shapes and arguments as in [gated_linear_attention][lc_attention.linear.gla.gated_linear_attention].

    Example:
        >>> import torch
        >>> q = k = torch.randn(1, 4, 1, 2, dtype=torch.float64); v = torch.randn(1, 4, 1, 3, dtype=torch.float64)
        >>> o, _ = linear_attention(q, k, v, scale=1.0, backend="torch")
        >>> ref = torch.einsum("btk,bsk,bsv->btv", q[:, :, 0], k[:, :, 0], v[:, :, 0])  # no mask
        >>> torch.allclose(o[:, -1, 0], ref[:, -1])  # the last step sees every key
        True
    """
    return gated_linear_attention(
        q,
        k,
        v,
        None,
        scale=scale,
        initial_state=initial_state,
        mode=mode,
        chunk_size=chunk_size,
        backend=backend,
    )
