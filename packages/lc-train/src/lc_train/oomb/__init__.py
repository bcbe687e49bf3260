"""Chunk-recurrent memory-efficient long-context training (OOMB).

Exact loss and gradients of a causal LM over sequences far longer than activation memory
allows: activations are held for one chunk at a time, keys/values and their gradients in
fixed-size pages (on the device, or in host memory with prefetch: ``offload``). Optional
page-level sparse attention (``page_budget``) trades exactness for compute. The LM head
and the loss run over pieces of ``loss_chunk_size`` positions, so a chunk's full logits
are never built (:func:`lm_head_loss_backward`).
:func:`finetune` (and the ``lc-train oomb-finetune`` command) runs resumable fine-tuning
on top.
"""

from __future__ import annotations

from lc_train.oomb.checks import SUPPORTED_MODEL_TYPES, estimate_kv_bytes
from lc_train.oomb.config import ChunkRecurrentConfig
from lc_train.oomb.finetune import FinetuneConfig, FinetuneError, FinetuneResult, finetune
from lc_train.oomb.loss import lm_head_loss_backward
from lc_train.oomb.offload import PageStager, StagerStats
from lc_train.oomb.trainer import ChunkRecurrentResult, chunk_recurrent_backward

__all__ = [
    "SUPPORTED_MODEL_TYPES",
    "ChunkRecurrentConfig",
    "ChunkRecurrentResult",
    "FinetuneConfig",
    "FinetuneError",
    "FinetuneResult",
    "PageStager",
    "StagerStats",
    "chunk_recurrent_backward",
    "estimate_kv_bytes",
    "finetune",
    "lm_head_loss_backward",
]
