"""Causal attention with the BAM log-prior: a materialized path and a blockwise path.

Both take ``q, k, v`` as ``[B, T, H, D]`` and compute, per head ``h`` and query ``i``,

    o_i = sum_j softmax_j( c_i * <q_i, k_j> / sqrt(D) + b_hij ) v_j,

with ``b`` the BAM prior ([bam_bias][lc_attention.bam.prior.bam_bias]) and ``c_i = 1`` or,
with scalable softmax, ``c_i = s_h * log(n_i)`` where ``n_i`` is the number of keys query
``i`` sees. The materialized path builds the ``[H, Tq, Tk]`` bias and calls
``torch.nn.functional.scaled_dot_product_attention``; the blockwise path walks key blocks
with an online softmax, computes the bias per block, and recomputes blocks in backward
(memory ``O(T * block)``, never ``O(T^2)``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from lc_attention.bam.prior import bam_bias

__all__ = ["bam_attention", "bam_attention_reference"]

_METHODS = ("auto", "sdpa", "blockwise")
AUTO_SDPA_MAX_KEYS = 1024


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> None:
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(
            f"q, k, v must be [B, T, H, D]; got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(
            f"incompatible shapes q={tuple(q.shape)} k={tuple(k.shape)} v={tuple(v.shape)}"
        )
    if q.shape[2] % k.shape[2] != 0:
        raise ValueError(f"query heads {q.shape[2]} must be a multiple of key heads {k.shape[2]}")
    if q.shape[1] > k.shape[1]:
        raise ValueError(
            f"more queries ({q.shape[1]}) than keys ({k.shape[1]}); queries are the last positions"
        )
    if q.shape[1] == 0:
        raise ValueError("empty sequence")


def _check_params(h: int, *params: torch.Tensor | None) -> None:
    for name, p in zip(("theta_a", "theta_b", "theta_m", "ssmax_s"), params, strict=True):
        if p is not None and p.shape != (h,):
            raise ValueError(
                f"{name} must have shape [{h}] (one value per query head), got {tuple(p.shape)}"
            )


def _content_scale(
    ssmax_s: torch.Tensor | None, q_pos: torch.Tensor, causal: bool, tk: int
) -> torch.Tensor | None:
    """``[H, Tq, 1]`` factor ``s * log(n_i)`` of scalable softmax, or None."""
    if ssmax_s is None:
        return None
    n = (q_pos.float() + 1.0) if causal else torch.full_like(q_pos, tk, dtype=torch.float32)
    return ssmax_s.float()[:, None, None] * n.log()[None, :, None]


def bam_attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    theta_a: torch.Tensor | None = None,
    theta_b: torch.Tensor | None = None,
    theta_m: torch.Tensor | None = None,
    *,
    ssmax_s: torch.Tensor | None = None,
    causal: bool = True,
    eps: float = 1e-5,
) -> torch.Tensor:
    """Plain fp32 softmax attention with the BAM prior (test oracle; O(T^2) memory).

    Args and returns as [bam_attention][lc_attention.bam.attention.bam_attention].

    Example:
        >>> import torch
        >>> q = k = v = torch.randn(1, 5, 2, 8)
        >>> bam_attention_reference(q, k, v).shape
        torch.Size([1, 5, 2, 8])
    """
    _check(q, k, v, causal)
    _b, tq, h, d = q.shape
    tk = k.shape[1]
    rep = h // k.shape[2]
    qf = q.float().transpose(1, 2)
    kf = k.float().repeat_interleave(rep, dim=2).transpose(1, 2)
    vf = v.float().repeat_interleave(rep, dim=2).transpose(1, 2)
    q_pos = torch.arange(tk - tq, tk, device=q.device)
    k_pos = torch.arange(tk, device=q.device)
    s = qf @ kf.transpose(-1, -2) / math.sqrt(d)
    c = _content_scale(ssmax_s, q_pos, causal, tk)
    if c is not None:
        s = s * c
    if theta_a is not None:
        assert theta_b is not None
        assert theta_m is not None
        s = s + bam_bias(theta_a, theta_b, theta_m, q_pos, k_pos, eps)
    if causal:
        s = s.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
    return (s.softmax(-1) @ vf).transpose(1, 2).to(q.dtype)


def _sdpa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    theta_a: torch.Tensor | None,
    theta_b: torch.Tensor | None,
    theta_m: torch.Tensor | None,
    ssmax_s: torch.Tensor | None,
    causal: bool,
    eps: float,
) -> torch.Tensor:
    _b, tq, h, _d = q.shape
    tk = k.shape[1]
    rep = h // k.shape[2]
    qt = q.transpose(1, 2)
    kt = k.repeat_interleave(rep, dim=2).transpose(1, 2)
    vt = v.repeat_interleave(rep, dim=2).transpose(1, 2)
    q_pos = torch.arange(tk - tq, tk, device=q.device)
    k_pos = torch.arange(tk, device=q.device)
    c = _content_scale(ssmax_s, q_pos, causal, tk)
    if c is not None:
        qt = qt * c.to(qt.dtype)
    if theta_a is None and c is None:
        out = (
            F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal and tq == tk)
            if (not causal or tq == tk)
            else None
        )
        if out is not None:
            return out.transpose(1, 2)
    mask = torch.zeros(h, tq, tk, device=q.device, dtype=torch.float32)
    if theta_a is not None:
        assert theta_b is not None
        assert theta_m is not None
        mask = mask + bam_bias(theta_a, theta_b, theta_m, q_pos, k_pos, eps)
    if causal:
        mask = mask.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask[None].to(q.dtype))
    return out.transpose(1, 2)


def _block_logits(
    qb: torch.Tensor,
    kb: torch.Tensor,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    theta: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
    ssmax_s: torch.Tensor | None,
    causal: bool,
    tk: int,
    eps: float,
) -> torch.Tensor:
    """``[B, H, bq, bk]`` fp32 logits of one (query block, key block) pair."""
    s = qb @ kb.transpose(-1, -2) / math.sqrt(qb.shape[-1])
    c = _content_scale(ssmax_s, q_pos, causal, tk)
    if c is not None:
        s = s * c
    if theta is not None:
        s = s + bam_bias(*theta, q_pos, k_pos, eps)
    if causal:
        s = s.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
    return s


class _BlockwiseBAM(torch.autograd.Function):
    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        theta_a: torch.Tensor | None,
        theta_b: torch.Tensor | None,
        theta_m: torch.Tensor | None,
        ssmax_s: torch.Tensor | None,
        causal: bool,
        eps: float,
        block: int,
    ) -> torch.Tensor:
        # q, k, v: [B, H, T, D] fp32
        tq, tk = q.shape[2], k.shape[2]
        off = tk - tq
        theta = None if theta_a is None else (theta_a, theta_b, theta_m)
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[:3], device=q.device, dtype=torch.float32)
        for qs in range(0, tq, block):
            qb = q[:, :, qs : qs + block]
            q_pos = torch.arange(off + qs, off + qs + qb.shape[2], device=q.device)
            k_end = min(tk, int(q_pos[-1]) + 1) if causal else tk
            m = torch.full(qb.shape[:3], float("-inf"), device=q.device)
            l_sum = torch.zeros_like(m)
            acc = torch.zeros_like(qb)
            for ks in range(0, k_end, block):
                ke = min(ks + block, k_end)
                k_pos = torch.arange(ks, ke, device=q.device)
                s = _block_logits(qb, k[:, :, ks:ke], q_pos, k_pos, theta, ssmax_s, causal, tk, eps)  # type: ignore[arg-type]
                m_new = torch.maximum(m, s.amax(-1))
                p = torch.exp(s - m_new[..., None])
                corr = torch.exp(m - m_new)
                l_sum = l_sum * corr + p.sum(-1)
                acc = acc * corr[..., None] + p @ v[:, :, ks:ke]
                m = m_new
            out[:, :, qs : qs + block] = acc / l_sum[..., None]
            lse[:, :, qs : qs + block] = m + l_sum.log()
        ctx.save_for_backward(q, k, v, out, lse, theta_a, theta_b, theta_m, ssmax_s)
        ctx.causal, ctx.eps, ctx.block = causal, eps, block
        return out

    @staticmethod
    def backward(ctx: Any, d_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, out, lse, theta_a, theta_b, theta_m, ssmax_s = ctx.saved_tensors
        causal, eps, block = ctx.causal, ctx.eps, ctx.block
        tq, tk = q.shape[2], k.shape[2]
        off = tk - tq
        d_out = d_out.float()
        delta = (d_out * out).sum(-1)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        params = [p for p in (theta_a, theta_b, theta_m, ssmax_s) if p is not None]
        leaves = [p.detach().requires_grad_(True) for p in params]
        grads = [torch.zeros_like(p) for p in params]
        has_prior = theta_a is not None
        with torch.enable_grad():
            lp = iter(leaves)
            th = (next(lp), next(lp), next(lp)) if has_prior else None
            ss = next(lp) if ssmax_s is not None else None
            for qs in range(0, tq, block):
                qb = q[:, :, qs : qs + block].detach().requires_grad_(True)
                q_pos = torch.arange(off + qs, off + qs + qb.shape[2], device=q.device)
                k_end = min(tk, int(q_pos[-1]) + 1) if causal else tk
                do_b = d_out[:, :, qs : qs + block]
                lse_b = lse[:, :, qs : qs + block, None]
                dl_b = delta[:, :, qs : qs + block, None]
                for ks in range(0, k_end, block):
                    ke = min(ks + block, k_end)
                    kb = k[:, :, ks:ke].detach().requires_grad_(True)
                    vb = v[:, :, ks:ke]
                    k_pos = torch.arange(ks, ke, device=q.device)
                    s = _block_logits(qb, kb, q_pos, k_pos, th, ss, causal, tk, eps)
                    p = torch.exp(s.detach() - lse_b)
                    dv[:, :, ks:ke] += p.transpose(-1, -2) @ do_b
                    ds = p * (do_b @ vb.transpose(-1, -2) - dl_b)
                    g = torch.autograd.grad(s, [qb, kb, *leaves], ds, allow_unused=True)
                    dq[:, :, qs : qs + block] += g[0]
                    dk[:, :, ks:ke] += g[1]
                    for j, gj in enumerate(g[2:]):
                        if gj is not None:
                            grads[j] += gj
        it = iter(grads)
        ga = next(it) if has_prior else None
        gb = next(it) if has_prior else None
        gm = next(it) if has_prior else None
        gs = next(it) if ssmax_s is not None else None
        return dq, dk, dv, ga, gb, gm, gs, None, None, None


def bam_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    theta_a: torch.Tensor | None = None,
    theta_b: torch.Tensor | None = None,
    theta_m: torch.Tensor | None = None,
    *,
    ssmax_s: torch.Tensor | None = None,
    causal: bool = True,
    eps: float = 1e-5,
    method: str = "auto",
    block_size: int = 256,
) -> torch.Tensor:
    """Attention with the BAM positional log-prior.

    Args:
        q: ``[B, Tq, H, D]`` queries; they sit at the last ``Tq`` of the ``Tk`` positions.
        k: ``[B, Tk, Hk, D]`` keys (``H`` a multiple of ``Hk``: grouped-query attention).
        v: ``[B, Tk, Hk, D]`` values.
        theta_a: ``[H]`` log-scale of the prior, or None for no prior (NoPE).
        theta_b: ``[H]`` shape (1 with ``theta_m = 0`` is ALiBi).
        theta_m: ``[H]`` location parameter (``mu = 2 sinh theta_m``).
        ssmax_s: ``[H]`` scalable-softmax factor ``s``; content logits are multiplied by
            ``s * log(n_i)``. None disables it.
        causal: mask keys after the query.
        eps: offset inside the prior's power.
        method: ``"sdpa"`` (materialized ``[H, Tq, Tk]`` bias through
            ``scaled_dot_product_attention``), ``"blockwise"`` (online softmax over key
            blocks, bias per block, recomputation in backward) or ``"auto"`` (sdpa up to
            1024 keys, blockwise beyond).
        block_size: query and key block length of the blockwise path.

    Returns:
        ``[B, Tq, H, D]`` output in the dtype of ``q``.

    Example:
        >>> import torch
        >>> from lc_attention.bam import BAMPrior, BAMPriorConfig
        >>> prior = BAMPrior(BAMPriorConfig(num_heads=2))
        >>> q = k = v = torch.randn(1, 300, 2, 16)
        >>> o = bam_attention(q, k, v, prior.theta_a, prior.theta_b, prior.theta_m, method="blockwise", block_size=64)
        >>> o.shape
        torch.Size([1, 300, 2, 16])
    """
    _check(q, k, v, causal)
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if (theta_a is None) != (theta_b is None) or (theta_a is None) != (theta_m is None):
        raise ValueError(
            "theta_a, theta_b and theta_m must be given together (or all None for no prior)"
        )
    _check_params(q.shape[2], theta_a, theta_b, theta_m, ssmax_s)
    if method == "auto":
        method = "sdpa" if k.shape[1] <= AUTO_SDPA_MAX_KEYS else "blockwise"
    if method == "sdpa":
        return _sdpa(q, k, v, theta_a, theta_b, theta_m, ssmax_s, causal, eps)
    rep = q.shape[2] // k.shape[2]
    qt = q.float().transpose(1, 2)
    kt = k.float().repeat_interleave(rep, dim=2).transpose(1, 2)
    vt = v.float().repeat_interleave(rep, dim=2).transpose(1, 2)
    out = _BlockwiseBAM.apply(
        qt, kt, vt, theta_a, theta_b, theta_m, ssmax_s, causal, eps, block_size
    )
    return out.transpose(1, 2).to(q.dtype)
