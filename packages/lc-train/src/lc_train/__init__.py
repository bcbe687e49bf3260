"""Long-context training systems and objectives.

- :mod:`lc_train.oomb`: chunk-recurrent training with exact gradients over paged
  key/value memory (activation memory of one chunk, whatever the sequence length).
- :mod:`lc_train.preference`: SoLoPO (short-context preference optimization plus
  short-to-long reward alignment) over DPO, SimPO and ORPO rewards, as losses and as a
  trainer on TRL's ``DPOTrainer`` (extra ``trl``).
- :mod:`lc_train.rl`: DAPO's pieces, multi-conversation MemAgent rollouts, a DAPO/SFT
  turn trainer and oracle memory traces for training memory agents.
- :mod:`lc_train.lora`: :func:`apply_lora`, LoRA adapters (``peft``) with a seeded
  initialisation, as used by OOMB fine-tuning and the SoLoPO benchmarks.
- :mod:`lc_train.icl_drift`: in-context regression under task drift (linear attention
  vs gated linear attention vs softmax attention).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from lc_train.lora import LORA_TARGET_MODULES, apply_lora
from lc_train.oomb import (
    SUPPORTED_MODEL_TYPES,
    ChunkRecurrentConfig,
    ChunkRecurrentResult,
    FinetuneConfig,
    FinetuneResult,
    chunk_recurrent_backward,
    estimate_kv_bytes,
    finetune,
)
from lc_train.preference import (
    PreferencePair,
    ResponseLogps,
    SoLoPOConfig,
    build_pairs,
    pad_context,
    pair_records,
    response_logps,
    solopo_loss,
)
from lc_train.rl import DAPOConfig, group_advantages

try:
    __version__: str = version("lc-train")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "LORA_TARGET_MODULES",
    "SUPPORTED_MODEL_TYPES",
    "ChunkRecurrentConfig",
    "ChunkRecurrentResult",
    "DAPOConfig",
    "FinetuneConfig",
    "FinetuneResult",
    "PreferencePair",
    "ResponseLogps",
    "SoLoPOConfig",
    "__version__",
    "apply_lora",
    "build_pairs",
    "chunk_recurrent_backward",
    "estimate_kv_bytes",
    "finetune",
    "group_advantages",
    "pad_context",
    "pair_records",
    "response_logps",
    "solopo_loss",
]
