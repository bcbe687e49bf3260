"""Hugging Face integration: decode a loaded transformers model with LycheeDecode.

Uses the same mechanism as the DSSA switch in [lc_attention.hf][]: an attention
function registered in transformers' ``AttentionInterface`` (here ``"lc_lychee"``, with
the SDPA boolean mask) and per-module attributes, so ``model.generate()`` and the
model's ``DynamicCache`` work unchanged. Prefill (more than one query token) and
contexts shorter than ``topk`` run the model's previous attention implementation
(``"sdpa"`` or ``"eager"``) unchanged; decode steps run
[hybrid_decode_attention][lc_attention.lychee.attention.hybrid_decode_attention] layer
after layer, handing each layer's published positions to the next through a state
object shared by the model's attention modules. Sliding-window layers (Gemma-3) stay
dense and neither read nor publish positions.

Example:
    >>> from lc_attention.lychee import RoleMap, enable_lychee
    >>> roles = RoleMap.load("smollm2_roles.json")  # doctest: +SKIP
    >>> with enable_lychee(model, roles, topk=256):  # doctest: +SKIP
    ...     out = model.generate(ids, max_new_tokens=32)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import torch

from lc_attention.hf import SUPPORTED_MODEL_TYPES, _attention_modules, is_dssa_enabled
from lc_attention.lychee import _kernels
from lc_attention.lychee.attention import HeadPlan, head_plan, padding_bias, run_plan
from lc_attention.lychee.config import LycheeConfig
from lc_attention.lychee.roles import RoleMap, model_fingerprint

ATTN_NAME = "lc_lychee"
_PREVIOUS = "_lc_lychee_previous_attn"
_ATTR = "lc_lychee"
DENSE_IMPLEMENTATIONS = ("sdpa", "eager")


@dataclass
class _Shared:
    """Decode-step state shared by all attention modules of one model."""

    indices: torch.Tensor | None = None
    """``[B, HQ, topk]`` positions, rewritten in place layer after layer (each layer reads
    only the rows of its sparse heads and writes only those of its retrieval heads)."""
    steps: int = 0
    """Decode steps that ran hybrid attention (counted at the first hybrid layer)."""
    dense: bool = False
    """Run every step densely (set during a cache-correction pass)."""
    mask: torch.Tensor | None = None
    """The attention mask the padding bias below was built from (one per forward pass,
    shared by its layers)."""
    bias: torch.Tensor | None = None
    """``[B, T]`` additive padding bias of ``mask`` (None: no padding)."""


@dataclass
class _LayerPlan:
    config: LycheeConfig
    retrieval: torch.Tensor  # [HQ] bool
    publish: torch.Tensor  # [HQ] bool, retrieval heads whose positions a later layer reads
    heads: HeadPlan  # the two masks grouped by KV head, computed once
    first: bool  # first hybrid layer: resets the shared positions
    dense: Callable[..., Any]
    dense_name: str
    shared: _Shared = field(repr=False)


def _dense_function(module: torch.nn.Module, name: str) -> Callable[..., Any]:
    if name == "eager":
        fn = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
        if fn is None:
            raise ValueError(f"{type(module).__name__} has no eager_attention_forward")
        return fn  # type: ignore[no-any-return]
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward


def _run_dense(plan: _LayerPlan, module, query, key, value, attention_mask, **kwargs):
    q_len, k_len = query.shape[2], key.shape[2]
    if plan.dense_name == "eager" and attention_mask is None and q_len > 1:
        # SDPA's mask function returns None for plain causal attention (SDPA then uses
        # is_causal); eager has no such flag and needs the causal mask spelled out
        rows = torch.arange(k_len - q_len, k_len, device=query.device).view(q_len, 1)
        cols = torch.arange(k_len, device=query.device).view(1, k_len)
        attention_mask = (cols <= rows)[None, None]
    if (
        plan.dense_name == "eager"
        and attention_mask is not None
        and attention_mask.dtype == torch.bool
    ):
        # the registered mask is SDPA's boolean one; eager wants an additive float mask
        attention_mask = torch.zeros(
            attention_mask.shape, dtype=query.dtype, device=query.device
        ).masked_fill(~attention_mask, torch.finfo(query.dtype).min)
    return plan.dense(module, query, key, value, attention_mask, **kwargs)


def lychee_hf_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention function in transformers' ``AttentionInterface`` convention.

    Args:
        module: the attention module (holds its ``lc_lychee`` layer plan).
        query: ``[B, HQ, Q, D]``.
        key: ``[B, HKV, T, D]`` (the whole cache when decoding).
        value: ``[B, HKV, T, D]``.
        attention_mask: ``[B, 1, Q, T]`` bool mask (True = attend) or None.
        scaling: softmax scale.
        dropout: attention dropout (dense path only).
        **kwargs: passed to the dense implementation.

    Returns:
        ``([B, Q, HQ, D], None)`` in the dense implementation's convention.
    """
    plan: _LayerPlan | None = getattr(module, _ATTR, None)
    if plan is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(  # type: ignore[no-any-return]
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if query.shape[2] != 1 or key.shape[2] < plan.config.topk or plan.shared.dense:
        return _run_dense(  # type: ignore[no-any-return]
            plan,
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            **kwargs,
        )
    shared = plan.shared
    b, hq, _, d = query.shape
    t = key.shape[2]
    bias = None
    if attention_mask is not None:
        if attention_mask is not shared.mask:  # built once per forward pass
            if attention_mask.dtype != torch.bool:
                raise ValueError(f"expected a boolean attention mask, got {attention_mask.dtype}")
            valid = attention_mask[:, 0, -1, :].expand(b, t)
            shared.mask, shared.bias = attention_mask, padding_bias(valid, query.device)
        bias = shared.bias
    topk = plan.config.topk
    if plan.first:
        shape = (b, hq, topk)
        buf = shared.indices
        if buf is None or buf.shape != shape or buf.device != query.device:
            shared.indices = torch.zeros(shape, dtype=torch.long, device=query.device)
        shared.steps += 1
    backend = plan.config.backend
    if backend == "auto":
        cuda = query.is_cuda and bias is None and _kernels.kernels_available()
        backend = "kernels" if cuda else "gather"
    elif backend == "kernels" and bias is not None:
        raise ValueError("valid (padding) masks are supported by the gather backend only")
    out = run_plan(
        plan.heads,
        query[:, :, 0],
        key.transpose(1, 2),
        value.transpose(1, 2),
        shared.indices,
        shared.indices if plan.heads.publishes else None,
        topk,
        d**-0.5 if scaling is None else float(scaling),
        bias,
        plan.config.block_size,
        backend,
    )
    return out.unsqueeze(1), None


def register() -> None:
    """Register ``"lc_lychee"`` in transformers' attention and mask interfaces (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(ATTN_NAME, lychee_hf_attention)
    AttentionMaskInterface.register(ATTN_NAME, sdpa_mask)


def _is_sliding(module: torch.nn.Module) -> bool:
    return bool(getattr(module, "sliding_window", None))


def _publish_plan(retrieval: list[list[bool]], hybrid: list[bool]) -> list[list[bool]]:
    """``publish[l][h]``: retrieval head (l, h) whose positions a later sparse head reads."""
    num_layers, num_heads = len(retrieval), len(retrieval[0])
    publish = [[False] * num_heads for _ in range(num_layers)]
    for h in range(num_heads):
        read = False  # does a later hybrid layer's sparse head at h read before a refresh?
        for layer in reversed(range(num_layers)):
            if not hybrid[layer]:
                continue
            if retrieval[layer][h]:
                publish[layer][h] = read
                read = False
            else:
                read = True
    return publish


class LycheeHandle:
    """Returned by [enable_lychee][lc_attention.lychee.hf.enable_lychee]; a context
    manager that restores the model on exit."""

    def __init__(
        self, model: torch.nn.Module, role_map: RoleMap, config: LycheeConfig, shared: _Shared
    ):
        self.model = model
        self.role_map = role_map
        self.config = config
        self._shared = shared

    @property
    def hybrid_steps(self) -> int:
        """Decode steps that ran hybrid attention so far (dense steps not counted)."""
        return self._shared.steps

    def __enter__(self) -> torch.nn.Module:
        return self.model

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        disable_lychee(self.model)


def enable_lychee(
    model: torch.nn.Module,
    role_map: RoleMap,
    *,
    topk: int | None = None,
    block_size: int | None = None,
    backend: str | None = None,
    config: LycheeConfig | None = None,
    strict_name: bool = True,
) -> LycheeHandle:
    """Make a loaded transformers model decode with hybrid-head sparse attention.

    Args:
        model: a ``PreTrainedModel`` of a supported family (Llama, Mistral, Qwen2/3,
            Gemma-3) whose attention implementation is ``"sdpa"`` or ``"eager"``.
        role_map: per-head roles learned for this model (checked against its fingerprint).
        topk: token positions per head (overrides ``config.topk``).
        block_size: block length of the kernels' block-wise top-k (overrides config).
        backend: ``"auto" | "kernels" | "gather"`` (overrides config).
        config: base [LycheeConfig][lc_attention.lychee.config.LycheeConfig].
        strict_name: also require the role map's model name to match.

    Returns:
        A [LycheeHandle][lc_attention.lychee.hf.LycheeHandle]; use it in a ``with`` block
        or call [disable_lychee][lc_attention.lychee.hf.disable_lychee] to restore.

    Raises:
        TypeError: ``role_map`` is not a RoleMap.
        ValueError: unsupported model family or attention implementation, LycheeDecode
            or DSSA already enabled, a role map for another model, or a first hybrid
            layer with sparse heads.
    """
    if not isinstance(role_map, RoleMap):
        raise TypeError(f"role_map must be a RoleMap, got {type(role_map).__name__}")
    base = config or LycheeConfig()
    overrides = {
        k: v
        for k, v in (("topk", topk), ("block_size", block_size), ("backend", backend))
        if v is not None
    }
    cfg = LycheeConfig(**{**base.__dict__, **overrides})
    mcfg = getattr(model, "config", None)
    mtype = getattr(mcfg, "model_type", None)
    if mtype not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"LycheeDecode supports model types {SUPPORTED_MODEL_TYPES}, got {mtype!r}"
        )
    if hasattr(model, _PREVIOUS):
        raise ValueError("LycheeDecode is already enabled on this model; call disable_lychee first")
    if is_dssa_enabled(model):
        raise ValueError("DSSA is enabled on this model; disable it before enabling LycheeDecode")
    previous = mcfg._attn_implementation  # type: ignore[union-attr]
    if previous not in DENSE_IMPLEMENTATIONS:
        raise ValueError(
            f"LycheeDecode wraps the {DENSE_IMPLEMENTATIONS} implementations, the model uses "
            f"{previous!r}; load it with attn_implementation='sdpa'"
        )
    role_map.check_model(model, strict_name=strict_name)
    mods = sorted(_attention_modules(model), key=lambda m: int(m.layer_idx))  # type: ignore[arg-type]
    if [int(m.layer_idx) for m in mods] != list(range(role_map.num_layers)):  # type: ignore[arg-type]
        raise ValueError(f"expected attention modules for layers 0..{role_map.num_layers - 1}")
    hybrid = [not _is_sliding(m) for m in mods]
    if not any(hybrid):
        raise ValueError("the model has no full-attention layer to run LycheeDecode in")
    first = hybrid.index(True)
    if not all(role_map.layer(first)):
        raise ValueError(
            f"layer {first} is the first hybrid layer, so all its heads must be retrieval "
            f"heads, got {role_map.layer(first)}"
        )
    roles = [list(r) for r in role_map.retrieval]
    publish = _publish_plan(roles, hybrid)
    shared = _Shared()
    register()
    num_kv = int(model_fingerprint(model)["num_kv_heads"])
    for layer, m in enumerate(mods):
        if not hybrid[layer]:
            continue
        dev = next(m.parameters()).device
        setattr(
            m,
            _ATTR,
            _LayerPlan(
                config=cfg,
                retrieval=torch.tensor(roles[layer], dtype=torch.bool, device=dev),
                publish=torch.tensor(publish[layer], dtype=torch.bool, device=dev),
                heads=head_plan(roles[layer], publish[layer], role_map.num_heads, num_kv, dev),
                first=layer == first,
                dense=_dense_function(m, previous),
                dense_name=previous,
                shared=shared,
            ),
        )
    setattr(model, _PREVIOUS, previous)
    model.set_attn_implementation(ATTN_NAME)  # type: ignore[operator]
    return LycheeHandle(model, role_map, cfg, shared)


def disable_lychee(model: torch.nn.Module) -> None:
    """Restore the attention implementation active before ``enable_lychee``.

    Raises:
        ValueError: LycheeDecode is not enabled on ``model``.
    """
    if not hasattr(model, _PREVIOUS):
        raise ValueError("LycheeDecode is not enabled on this model")
    model.set_attn_implementation(getattr(model, _PREVIOUS))  # type: ignore[operator]
    for m in _attention_modules(model):
        if hasattr(m, _ATTR):
            delattr(m, _ATTR)
    delattr(model, _PREVIOUS)


def is_lychee_enabled(model: torch.nn.Module) -> bool:
    """Whether [enable_lychee][lc_attention.lychee.hf.enable_lychee] is active on ``model``."""
    return hasattr(model, _PREVIOUS)
