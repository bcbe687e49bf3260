"""One decode step of hybrid-head attention for one layer.

Every query head ``h`` of a layer is either a *retrieval head* or a *sparse head*:

- a retrieval head attends to the whole KV cache, ``o_h = softmax(q_h K^T s) V``, and
  publishes ``I_h = topk_t(q_h . k_t)``, the ``k`` positions of its largest logits;
- a sparse head attends only to the positions ``I_h`` last published *at the same head
  index* by a retrieval head of an earlier layer:
  ``o_h = softmax(q_h K[I_h]^T s) V[I_h]``.

The published positions travel from layer to layer (the caller passes the ``indices``
returned by one layer into the next), which is the head-level version of TidalDecode's
layer-level token sharing. Keys and values use the layout ``[batch, seq, kv_heads,
head_dim]``; query head ``h`` reads KV head ``h // (HQ / HKV)``.

Example:
    >>> import torch
    >>> q = torch.randn(1, 4, 8)
    >>> k, v = torch.randn(1, 10, 2, 8), torch.randn(1, 10, 2, 8)
    >>> out, idx = hybrid_decode_attention(q, k, v, retrieval=[True] * 4, indices=None, topk=3)
    >>> tuple(out.shape), tuple(idx.shape)
    ((1, 4, 8), (1, 4, 3))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from lc_attention.lychee import _kernels
from lc_attention.lychee.config import check_backend, route
from lc_kernels.backend import Backend
from lc_kernels.block_select import block_max_topk, cached_arange


def _as_mask(x: Sequence[bool] | torch.Tensor, n: int, name: str) -> list[bool]:
    raw = x.detach().cpu() if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    if raw.shape != (n,):
        raise ValueError(f"{name} must have one entry per query head ({n}), got {tuple(raw.shape)}")
    if raw.dtype != torch.bool and bool(((raw != 0) & (raw != 1)).any()):
        raise ValueError(
            f"{name} must hold booleans (True/False or 0/1), one flag per query head, got "
            f"{raw.tolist()} (head ids are not a mask)"
        )
    return [bool(v) for v in raw.tolist()]


def _check_tensors(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> None:
    """``q [B, HQ, D]`` and ``k_cache, v_cache [B, T, HKV, D]`` that fit together."""
    if q.dim() != 3 or k_cache.dim() != 4 or v_cache.shape != k_cache.shape:
        raise ValueError(
            "expected q [B, HQ, D] and k_cache, v_cache [B, T, HKV, D] of equal shape, got "
            f"{tuple(q.shape)}, {tuple(k_cache.shape)}, {tuple(v_cache.shape)}"
        )
    b, hq, d = q.shape
    _, _t, hkv, dk = k_cache.shape
    if k_cache.shape[0] != b or dk != d or hq % hkv:
        raise ValueError(
            f"q {tuple(q.shape)} does not fit k_cache {tuple(k_cache.shape)} (batch, head_dim, "
            "and query heads a multiple of KV heads must agree)"
        )
    if not (q.device == k_cache.device == v_cache.device):
        raise ValueError(
            f"q, k_cache, v_cache must be on one device, got {q.device}, {k_cache.device}, "
            f"{v_cache.device}"
        )


def check_indices(indices: torch.Tensor, rows: torch.Tensor | None, t: int) -> None:
    """Check that ``indices`` holds integer positions in ``[0, t)`` in the head rows
    ``rows`` (None: every row), as a sparse head reads them.

    Costs one device synchronisation (the min and max are read on the host); the
    Hugging Face integration, whose positions come from the model's own top-k, skips it.

    Raises:
        ValueError: a float tensor, or a position outside ``[0, t)`` (the first one is
            named: a row past the cache would be read from the next KV head's keys).
    """
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype == torch.bool:
        raise ValueError(f"indices must be an integer tensor (int64), got {indices.dtype}")
    sel = indices if rows is None else indices.index_select(1, rows)
    if not sel.numel():
        return
    lo, hi = torch.aminmax(sel)
    if int(lo) >= 0 and int(hi) < t:
        return
    bad = (sel < 0) | (sel >= t)
    bi, ri, ki = (int(x) for x in torch.nonzero(bad)[0])
    hi_ = ri if rows is None else int(rows[ri])
    raise ValueError(
        f"indices[{bi}, {hi_}, {ki}] = {int(sel[bi, ri, ki])} is out of range: a sparse "
        f"head's positions must lie in [0, {t}) (the KV cache length T)"
    )


def _acc(x: torch.Tensor) -> torch.Tensor:
    """Softmax in fp32 for half-precision inputs (fp32 and fp64 stay as they are)."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


@dataclass(frozen=True)
class _Group:
    """Retrieval heads of one KV head: ``heads`` (query-head ids), ``pub`` (their local rows
    whose top-k is published) and the same as index tensors; ``span``: ``(first, last + 1)``
    when the heads are consecutive (read and written as a slice, no index op)."""

    kv: int
    heads: tuple[int, ...]
    pub: tuple[int, ...]
    heads_t: torch.Tensor
    pub_t: torch.Tensor
    pub_heads_t: torch.Tensor
    span: tuple[int, int] | None = None


@dataclass(frozen=True)
class HeadPlan:
    """Per-layer head layout of one decode step, computed once from the role masks.

    Built by [head_plan][lc_attention.lychee.attention.head_plan]; holds the retrieval
    heads grouped by KV head, the sparse heads and their KV heads as index tensors, so a
    decode step does no mask arithmetic.
    """

    num_heads: int
    num_kv_heads: int
    groups: tuple[_Group, ...]
    sparse: tuple[int, ...]
    sparse_t: torch.Tensor
    sparse_kv_t: torch.Tensor
    all_retrieval: bool
    pub_heads_t: torch.Tensor
    """All published heads (ascending), for the batched all-retrieval path."""
    memo: dict[Any, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)
    """Index tensors derived from the cache's strides (row offsets of the sparse gather),
    built at the first step that sees those strides and reused after."""

    @property
    def publishes(self) -> bool:
        return bool(self.pub_heads_t.numel())


def head_plan(
    retrieval: Sequence[bool] | torch.Tensor,
    publish: Sequence[bool] | torch.Tensor | None,
    num_heads: int,
    num_kv_heads: int,
    device: torch.device | str | None = None,
) -> HeadPlan:
    """Group one layer's heads for [hybrid_decode_attention][lc_attention.lychee.attention.hybrid_decode_attention].

    Args:
        retrieval: ``[HQ]`` booleans, True = retrieval head.
        publish: ``[HQ]`` retrieval heads whose top-k to compute (None: all of them).
        num_heads: query heads ``HQ``.
        num_kv_heads: KV heads ``HKV`` (``HQ`` a multiple of it).
        device: where the index tensors live (the cache's device).

    Raises:
        ValueError: masks of the wrong length, or ``publish`` on a sparse head.

    Example:
        >>> plan = head_plan([True, False, False, True], None, 4, 2)
        >>> [g.heads for g in plan.groups], plan.sparse
        ([(0,), (3,)], (1, 2))
    """
    if num_kv_heads < 1 or num_heads % num_kv_heads:
        raise ValueError(
            f"query heads ({num_heads}) must be a multiple of KV heads ({num_kv_heads})"
        )
    ret = _as_mask(retrieval, num_heads, "retrieval")
    pub = ret if publish is None else _as_mask(publish, num_heads, "publish")
    if any(p and not r for p, r in zip(pub, ret, strict=True)):
        raise ValueError("publish may only flag retrieval heads")
    g = num_heads // num_kv_heads

    def idx(xs: Sequence[int]) -> torch.Tensor:
        return torch.tensor(list(xs), dtype=torch.long, device=device)

    groups = []
    for j in range(num_kv_heads):
        heads = tuple(h for h in range(j * g, (j + 1) * g) if ret[h])
        if heads:
            local = tuple(i for i, h in enumerate(heads) if pub[h])
            consecutive = heads == tuple(range(heads[0], heads[-1] + 1))
            span = (heads[0], heads[-1] + 1) if consecutive else None
            groups.append(
                _Group(
                    j, heads, local, idx(heads), idx(local), idx([heads[i] for i in local]), span
                )
            )
    sparse = tuple(h for h in range(num_heads) if not ret[h])
    return HeadPlan(
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        groups=tuple(groups),
        sparse=sparse,
        sparse_t=idx(sparse),
        sparse_kv_t=idx([h // g for h in sparse]),
        all_retrieval=not sparse,
        pub_heads_t=idx([h for h in range(num_heads) if pub[h]]),
    )


_arange = cached_arange  # the decode loop asks for the same few ranges at every step


def _row_table(x: torch.Tensor) -> tuple[torch.Tensor, int, int] | None:
    """``x [B, T, HKV, D]`` as a 2-D row table ``[N, D]`` (no copy), with the row offsets
    of one batch row and of one KV head; None if the strides do not allow it (rows of
    one head must be evenly spaced and not overlap)."""
    b, t, hkv, d = x.shape
    sb, st, sh, sd = x.stride()
    if sd != 1 or st < d or (b > 1 and sb % st) or (hkv > 1 and sh % st):
        return None
    rb = sb // st if b > 1 else 0
    rh = sh // st if hkv > 1 else 0
    n = (b - 1) * rb + (hkv - 1) * rh + t
    return x.as_strided((n, d), (st, 1), x.storage_offset()), rb, rh


def _row_base(
    kv: torch.Tensor, b: int, rb: int, rh: int, memo: dict[Any, torch.Tensor] | None
) -> torch.Tensor:
    """Row offset ``[B, S, 1]`` of each (batch row, head) pair whose KV heads are ``kv``."""
    key = ("base", b, rb, rh)
    base = None if memo is None else memo.get(key)
    if base is None:
        base = _arange(0, b, kv.device).view(b, 1, 1) * rb + kv.view(1, -1, 1) * rh
        if memo is not None:
            memo[key] = base
    return base


def _gather_rows(x: torch.Tensor, kv: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Rows ``x[b, indices[b, s, :], kv[s]]`` as ``[B, S, K, D]`` (one ``index_select``)."""
    b, s, k = indices.shape
    rt = _row_table(x)
    if rt is None:
        bi = _arange(0, b, x.device).view(b, 1, 1)
        return x[bi, indices, kv.view(1, -1, 1)]
    table, rb, rh = rt
    rows = (_row_base(kv, b, rb, rh, None) + indices).view(-1)
    return table.index_select(0, rows).view(b, s, k, x.shape[-1])


def _sparse_gather(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor,
    kv_of_head: torch.Tensor,
    bias: torch.Tensor | None,
    memo: dict[Any, torch.Tensor] | None = None,
) -> torch.Tensor:
    """Attention of the scaled query ``q [B, S, D]`` over the gathered rows
    ``indices [B, S, K]`` only.

    When keys and values have the same shape and strides (every Hugging Face cache), one
    row index serves both gathers; ``memo`` keeps the row offsets between steps.
    """
    b, s, d = q.shape
    k = indices.shape[-1]
    kt = _row_table(k_cache)
    vt = _row_table(v_cache) if kt is not None else None
    if kt is not None and vt is not None and kt[1:] == vt[1:]:
        rows = (_row_base(kv_of_head, b, kt[1], kt[2], memo) + indices).view(-1)
        ks = kt[0].index_select(0, rows).view(b * s, k, d)
        vs = vt[0].index_select(0, rows).view(b * s, k, -1)
    else:
        ks = _gather_rows(k_cache, kv_of_head, indices).view(b * s, k, d)
        vs = _gather_rows(v_cache, kv_of_head, indices).view(b * s, k, -1)
    logits = _acc(torch.bmm(q.reshape(b * s, 1, d), ks.transpose(1, 2)))
    if bias is not None:
        logits = logits + bias.gather(1, indices.flatten(1)).view_as(logits)
    p = torch.softmax(logits, dim=-1)
    if p.dtype != vs.dtype:
        p = p.to(vs.dtype)
    return torch.bmm(p, vs).view(b, s, -1)


#: exact block-wise top-k of each row, unsorted (lc-kernels' block selection module)
block_topk_indices = block_max_topk


def _dense_group(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias: torch.Tensor | None,
    topk_rows: torch.Tensor | None,
    topk: int,
    block_size: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Dense attention of the scaled query ``q [..., G, D]`` over ``k, v [..., T, D]``;
    the top-k positions of the rows ``topk_rows`` of the flattened ``[..., G]`` heads
    (None: no top-k; a tensor of every row: top-k of the logits as they are).

    Returns ``(out [..., G, D], indices [B, len(topk_rows), topk] or None)``.
    """
    logits = _acc(torch.matmul(q, k.transpose(-1, -2)))  # [..., G, T]
    if bias is not None:
        b = bias.shape[0]
        logits = logits + bias.view(b, *([1] * (logits.dim() - 2)), -1)
    idx = None
    if topk_rows is not None:
        flat = logits.reshape(logits.shape[0], -1, logits.shape[-1])
        if topk_rows.numel() != flat.shape[1]:
            flat = flat.index_select(1, topk_rows)
        idx = block_topk_indices(flat, topk, block_size)
    p = torch.softmax(logits, dim=-1)
    if p.dtype != v.dtype:
        p = p.to(v.dtype)
    return torch.matmul(p, v), idx


def hybrid_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    *,
    retrieval: Sequence[bool] | torch.Tensor,
    indices: torch.Tensor | None,
    topk: int,
    scale: float | None = None,
    publish: Sequence[bool] | torch.Tensor | None = None,
    valid: torch.Tensor | None = None,
    block_size: int = 16,
    backend: Backend | str = Backend.TORCH,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Hybrid-head attention of one decode token in one layer.

    Args:
        q: ``[B, HQ, D]`` query of the new token (RoPE applied).
        k_cache: ``[B, T, HKV, D]`` keys, the new token's included (any strides, e.g.
            ``key.transpose(1, 2)`` of Hugging Face's ``[B, HKV, T, D]``).
        v_cache: ``[B, T, HKV, D]`` values.
        retrieval: ``[HQ]`` booleans, True = retrieval head.
        indices: ``[B, HQ, topk]`` int64 positions published by earlier layers (rows of
            retrieval heads are ignored); ``None`` only when every head is a retrieval head.
        topk: positions per head, ``1 <= topk <= T``.
        scale: softmax scale, default ``D ** -0.5``.
        publish: ``[HQ]`` retrieval heads whose top-k to compute (default: all retrieval
            heads; heads whose positions no later layer reads may be left out).
        valid: optional ``[B, T]`` bool, False for padding positions (``"torch"`` backend).
        block_size: block length of the block-wise top-k (both backends; exact, a speed
            knob).
        backend: a [Backend][lc_kernels.backend.Backend]: ``"torch"`` (plain PyTorch
            that gathers the selected rows), ``"triton"`` (``lc_kernels.decode``'s Triton
            kernels) or ``"auto"`` (``lc_kernels.decode`` on CUDA, ``"torch"`` elsewhere).
            ``"gather"`` and ``"kernels"`` (spellings of 0.13) were removed in 0.16.

    Returns:
        ``(out [B, HQ, D], indices [B, HQ, topk])``: the attention output and the positions
        to hand to the next layer (the input ``indices`` with the published rows
        replaced; ``None`` when nothing was published and none came in).

    Raises:
        ValueError: bad shapes, ``topk`` outside ``[1, T]``, sparse heads without
            ``indices``, ``indices`` of sparse heads outside ``[0, T)`` or not integers,
            a publish flag on a sparse head, or ``valid`` with the ``"triton"`` backend.
    """
    _check_tensors(q, k_cache, v_cache)
    plan = head_plan(retrieval, publish, q.shape[1], k_cache.shape[2], q.device)
    return decode_step(
        plan,
        q,
        k_cache,
        v_cache,
        indices=indices,
        topk=topk,
        scale=scale,
        valid=valid,
        block_size=block_size,
        backend=backend,
    )


def decode_step(
    plan: HeadPlan,
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    *,
    indices: torch.Tensor | None,
    topk: int,
    scale: float | None = None,
    valid: torch.Tensor | None = None,
    block_size: int = 16,
    backend: Backend | str = Backend.TORCH,
    out_indices: torch.Tensor | None = None,
    check: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """[hybrid_decode_attention][lc_attention.lychee.attention.hybrid_decode_attention]
    with a precomputed [HeadPlan][lc_attention.lychee.attention.HeadPlan].

    ``out_indices``: optional ``[B, HQ, topk]`` int64 tensor that receives the published
    rows in place and is returned as the new indices (it may be ``indices`` itself: a
    layer reads only sparse rows and writes only retrieval rows). ``check``: verify that
    the sparse heads' rows of ``indices`` lie in ``[0, T)`` (default; one device
    synchronisation per call, see
    [check_indices][lc_attention.lychee.attention.check_indices]); turn it off in a loop
    whose positions come from retrieval heads (as the Hugging Face integration, which
    calls [run_plan][lc_attention.lychee.attention.run_plan], does). Shapes, dtypes and
    devices are always checked. Other arguments and the return value as in
    ``hybrid_decode_attention``.

    Raises:
        TypeError: ``plan`` is not a ``HeadPlan``.
        ValueError: as ``hybrid_decode_attention``; also a plan built for other head
            counts or another device, a non-bool ``valid``, or an ``out_indices`` that is
            not an int64 ``[B, HQ, topk]`` tensor.
    """
    if not isinstance(plan, HeadPlan):
        raise TypeError(f"plan must be a HeadPlan (from head_plan), got {type(plan).__name__}")
    _check_tensors(q, k_cache, v_cache)
    b, hq, d = q.shape
    t = k_cache.shape[1]
    if (hq, k_cache.shape[2]) != (plan.num_heads, plan.num_kv_heads):
        raise ValueError(
            f"the plan is for {plan.num_heads} query / {plan.num_kv_heads} KV heads, got "
            f"q {tuple(q.shape)} and k_cache {tuple(k_cache.shape)}"
        )
    if plan.sparse_t.device != q.device:
        raise ValueError(
            f"the plan's index tensors are on {plan.sparse_t.device}, q on {q.device}; build "
            "it with head_plan(..., device=q.device)"
        )
    if not isinstance(topk, int) or not 1 <= topk <= t:
        raise ValueError(f"topk must be an integer in [1, T={t}] (context length), got {topk!r}")
    check_backend(backend)
    if plan.sparse:
        if indices is None:
            raise ValueError("sparse heads need indices published by an earlier layer")
        if indices.shape != (b, hq, topk):
            raise ValueError(
                f"indices must be [B, HQ, topk]={[b, hq, topk]}, got {list(indices.shape)}"
            )
        if indices.device != q.device:
            raise ValueError(f"indices is on {indices.device}, q on {q.device}")
        if check:
            check_indices(indices, None if len(plan.sparse) == hq else plan.sparse_t, t)
        elif indices.dtype.is_floating_point:
            raise ValueError(f"indices must be an integer tensor (int64), got {indices.dtype}")
    if valid is not None:
        if valid.shape != (b, t):
            raise ValueError(f"valid must be [B, T]={[b, t]}, got {list(valid.shape)}")
        if valid.dtype != torch.bool or valid.device != q.device:
            raise ValueError(
                f"valid must be a bool tensor on {q.device} (True = a real position), got "
                f"{valid.dtype} on {valid.device}"
            )
    kernels = route(backend, q.is_cuda and _kernels.kernels_available(), valid is not None)
    scale = d**-0.5 if scale is None else float(scale)
    bias = padding_bias(valid, q.device)

    new_idx = out_indices
    if new_idx is None:
        if indices is not None:
            new_idx = indices.clone()
        elif plan.publishes:
            new_idx = torch.zeros(b, hq, topk, dtype=torch.long, device=q.device)
    elif new_idx.shape != (b, hq, topk):
        raise ValueError(f"out_indices must be [B, HQ, topk]={[b, hq, topk]}")
    elif new_idx.dtype != torch.long or new_idx.device != q.device:
        raise ValueError(
            f"out_indices must be an int64 tensor on {q.device}, got {new_idx.dtype} on "
            f"{new_idx.device}"
        )
    out = run_plan(
        plan, q, k_cache, v_cache, indices, new_idx, topk, scale, bias, block_size, kernels
    )
    return out, new_idx


def padding_bias(valid: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
    """Additive logit bias ``[B, T]`` (0 or -inf) for a ``valid`` mask, None when nothing
    is masked."""
    if valid is None or bool(valid.all()):
        return None
    return torch.zeros(valid.shape, device=device).masked_fill(~valid, float("-inf"))


def run_plan(
    plan: HeadPlan,
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    indices: torch.Tensor | None,
    new_idx: torch.Tensor | None,
    topk: int,
    scale: float,
    bias: torch.Tensor | None,
    block_size: int,
    kernels: Backend | None,
) -> torch.Tensor:
    """The decode step of [decode_step][lc_attention.lychee.attention.decode_step] without
    its checks, for callers that guarantee them (the Hugging Face integration runs it 30
    times per token): ``kernels`` is None for the PyTorch gather path, else the backend
    handed to ``lc_kernels.decode`` (see [route][lc_attention.lychee.config.route]), ``scale`` a float,
    ``bias`` from [padding_bias][lc_attention.lychee.attention.padding_bias], ``new_idx``
    the ``[B, HQ, topk]`` tensor that receives the published rows (None: nothing to
    publish). Returns ``out [B, HQ, D]``.
    """
    b, hq, d = q.shape
    if kernels is None:
        qs = q * scale  # scaled once for all heads (the same values as per head)
        if plan.all_retrieval:
            # every head dense: one batched call over the KV groups, cache read in place
            g = hq // plan.num_kv_heads
            kh, vh = k_cache.transpose(1, 2), v_cache.transpose(1, 2)  # [B, HKV, T, D] views
            rows = plan.pub_heads_t if plan.publishes else None
            o, top = _dense_group(
                qs.view(b, plan.num_kv_heads, g, d), kh, vh, bias, rows, topk, block_size
            )
            if top is not None and new_idx is not None:
                new_idx.index_copy_(1, plan.pub_heads_t, top)
            o = o.reshape(b, hq, -1)
            return o if o.dtype == q.dtype else o.to(q.dtype)
    out = q.new_empty(b, hq, v_cache.shape[-1])
    # retrieval heads: one call per KV head, on that head's [B, T, D] slice of the cache
    for grp in plan.groups:
        kj, vj = k_cache[:, :, grp.kv], v_cache[:, :, grp.kv]  # [B, T, D]
        idx: torch.Tensor | None
        if kernels is not None:
            o, idx = _kernels.retrieval(
                q.index_select(1, grp.heads_t), kj.unsqueeze(2), vj.unsqueeze(2), topk,
                scale=scale, block_size=block_size, backend=kernels,
            )  # fmt: skip
            if grp.pub and idx is not None:
                idx = idx.index_select(1, grp.pub_t)
        else:
            span = grp.span
            qj = qs[:, span[0] : span[1]] if span else qs.index_select(1, grp.heads_t)
            rows = grp.pub_t if grp.pub else None
            o, idx = _dense_group(qj, kj, vj, bias, rows, topk, block_size)
        if grp.span is not None:
            out[:, grp.span[0] : grp.span[1]] = o
        else:
            out.index_copy_(1, grp.heads_t, o if o.dtype == out.dtype else o.to(out.dtype))
        if grp.pub and idx is not None and new_idx is not None:
            new_idx.index_copy_(1, grp.pub_heads_t, idx)
    if plan.sparse:
        assert indices is not None
        if kernels is not None:
            # one launch over all heads (the kernel maps query head -> KV head itself);
            # retrieval rows cost k positions each and are discarded
            o = _kernels.sparse(q, k_cache, v_cache, indices, scale=scale, backend=kernels)
            o = o.index_select(1, plan.sparse_t)
        else:
            o = _sparse_gather(
                qs.index_select(1, plan.sparse_t),
                k_cache,
                v_cache,
                indices.index_select(1, plan.sparse_t),
                plan.sparse_kv_t,
                bias,
                plan.memo,
            )
        out.index_copy_(1, plan.sparse_t, o if o.dtype == out.dtype else o.to(out.dtype))
    return out
