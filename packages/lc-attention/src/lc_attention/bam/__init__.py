"""BAM: positional encoding as a generalized-Gaussian log-prior on attention (arXiv 2505.22842).

[BAMPrior][lc_attention.bam.prior.BAMPrior] holds the per-head scale, shape and location;
[bam_attention][lc_attention.bam.attention.bam_attention] applies it (materialized through
SDPA for short sequences, blockwise for long ones).
"""

from __future__ import annotations

from lc_attention.bam.attention import bam_attention, bam_attention_reference
from lc_attention.bam.model import (
    BAMAttention,
    BAMTransformer,
    BAMTransformerConfig,
    PreNormBlock,
)
from lc_attention.bam.prior import BAMPrior, BAMPriorConfig, alibi_slopes, bam_bias, initial_shapes

__all__ = [
    "BAMAttention",
    "BAMPrior",
    "BAMPriorConfig",
    "BAMTransformer",
    "BAMTransformerConfig",
    "PreNormBlock",
    "alibi_slopes",
    "bam_attention",
    "bam_attention_reference",
    "bam_bias",
    "initial_shapes",
]
