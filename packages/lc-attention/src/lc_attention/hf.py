"""Hugging Face integration: switch a loaded transformers model to DSSA and back.

DSSA is parameter-free, so a pretrained model runs it with its own projections. The
switch follows the pattern of [lc_attention.integration][] (shared with LycheeDecode):
the attention function is registered in transformers' ``AttentionInterface`` under
``"lc_dssa"`` (with the SDPA boolean mask); each attention module of the model carries
its [DSSAConfig][lc_attention.dssa.DSSAConfig] and a
[CompressedKeyCache][lc_attention.dssa.CompressedKeyCache], so ``generate()`` decodes
with incremental compressed keys and per-step block selection. What is DSSA's own here:
when a layer goes sparse, the default config for a model's context, and the caches.

Example:
    >>> from lc_attention.dssa import DSSAConfig
    >>> from lc_attention.hf import enable_dssa
    >>> with enable_dssa(model, DSSAConfig.small()):  # doctest: +SKIP
    ...     out = model.generate(ids, max_new_tokens=16)
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from lc_attention import integration
from lc_attention.dssa import CompressedKeyCache, DSSAConfig, dssa_attention
from lc_attention.integration import (
    SUPPORTED_MODEL_TYPES,
    AttentionHandle,
    AttentionMethod,
    attention_modules,
    check_can_enable,
    install,
    is_enabled,
    key_padding,
    sdpa_attention,
    uninstall,
)

__all__ = [
    "ATTN_NAME",
    "METHOD",
    "SUPPORTED_MODEL_TYPES",
    "DSSAHandle",
    "default_dssa_config",
    "disable_dssa",
    "dssa_hf_attention",
    "enable_dssa",
    "is_dssa_enabled",
    "key_padding",
    "register",
]

ATTN_NAME = "lc_dssa"


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
    config: DSSAConfig | None = getattr(module, "lc_dssa_config", None)
    sliding = getattr(module, "sliding_window", None)
    layer = getattr(module, "layer_idx", None)
    if (
        config is None
        or sliding
        or key.shape[2] < config.dense_len
        or not config.sparse_in_layer(layer)
    ):
        return sdpa_attention(
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
        cache=cache,
        layer_idx=layer,
        kv_valid=key_padding(attention_mask, key.shape[0], key.shape[2]),
    )
    return out.contiguous(), None


METHOD = AttentionMethod(
    name="DSSA",
    attn_name=ATTN_NAME,
    function=dssa_hf_attention,
    module_attrs=("lc_dssa_config", "lc_dssa_cache"),
    disable="disable_dssa",
)


def register() -> None:
    """Register ``"lc_dssa"`` in transformers' attention and mask interfaces (idempotent)."""
    integration.register(METHOD)


def _context_length(model: torch.nn.Module) -> int | None:
    """The model's ``config.max_position_embeddings`` (None when it has none)."""
    n = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def default_dssa_config(max_position_embeddings: int | None) -> DSSAConfig:
    """The DSSA config [enable_dssa][lc_attention.hf.enable_dssa] uses when given none.

    The rule: the first of these presets whose ``dense_len`` lies below the model's
    context, so attention actually goes sparse within it.

    - context above 8192 tokens (or unknown): ``DSSAConfig()``, MiniCPM4's defaults
      (dense below 8192 keys, then 64 blocks of 64 per query);
    - context of 1025 to 8192 tokens (e.g. SmolLM2's 8K):
      [DSSAConfig.training_free()][lc_attention.dssa.DSSAConfig.training_free] (dense
      below 1024 keys, then 16 blocks of 64, scored through 4-token spans), the preset
      for a pretrained model that never saw sparse attention;
    - 1024 tokens or fewer: no preset has anything to skip (16 blocks of 64 already
      cover the context), so this raises; pass a config to ``enable_dssa`` instead.

    Args:
        max_position_embeddings: the model's context length (``None``: unknown).

    Returns:
        The preset.

    Raises:
        ValueError: a context of 1024 tokens or fewer.

    Example:
        >>> default_dssa_config(8192).dense_len, default_dssa_config(32768).dense_len
        (1024, 8192)
    """
    n = max_position_embeddings
    if n is None or n > DSSAConfig().dense_len:
        return DSSAConfig()
    cfg = DSSAConfig.training_free()
    if n > cfg.dense_len:
        return cfg
    raise ValueError(
        f"no DSSA preset goes sparse within max_position_embeddings={n} (the smallest, "
        f"DSSAConfig.training_free(), is dense below {cfg.dense_len} keys and attends to "
        f"{cfg.topk * cfg.block_size} tokens per query); pass a DSSAConfig with "
        f"dense_len < {n} and topk * block_size < {n} to enable_dssa"
    )


class DSSAHandle(AttentionHandle):
    """Returned by [enable_dssa][lc_attention.hf.enable_dssa]; a context manager that
    restores the previous attention implementation on exit. ``config`` is the DSSA
    config the model runs with (the derived one when ``enable_dssa`` got none)."""

    def __init__(self, model: torch.nn.Module, config: DSSAConfig | None = None) -> None:
        super().__init__(model, METHOD, config)

    @property
    def caches(self) -> list[CompressedKeyCache]:
        """The per-layer compressed-key caches (for inspection)."""
        return [m.lc_dssa_cache for m in attention_modules(self.model)]  # type: ignore[misc]


def enable_dssa(model: torch.nn.Module, config: DSSAConfig | None = None) -> DSSAHandle:
    """Make a loaded transformers model run DSSA in its attention layers.

    Attention stays dense while the keys are fewer than ``config.dense_len``, so a
    config whose ``dense_len`` is not below the model's context
    (``config.max_position_embeddings``) never goes sparse on inputs the model was made
    for. Without a config the call derives one that does (the rule of
    [default_dssa_config][lc_attention.hf.default_dssa_config]: MiniCPM4's defaults above
    an 8K context, ``DSSAConfig.training_free()`` for contexts of 1025 to 8192 tokens;
    a context of 1024 or fewer raises). A given config that never goes sparse within the
    context is kept (dense DSSA reproduces the model exactly, a useful baseline) with a
    ``UserWarning``.

    Args:
        model: a ``PreTrainedModel`` of a supported family (Llama, Mistral, Qwen2/3,
            Gemma-3; sliding-window layers of Gemma-3 stay dense).
        config: DSSA hyper-parameters; ``None`` derives them from the model's context.

    Returns:
        A [DSSAHandle][lc_attention.hf.DSSAHandle] (its ``config`` is the one in use);
        use it in a ``with`` block or call [disable_dssa][lc_attention.hf.disable_dssa]
        to restore the model.

    Raises:
        ValueError: unsupported model family, DSSA (or another method of
            [lc_attention.integration][]) already enabled, or no config given for a model
            whose context is 1024 tokens or fewer.
        TypeError: ``config`` is not a ``DSSAConfig``.

    Warns:
        UserWarning: ``config.dense_len >= max_position_embeddings`` (never sparse).
    """
    if config is not None and not isinstance(config, DSSAConfig):
        raise TypeError(f"config must be a DSSAConfig, got {type(config).__name__}")
    check_can_enable(model, METHOD)  # family, another method enabled
    context = _context_length(model)
    if config is None:
        cfg = default_dssa_config(context)
    else:
        cfg = config
        if context is not None and cfg.dense_len >= context:
            warnings.warn(
                f"DSSA never goes sparse on this model: config.dense_len={cfg.dense_len} is "
                f"not below its max_position_embeddings={context}, so every input the model "
                "takes runs dense attention; lower dense_len (or call enable_dssa(model) "
                "without a config) to run sparse",
                UserWarning,
                stacklevel=2,
            )
    install(model, METHOD, lambda m: {"lc_dssa_config": cfg, "lc_dssa_cache": CompressedKeyCache()})
    return DSSAHandle(model, cfg)


def disable_dssa(model: torch.nn.Module) -> None:
    """Restore the attention implementation that was active before ``enable_dssa``.

    Raises:
        ValueError: DSSA is not enabled on ``model``.
    """
    uninstall(model, METHOD)


def is_dssa_enabled(model: torch.nn.Module) -> bool:
    """Whether [enable_dssa][lc_attention.hf.enable_dssa] is active on ``model``."""
    return is_enabled(model, METHOD)
