"""Long-context attention layers as ``torch.nn.Module`` objects and their Hugging Face
integration. Layers call lc-kernels for the heavy lifting and never own a training loop.

- Native Sparse Attention: [NSAConfig][lc_attention.nsa.config.NSAConfig],
  [NativeSparseAttention][lc_attention.nsa.layer.NativeSparseAttention] and the tiny
  [NSATransformer][lc_attention.nsa.model.NSATransformer].
- DSSA (InfLLM-v2) dense-sparse switchable attention for pretrained models:
  [lc_attention.dssa][] and the Hugging Face switch [lc_attention.hf][].
- Linear recurrences: gated linear attention, mLSTM and the SWAX hybrid in
  [lc_attention.linear][].
- BAM, the generalized-Gaussian positional prior: [lc_attention.bam][].
- Hierarchical chunk sparse attention (chunk encoder, exactly-k chunk retrieval,
  bypassing residual, sliding window): [lc_attention.hsa][].
- LycheeDecode hybrid-head sparse decoding with learned head roles:
  [lc_attention.lychee][].
- The switch every method above uses on a pretrained transformers model
  (``enable_<method>(model, config)``, a context manager):
  [lc_attention.integration][].

Every name below is imported on first use, so ``import lc_attention`` stays light.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__: str = version("lc-attention")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

_LAZY = {
    "NSAConfig": "lc_attention.nsa",
    "NativeSparseAttention": "lc_attention.nsa",
    "NSATransformer": "lc_attention.nsa",
    "CompressionMLP": "lc_attention.nsa",
    "NSACache": "lc_attention.nsa",
    "DSSAConfig": "lc_attention.dssa",
    "dssa_attention": "lc_attention.dssa",
    "CompressedKeyCache": "lc_attention.dssa",
    "enable_dssa": "lc_attention.hf",
    "disable_dssa": "lc_attention.hf",
    "is_dssa_enabled": "lc_attention.hf",
    "GLAConfig": "lc_attention.linear",
    "GatedLinearAttention": "lc_attention.linear",
    "MLSTMConfig": "lc_attention.linear",
    "MLSTMLayer": "lc_attention.linear",
    "MLSTMState": "lc_attention.linear",
    "SWAXConfig": "lc_attention.linear",
    "SWAXModel": "lc_attention.linear",
    "SlidingWindowAttention": "lc_attention.linear",
    "StochasticWindow": "lc_attention.linear",
    "gated_linear_attention": "lc_attention.linear",
    "linear_attention": "lc_attention.linear",
    "mlstm": "lc_attention.linear",
    "BAMPrior": "lc_attention.bam",
    "BAMPriorConfig": "lc_attention.bam",
    "BAMTransformer": "lc_attention.bam",
    "BAMTransformerConfig": "lc_attention.bam",
    "bam_attention": "lc_attention.bam",
    "alibi_slopes": "lc_attention.bam",
    "PreNormBlock": "lc_attention.bam",
    "initial_shapes": "lc_attention.bam",
    "HSATransformer": "lc_attention.hsa",
    "HSATransformerConfig": "lc_attention.hsa",
    "HSABlock": "lc_attention.hsa",
    "ChunkEncoder": "lc_attention.hsa",
    "ChunkSparseAttention": "lc_attention.hsa",
    "hsa_attention": "lc_attention.hsa",
    "hsa_attention_reference": "lc_attention.hsa",
    "select_chunks": "lc_attention.hsa",
    "chunk_scores": "lc_attention.hsa",
    "LycheeConfig": "lc_attention.lychee",
    "RoleMap": "lc_attention.lychee",
    "HardKumaGates": "lc_attention.lychee",
    "RoleTrainingConfig": "lc_attention.lychee",
    "RoleTrainingResult": "lc_attention.lychee",
    "train_head_roles": "lc_attention.lychee",
    "enable_lychee": "lc_attention.lychee",
    "disable_lychee": "lc_attention.lychee",
    "is_lychee_enabled": "lc_attention.lychee",
    "hybrid_decode_attention": "lc_attention.lychee",
    "model_fingerprint": "lc_attention.lychee",
    "AttentionHandle": "lc_attention.integration",
    "AttentionMethod": "lc_attention.integration",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    """Import the torch-backed classes on first use, so ``import lc_attention`` stays light."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lc_attention' has no attribute {name!r}")
