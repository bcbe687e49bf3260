"""The LDAR head: a small transformer over the similarity profile that scores bands.

Input: per-passage features ``[batch, n, N_FEATURES]`` of similarity lists sorted best
first (:func:`~lc_agents.ldar.similarity_features`) and a validity mask ``[batch, n]``.
Each passage is embedded by a linear layer, contextualised by ``layers`` self-attention
blocks (so every passage sees the whole profile), and read out as a start score and an
end score. The logit of band ``[s, e)`` is ``start[s] + end[e - 1] + bias[band]``: the
learned per-band bias is what a fixed top-k would learn, the profile-dependent scores
move the choice per query. Bands reaching past a list's length get ``-inf``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from lc_agents.ldar.bands import Band
from lc_agents.ldar.features import N_FEATURES

__all__ = ["LdarHead", "build_head"]


def build_head(
    bands: Sequence[Band], *, hidden: int = 32, heads: int = 2, layers: int = 1
) -> LdarHead:
    """An :class:`LdarHead` for ``bands`` (imports torch)."""
    return LdarHead(bands, hidden=hidden, heads=heads, layers=layers)


class LdarHead(nn.Module):
    """Band scorer (see the module docs).

    Args:
        bands: the action set.
        hidden: width of the passage embeddings (divisible by ``heads``).
        heads: attention heads.
        layers: self-attention blocks.

    Examples:
        >>> import torch
        >>> from lc_agents.ldar.bands import default_bands
        >>> head = LdarHead(default_bands(4))
        >>> head(torch.zeros(2, 4, 11), torch.ones(2, 4, dtype=torch.bool)).shape
        torch.Size([2, 7])
    """

    band_starts: torch.Tensor
    band_ends: torch.Tensor

    def __init__(self, bands: Sequence[Band], *, hidden: int = 32, heads: int = 2, layers: int = 1):
        super().__init__()
        if not bands:
            raise ValueError("bands must not be empty")
        if hidden < 1 or heads < 1 or hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be a positive multiple of heads ({heads})")
        if layers < 0:
            raise ValueError(f"layers must be >= 0, got {layers}")
        self.bands = list(bands)
        self.embed = nn.Sequential(
            nn.Linear(N_FEATURES, hidden), nn.GELU(), nn.Linear(hidden, hidden)
        )
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(
                hidden, heads, dim_feedforward=2 * hidden, dropout=0.0, batch_first=True
            )
            for _ in range(layers)
        )
        self.start_head = nn.Linear(hidden, 1)
        self.end_head = nn.Linear(hidden, 1)
        self.bias = nn.Parameter(torch.zeros(len(self.bands)))
        self.register_buffer(
            "band_starts", torch.tensor([b.start for b in self.bands]), persistent=False
        )
        self.register_buffer(
            "band_ends", torch.tensor([b.end for b in self.bands]), persistent=False
        )

    def forward(self, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Band logits ``[batch, len(bands)]``; ``-inf`` for bands past a list's end.

        Args:
            features: ``[batch, n, N_FEATURES]`` float.
            mask: ``[batch, n]`` bool, True for real passages (a prefix of each row).
        """
        if features.dim() != 3 or features.shape[-1] != N_FEATURES:
            raise ValueError(
                f"features must be [batch, n, {N_FEATURES}], got {tuple(features.shape)}"
            )
        if mask.shape != features.shape[:2]:
            raise ValueError(f"mask must be {tuple(features.shape[:2])}, got {tuple(mask.shape)}")
        n = features.shape[1]
        h = self.embed(features)
        for block in self.blocks:
            h = block(h, src_key_padding_mask=~mask)
        start = self.start_head(h).squeeze(-1)  # [B, n]
        end = self.end_head(h).squeeze(-1)
        s_idx = self.band_starts.clamp(max=n - 1)
        e_idx = (self.band_ends - 1).clamp(max=n - 1)
        logits = start[:, s_idx] + end[:, e_idx] + self.bias
        lengths = mask.sum(dim=1, keepdim=True)  # [B, 1]
        fits = self.band_ends.unsqueeze(0) <= lengths
        return logits.masked_fill(~fits, float("-inf"))
