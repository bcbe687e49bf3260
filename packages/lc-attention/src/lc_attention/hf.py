"""Hugging Face integration: switch a loaded transformers model to DSSA and back.

DSSA is parameter-free, so a pretrained model runs it with its own projections. The
attention function is registered in transformers' ``AttentionInterface`` under
``"lc_dssa"`` (with the SDPA boolean mask in ``AttentionMaskInterface``); each attention
module of the model carries its [DSSAConfig][lc_attention.dssa.DSSAConfig] and a
[CompressedKeyCache][lc_attention.dssa.CompressedKeyCache], so ``generate()`` decodes
with incremental compressed keys and per-step block selection.

Example:
    >>> from lc_attention.dssa import DSSAConfig
    >>> from lc_attention.hf import enable_dssa
    >>> with enable_dssa(model, DSSAConfig.small()):  # doctest: +SKIP
    ...     out = model.generate(ids, max_new_tokens=16)
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import torch

from lc_attention.dssa import CompressedKeyCache, DSSAConfig, dssa_attention

ATTN_NAME = "lc_dssa"
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma3", "gemma3_text")
_PREVIOUS = "_lc_dssa_previous_attn"


def dssa_hf_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention function in transformers' ``AttentionInterface`` convention.

    Dense mode (keys below ``dense_len``, sliding-window layers, the first
    ``dense_layers`` decoder layers, modules without a DSSA config) calls transformers' own SDPA function unchanged, so it reproduces the
    ``"sdpa"`` implementation bit for bit.

    Args:
        module: the attention module (holds ``lc_dssa_config`` and ``lc_dssa_cache``).
        query: ``[B, HQ, T, D]``.
        key: ``[B, H_kv, S, D]`` (the whole cache when decoding).
        value: ``[B, H_kv, S, D]``.
        attention_mask: ``[B, 1, T, S]`` bool mask or None (plain causal).
        scaling: softmax scale.
        dropout: attention dropout; sparse mode supports only 0.
        **kwargs: passed to SDPA in dense mode.

    Returns:
        ``([B, T, HQ, D], None)``.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    config: DSSAConfig | None = getattr(module, "lc_dssa_config", None)
    sliding = getattr(module, "sliding_window", None)
    layer = getattr(module, "layer_idx", None)
    if (
        config is None
        or sliding
        or key.shape[2] < config.dense_len
        or not config.sparse_in_layer(layer)
    ):
        return sdpa_attention_forward(  # type: ignore[no-any-return]
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if dropout and module.training:
        raise ValueError("DSSA sparse mode does not support attention dropout")
    cache = getattr(module, "lc_dssa_cache", None)
    out = dssa_attention(
        query.transpose(1, 2),
        key.transpose(1, 2),
        value.transpose(1, 2),
        config,
        scale=scaling,
        attention_mask=attention_mask,
        cache=cache,
        layer_idx=layer,
    )
    return out.contiguous(), None


def register() -> None:
    """Register ``"lc_dssa"`` in transformers' attention and mask interfaces (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTN_NAME, dssa_hf_attention)
    AttentionMaskInterface.register(ATTN_NAME, sdpa_mask)


def _attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    mods = [
        m
        for m in model.modules()
        if type(m).__name__.endswith("Attention") and hasattr(m, "num_key_value_groups")
    ]
    if not mods:
        raise ValueError(f"no attention modules found in {type(model).__name__}")
    return mods


class DSSAHandle:
    """Returned by [enable_dssa][lc_attention.hf.enable_dssa]; a context manager that
    restores the previous attention implementation on exit."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model

    def __enter__(self) -> torch.nn.Module:
        return self.model

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        disable_dssa(self.model)

    @property
    def caches(self) -> list[CompressedKeyCache]:
        """The per-layer compressed-key caches (for inspection)."""
        return [m.lc_dssa_cache for m in _attention_modules(self.model)]  # type: ignore[misc]


def enable_dssa(model: torch.nn.Module, config: DSSAConfig | None = None) -> DSSAHandle:
    """Make a loaded transformers model run DSSA in its attention layers.

    Args:
        model: a ``PreTrainedModel`` of a supported family (Llama, Mistral, Qwen2/3,
            Gemma-3; sliding-window layers of Gemma-3 stay dense).
        config: DSSA hyper-parameters, default ``DSSAConfig()`` (MiniCPM4's).

    Returns:
        A [DSSAHandle][lc_attention.hf.DSSAHandle]; use it in a ``with`` block or call
        [disable_dssa][lc_attention.hf.disable_dssa] to restore the model.

    Raises:
        ValueError: unsupported model family, or DSSA already enabled.
        TypeError: ``config`` is not a ``DSSAConfig``.
    """
    cfg = DSSAConfig() if config is None else config
    if not isinstance(cfg, DSSAConfig):
        raise TypeError(f"config must be a DSSAConfig, got {type(cfg).__name__}")
    mcfg = getattr(model, "config", None)
    mtype = getattr(mcfg, "model_type", None)
    if mtype not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"DSSA supports model types {SUPPORTED_MODEL_TYPES}, got {mtype!r} "
            f"({type(model).__name__})"
        )
    if hasattr(model, _PREVIOUS):
        raise ValueError("DSSA is already enabled on this model; call disable_dssa first")
    mods = _attention_modules(model)
    register()
    previous = mcfg._attn_implementation  # type: ignore[union-attr]
    for m in mods:
        m.lc_dssa_config = cfg  # type: ignore[assignment]
        m.lc_dssa_cache = CompressedKeyCache()  # type: ignore[assignment]
    setattr(model, _PREVIOUS, previous)
    model.set_attn_implementation(ATTN_NAME)  # type: ignore[operator]
    return DSSAHandle(model)


def disable_dssa(model: torch.nn.Module) -> None:
    """Restore the attention implementation that was active before ``enable_dssa``.

    Raises:
        ValueError: DSSA is not enabled on ``model``.
    """
    if not hasattr(model, _PREVIOUS):
        raise ValueError("DSSA is not enabled on this model")
    previous = getattr(model, _PREVIOUS)
    model.set_attn_implementation(previous)  # type: ignore[operator]
    for m in _attention_modules(model):
        for name in ("lc_dssa_config", "lc_dssa_cache"):
            if hasattr(m, name):
                delattr(m, name)
    delattr(model, _PREVIOUS)


def is_dssa_enabled(model: torch.nn.Module) -> bool:
    """Whether [enable_dssa][lc_attention.hf.enable_dssa] is active on ``model``."""
    return hasattr(model, _PREVIOUS)
