"""Up-front checks of chunk-recurrent training: model family, lengths, memory."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import torch

from lc_kernels.paged import PageLayout
from lc_train.oomb.config import ChunkRecurrentConfig

if TYPE_CHECKING:
    from transformers import PreTrainedModel

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")
"""``config.model_type`` of the transformers families whose attention layers go through
the attention interface with full causal attention (no sliding window, no soft-capping)."""


def text_config(model: PreTrainedModel) -> Any:
    """The decoder's config (the model's own config for plain causal LMs)."""
    return model.config.get_text_config(decoder=True)


def check_model(model: PreTrainedModel) -> None:
    """Raise ``ValueError`` unless the model is a supported family with full attention."""
    text = text_config(model)
    family = getattr(text, "model_type", None)
    if family not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"chunk-recurrent training does not support model_type={family!r}; supported: "
            f"{', '.join(SUPPORTED_MODEL_TYPES)} (full causal attention layers)"
        )
    layer_types = getattr(text, "layer_types", None) or []
    sliding = getattr(text, "use_sliding_window", True) and (
        getattr(text, "sliding_window", None) is not None
    )
    if sliding or any(t != "full_attention" for t in layer_types):
        raise ValueError(
            f"this {family} model uses sliding-window attention (sliding_window="
            f"{getattr(text, 'sliding_window', None)}); chunk-recurrent training supports "
            "full causal attention layers only"
        )


def estimate_kv_bytes(
    model: PreTrainedModel,
    batch: int,
    seq_len: int,
    config: ChunkRecurrentConfig,
    dtype: torch.dtype | None = None,
) -> int:
    """Bytes of the four page pools (keys, values and their gradients) for one sequence.

    ``4 * layers * ceil(seq_len / page_size) * page_bytes`` with
    ``page_bytes = batch * kv_heads * page_size * head_dim * itemsize``.
    """
    text = text_config(model)
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    dtype = dtype or next(model.parameters()).dtype
    layout = PageLayout(batch, text.num_key_value_heads, config.page_size, head_dim, dtype)
    pages = -(-seq_len // config.page_size)
    return 4 * text.num_hidden_layers * pages * layout.page_bytes


def available_bytes(device: torch.device) -> int:
    """Free memory where the pages will live: CUDA free memory, else host MemAvailable."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def check_run(model: PreTrainedModel, input_ids: torch.Tensor, config: ChunkRecurrentConfig) -> int:
    """All up-front checks of one call; returns the estimated KV bytes."""
    check_model(model)
    batch, seq_len = input_ids.shape
    if seq_len < config.chunk_size:
        raise ValueError(
            f"the sequence ({seq_len} tokens) is shorter than one chunk (chunk_size="
            f"{config.chunk_size}); use ordinary back-propagation or a smaller chunk_size"
        )
    need = estimate_kv_bytes(model, batch, seq_len, config)
    where = torch.device("cpu") if config.offload else input_ids.device
    limit = config.memory_limit_bytes or available_bytes(where)
    if need > limit:
        raise ValueError(
            f"the paged KV memory would need {need / 2**30:.2f} GiB on {where.type} but "
            f"{limit / 2**30:.2f} GiB is available (memory_limit_bytes="
            f"{config.memory_limit_bytes}); shorten the sequence, the batch or the model"
        )
    return need
