"""Block selection in plain PyTorch: the forced-block rule, top-k of block scores, and the
exact block-wise top-k of token scores.

One rule serves every sparse method of lc-attention (NSA's selection branch, DSSA's
stage 1, LycheeDecode's retrieval heads): a query at position ``p`` in block
``own = p // block_size`` always takes the first ``init_blocks`` blocks and the
``local_blocks`` most recent blocks ending at ``own``, never a block after ``own``, and
fills its other slots with the best-scoring blocks.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lc_kernels.renames import renamed_params


def forced_block_mask(
    own: torch.Tensor, n_blocks: int, init_blocks: int, local_blocks: int
) -> torch.Tensor:
    """``[..., NB]`` bool: the blocks forced for a query whose own block is ``own [...]``.

    Forced: ``j < init_blocks`` or ``own - local_blocks < j <= own``, and never ``j > own``.

    Example:
        >>> forced_block_mask(torch.tensor([3]), 6, 1, 2).int().tolist()
        [[1, 0, 1, 1, 0, 0]]
    """
    j = torch.arange(n_blocks, device=own.device)
    o = own.unsqueeze(-1)
    return ((j < init_blocks) | (j > o - local_blocks)) & (j <= o)


def forced_block_ids(
    own: torch.Tensor, init_blocks: int, local_blocks: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The forced blocks of [forced_block_mask][lc_kernels.block_select.reference.forced_block_mask]
    as id lists, for kernels that loop over them.

    Args:
        own: ``[N]`` own block of each query (or tile of queries).
        init_blocks: leading blocks always taken.
        local_blocks: most recent blocks always taken; at least the own block is listed
            (``max(1, local_blocks)`` local slots).

    Returns:
        ``(ids [N, F], ok [N, F])``, ``F = init_blocks + max(1, local_blocks)``: the
        initial blocks, then the local window ending at ``own``. A slot is empty
        (``ok`` False) when its block is negative, after ``own``, or (a local slot) one of
        the initial blocks, so that each block counts once.

    Example:
        >>> ids, ok = forced_block_ids(torch.tensor([0, 3]), 1, 2)
        >>> ids.tolist(), ok.tolist()
        ([[0, -1, 0], [0, 2, 3]], [[True, False, False], [True, True, True]])
    """
    n_loc = max(1, local_blocks)
    n = own.shape[0]
    dev = own.device
    ids = torch.cat(
        [
            torch.arange(init_blocks, device=dev).expand(n, -1),
            own[:, None] - torch.arange(n_loc - 1, -1, -1, device=dev),
        ],
        1,
    )
    ok = (ids >= 0) & (ids <= own[:, None])
    ok[:, init_blocks:] &= ids[:, init_blocks:] >= init_blocks
    return ids, ok


@renamed_params({"top_k": "topk"}, "lc-kernels 0.10")
def topk_blocks_from_scores(
    scores: torch.Tensor,
    block_size: int,
    topk: int,
    init_blocks: int,
    local_blocks: int,
    positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """Top-k block ids from ``scores [B, T, H_kv, NB]`` with forced and excluded blocks.

    The first ``init_blocks`` blocks and the ``local_blocks`` most recent blocks (the
    token's own block and the ones just before it) are always taken; future blocks never
    ([forced_block_mask][lc_kernels.block_select.reference.forced_block_mask]). Slots
    that cannot be filled (early tokens) hold ``-1``. Runs on any device (``torch.topk``).

    Args:
        scores: ``[B, T, H_kv, NB]`` block importance.
        block_size: tokens per selection block.
        topk: blocks per token (``top_k`` until 0.7: warns, removed in 0.10).
        init_blocks: leading blocks always taken.
        local_blocks: most recent blocks always taken.
        positions: ``[T]`` position of each query row (default ``0..T-1``; decoding
            passes the positions of the new tokens).

    Returns:
        ``[B, T, H_kv, topk]`` int32 block ids, best first (forced blocks first).

    Example:
        >>> s = torch.tensor([0.0, 5.0, 1.0, 4.0, 3.0]).view(1, 1, 1, 5)
        >>> ids = topk_blocks_from_scores(s, 4, 3, 1, 1, torch.tensor([19])).flatten()
        >>> sorted(ids[:2].tolist()), ids[2].item()  # forced blocks (tied), then the best
        ([0, 4], 1)
    """
    b, t, h, nb = scores.shape
    pos = torch.arange(t, device=scores.device) if positions is None else positions
    own = pos // block_size
    forced = forced_block_mask(own, nb, init_blocks, local_blocks).view(1, t, 1, nb)
    future = (torch.arange(nb, device=scores.device) > own.unsqueeze(-1)).view(1, t, 1, nb)
    s = torch.where(forced, torch.full_like(scores, float("inf")), scores)
    s = torch.where(future, torch.full_like(s, float("-inf")), s)
    if topk > nb:
        s = torch.cat([s, s.new_full((b, t, h, topk - nb), float("-inf"))], -1)
    val, idx = torch.topk(s, topk, dim=-1)
    return torch.where(val == float("-inf"), torch.full_like(idx, -1), idx).to(torch.int32)


_ARANGE: dict[tuple[int, int, torch.device], torch.Tensor] = {}


def cached_arange(start: int, stop: int, device: torch.device) -> torch.Tensor:
    """``torch.arange(start, stop)`` on ``device``, built once per (start, stop, device)
    (a decode loop asks for the same few ranges at every step; do not write to it).

    Example:
        >>> cpu = torch.device("cpu")
        >>> cached_arange(0, 3, cpu) is cached_arange(0, 3, cpu)
        True
    """
    key = (start, stop, device)
    r = _ARANGE.get(key)
    if r is None:
        if len(_ARANGE) > 256:
            _ARANGE.clear()
        r = _ARANGE[key] = torch.arange(start, stop, device=device)
    return r


def block_max_topk(scores: torch.Tensor, k: int, block_size: int) -> torch.Tensor:
    """Positions of the ``k`` largest entries of each row of ``scores [..., T]`` (unsorted).

    Block-wise selection: split each row into blocks of ``block_size``, keep the ``k``
    blocks with the largest maxima, and take the top ``k`` among their elements. This is
    exact: if an element of the top ``k`` sat in a block outside the kept ones, each of the
    ``k`` kept blocks would hold an element at least as large, so it would rank ``k + 1``
    or later (ties aside, where any choice is a valid top ``k``). A last partial block is
    always a candidate. It reads the row once for the maxima and then selects among only
    ``k * block_size`` candidates; ``torch.topk`` when the candidates would not be fewer
    than the row. The fast PyTorch path of an exact top-k on CPU; the kernel path with a
    deterministic tie rule is [block_topk][lc_kernels.decode.block_topk].

    Example:
        >>> s = torch.tensor([[0.0, 5.0, 1.0, 4.0, 3.0, 9.0, 2.0]])
        >>> sorted(block_max_topk(s, 2, 2)[0].tolist())
        [1, 5]
    """
    t = scores.shape[-1]
    nb = t // block_size  # whole blocks; a shorter tail is always kept as candidates
    if k * block_size >= t or k >= nb:
        return torch.topk(scores, k, dim=-1, sorted=False).indices
    lead = scores.shape[:-1]
    x = scores.reshape(-1, t)
    r, whole = x.shape[0], nb * block_size
    # block maxima; max pooling reads the row as fast as a copy (an amax over an inner
    # dimension of 16 reads it more slowly on CPU)
    maxima = F.max_pool1d(x[:, None, :whole], block_size).view(r, nb)
    top_blocks = torch.topk(maxima, k, dim=-1, sorted=False).indices  # [R, k]
    offs = cached_arange(0, block_size, x.device)
    cand = offs.add(top_blocks.unsqueeze(-1), alpha=block_size).view(r, -1)
    if whole < t:
        tail = cached_arange(whole, t, x.device).expand(r, t - whole)
        cand = torch.cat([cand, tail], dim=1)
    pick = torch.topk(x.gather(1, cand), k, dim=-1, sorted=False).indices
    return cand.gather(1, pick).view(*lead, k)
