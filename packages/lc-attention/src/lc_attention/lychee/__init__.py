"""LycheeDecode: hybrid-head sparse decoding with learned head roles.

During decoding, a few *retrieval heads* attend to the whole KV cache and publish their
top-k token positions; the many *sparse heads* attend only to the positions published
at their head index by an earlier layer. Which head plays which role is learned with
per-head HardKuma gates, distilled against full attention under a budget on the number
of retrieval heads. Prefill stays dense.

- [hybrid_decode_attention][lc_attention.lychee.attention.hybrid_decode_attention]: one
  layer's decode step on tensors.
- [correct_cache][lc_attention.lychee.correction.correct_cache] /
  [generate_with_correction][lc_attention.lychee.correction.generate_with_correction]:
  periodic dense re-run of the generated tokens (cache correction).
- [PreallocatedCache][lc_attention.lychee.cache.PreallocatedCache]: a ``DynamicCache``
  whose append is an in-place write (no per-step copy of the whole cache).
- [HardKumaGates][lc_attention.lychee.hardkuma.HardKumaGates] and the HardKuma functions.
- [RoleMap][lc_attention.lychee.roles.RoleMap]: learned roles with a model fingerprint.
- [train_head_roles][lc_attention.lychee.train.train_head_roles]: distillation training.
- [enable_lychee][lc_attention.lychee.hf.enable_lychee] /
  [disable_lychee][lc_attention.lychee.hf.disable_lychee]: Hugging Face switch.
"""

from __future__ import annotations

from lc_attention.lychee.attention import block_topk_indices, hybrid_decode_attention
from lc_attention.lychee.cache import PreallocatedCache
from lc_attention.lychee.config import LycheeConfig
from lc_attention.lychee.correction import correct_cache, generate_with_correction
from lc_attention.lychee.hardkuma import (
    HardKumaGates,
    hardkuma_p0,
    hardkuma_p1,
    hardkuma_sample,
    kuma_cdf,
    kuma_sample,
)
from lc_attention.lychee.hf import disable_lychee, enable_lychee, is_lychee_enabled
from lc_attention.lychee.roles import RoleMap, model_fingerprint
from lc_attention.lychee.train import RoleTrainingConfig, RoleTrainingResult, train_head_roles

__all__ = [
    "HardKumaGates",
    "LycheeConfig",
    "PreallocatedCache",
    "RoleMap",
    "RoleTrainingConfig",
    "RoleTrainingResult",
    "block_topk_indices",
    "correct_cache",
    "disable_lychee",
    "enable_lychee",
    "generate_with_correction",
    "hardkuma_p0",
    "hardkuma_p1",
    "hardkuma_sample",
    "hybrid_decode_attention",
    "is_lychee_enabled",
    "kuma_cdf",
    "kuma_sample",
    "model_fingerprint",
    "train_head_roles",
]
