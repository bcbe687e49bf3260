"""The Native Sparse Attention layer: compression, selection and sliding-window branches."""

from __future__ import annotations

import torch
from torch import nn

from lc_attention._sdpa import masked_sdpa
from lc_attention.nsa.cache import NSACache
from lc_attention.nsa.config import NSAConfig
from lc_attention.rope import apply_rotary, rotary_tables
from lc_kernels.renames import renamed_params


class CompressionMLP(nn.Module):
    """Learnable compression of spans of ``kernel_size`` tokens into one token.

    Each span (stride ``stride``) gets an intra-block position embedding added,
    is flattened and mapped by a two-layer MLP to one ``head_dim`` vector. Weights are
    shared across heads. (The keyword ``kernel_stride`` of 0.14 warns until 0.17.)
    """

    @renamed_params({"kernel_stride": "stride"}, "lc-attention 0.17")
    def __init__(self, kernel_size: int, stride: int, head_dim: int, hidden: int) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride
        self.pos = nn.Parameter(torch.zeros(kernel_size, head_dim))
        self.mlp = nn.Sequential(
            nn.Linear(kernel_size * head_dim, hidden), nn.GELU(), nn.Linear(hidden, head_dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, T, H, D]`` -> ``[B, C, H, D]``, ``C = (T - kernel_size) // stride + 1``."""
        b, t, h, d = x.shape
        if t < self.kernel_size:
            return x.new_zeros(b, 0, h, d)
        spans = x.unfold(1, self.kernel_size, self.stride).transpose(-1, -2)  # [B, C, H, l, D]
        spans = spans + self.pos
        return self.mlp(spans.flatten(-2)).contiguous()


class NativeSparseAttention(nn.Module):
    """NSA attention layer (arXiv 2502.11089) with GQA and RoPE.

    ``o = g_cmp * Attn(q, K_cmp, V_cmp) + g_slc * Attn(q, K_slc, V_slc) + g_win * Attn(q, K_win, V_win)``
    with per-head gates ``g = sigmoid(W_g x)``. The compression branch attends to keys
    and values compressed by [CompressionMLP][lc_attention.nsa.layer.CompressionMLP];
    its attention probabilities, summed over the query heads of a group, choose the
    ``topk`` selection blocks (initial and local blocks forced) for the selection
    branch, run by ``lc_kernels.selected_attention`` (FSA loop order for groups of <= 8
    query heads, NSA order above, Triton on CUDA). The sliding-window branch sees the
    last ``window`` tokens. Selection and window branches use RoPE'd queries and
    keys; the compression branch uses unrotated ones (the position embedding inside a
    span carries position there).

    Example:
        >>> import torch
        >>> layer = NativeSparseAttention(NSAConfig.small(hidden_size=64, num_heads=4, num_kv_heads=2))
        >>> layer(torch.randn(2, 40, 64)).shape
        torch.Size([2, 40, 64])
    """

    def __init__(self, config: NSAConfig) -> None:
        super().__init__()
        self.config = c = config
        self.q_proj = nn.Linear(c.hidden_size, c.num_heads * c.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_kv_heads * c.head_dim, bias=False)
        self.o_proj = nn.Linear(c.num_heads * c.head_dim, c.hidden_size, bias=False)
        hid = c.compress_hidden or 2 * c.head_dim
        self.k_compress = CompressionMLP(c.kernel_size, c.stride, c.head_dim, hid)
        self.v_compress = CompressionMLP(c.kernel_size, c.stride, c.head_dim, hid)
        self.gate = nn.Linear(c.hidden_size, 3 * c.num_heads)

    def forward(
        self, x: torch.Tensor, return_indices: bool = False, cache: NSACache | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Apply the layer to a whole sequence, or to new tokens given a decode cache.

        Args:
            x: ``[B, T, hidden_size]`` hidden states (with ``cache``: the new tokens,
                which follow the cached ones).
            return_indices: also return the selected blocks ``[B, T, H_kv, topk]``.
            cache: an [NSACache][lc_attention.nsa.cache.NSACache], updated in place;
                outputs equal those of a full forward over the whole sequence.

        Returns:
            ``[B, T, hidden_size]`` (and the block ids when asked).
        """
        c = self.config
        if x.dim() != 3 or x.shape[-1] != c.hidden_size:
            raise ValueError(f"x must be [batch, seq, {c.hidden_size}], got {tuple(x.shape)}")
        if cache is not None:
            out, idx = self._decode(x, cache)
            return (out, idx) if return_indices else out
        from lc_kernels import (
            compressed_attention,
            select_blocks,
            selected_attention,
            sliding_window_attention,
        )

        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, c.num_heads, c.head_dim)
        k = self.k_proj(x).view(b, t, c.num_kv_heads, c.head_dim)
        v = self.v_proj(x).view(b, t, c.num_kv_heads, c.head_dim)

        k_cmp, v_cmp = self.k_compress(k), self.v_compress(v)
        o_cmp = compressed_attention(q, k_cmp, v_cmp, c.kernel_size, c.stride)
        with torch.no_grad():
            idx = select_blocks(
                q.detach(),
                k_cmp.detach(),
                c.block_size,
                c.topk,
                c.kernel_size,
                c.stride,
                c.init_blocks,
                c.local_blocks,
            )

        cos, sin = rotary_tables(t, c.head_dim, c.rope_theta, x.device)
        qr, kr = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        o_slc = selected_attention(qr, kr, v.contiguous(), idx, c.block_size, order=c.kernel_order)
        o_win = sliding_window_attention(qr, kr, v.contiguous(), c.window)

        g = torch.sigmoid(self.gate(x)).view(b, t, c.num_heads, 3, 1).to(q.dtype)
        o = g[:, :, :, 0] * o_cmp + g[:, :, :, 1] * o_slc + g[:, :, :, 2] * o_win
        out = self.o_proj(o.reshape(b, t, c.num_heads * c.head_dim))
        return (out, idx) if return_indices else out

    def _decode(self, x: torch.Tensor, cache: NSACache) -> tuple[torch.Tensor, torch.Tensor]:
        """New tokens against the cache: incremental compression, selection and window."""
        from lc_kernels import num_compressed, selected_attention
        from lc_kernels.block_select import topk_blocks_from_scores
        from lc_kernels.compressed_attention.reference import (
            block_scores_reference,
            compressed_attention_reference,
        )

        c = self.config
        b, n, _ = x.shape
        start = cache.length
        if cache.k is not None and cache.k.shape[0] != b:
            raise ValueError(f"cache holds batch {cache.k.shape[0]}, x has batch {b}")
        total = start + n
        q = self.q_proj(x).view(b, n, c.num_heads, c.head_dim)
        k = self.k_proj(x).view(b, n, c.num_kv_heads, c.head_dim)
        v = self.v_proj(x).view(b, n, c.num_kv_heads, c.head_dim)
        cos, sin = rotary_tables(n, c.head_dim, c.rope_theta, x.device, offset=start)
        qr, kr_new = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        cat = lambda old, new: new if old is None else torch.cat([old, new], 1)  # noqa: E731
        cache.k, cache.v, cache.k_rot = cat(cache.k, k), cat(cache.v, v), cat(cache.k_rot, kr_new)
        assert cache.k is not None
        assert cache.v is not None
        assert cache.k_rot is not None

        c_old = 0 if cache.k_cmp is None else int(cache.k_cmp.shape[1])
        c_new = num_compressed(total, c.kernel_size, c.stride)
        if c_new > c_old:
            lo, hi = c_old * c.stride, (c_new - 1) * c.stride + c.kernel_size
            cache.k_cmp = cat(cache.k_cmp, self.k_compress(cache.k[:, lo:hi]))
            cache.v_cmp = cat(cache.v_cmp, self.v_compress(cache.v[:, lo:hi]))
        elif cache.k_cmp is None:
            cache.k_cmp = k.new_zeros(b, 0, c.num_kv_heads, c.head_dim)
            cache.v_cmp = v.new_zeros(b, 0, c.num_kv_heads, c.head_dim)
        assert cache.k_cmp is not None
        assert cache.v_cmp is not None

        pos = torch.arange(start, total, device=x.device)
        scale = c.head_dim**-0.5
        # the prefill's compressed attention, with the new queries at their positions
        o_cmp, _ = compressed_attention_reference(
            q, cache.k_cmp, cache.v_cmp, c.kernel_size, c.stride, scale, start=start
        )

        with torch.no_grad():  # the prefill's scores (select_blocks), at the new positions
            scores = block_scores_reference(
                q, cache.k_cmp, c.kernel_size, c.stride, c.block_size, scale,
                start=start, kv_len=total,
            )  # fmt: skip
            idx = topk_blocks_from_scores(
                scores, c.block_size, c.topk, c.init_blocks, c.local_blocks, positions=pos
            )
        # selected blocks: lc-kernels' selected attention with queries aligned to the end of
        # the cache (Triton on CUDA: only the chosen blocks are read)
        o_slc = selected_attention(
            qr.contiguous(), cache.k_rot, cache.v, idx.contiguous(), c.block_size,
            order=c.kernel_order, check=False,
        )  # fmt: skip
        # window: only the last window + n - 1 keys can be seen
        lo = max(0, total - n - c.window + 1)
        keys = torch.arange(lo, total, device=x.device)
        win = (keys <= pos[:, None]) & (keys > pos[:, None] - c.window)  # [n, L]
        o_win = masked_sdpa(qr, cache.k_rot[:, lo:], cache.v[:, lo:], win[None, None], scale)

        gt = torch.sigmoid(self.gate(x)).view(b, n, c.num_heads, 3, 1).to(q.dtype)
        o = gt[:, :, :, 0] * o_cmp + gt[:, :, :, 1] * o_slc + gt[:, :, :, 2] * o_win
        return self.o_proj(o.reshape(b, n, c.num_heads * c.head_dim)), idx
