"""Hugging Face integration: decode a loaded transformers model with LycheeDecode.

Built on [lc_attention.integration][], the switch shared with DSSA: an attention
function registered in transformers' ``AttentionInterface`` (here ``"lc_lychee"``, with
the SDPA boolean mask) and per-module attributes, so ``model.generate()`` and the
model's ``DynamicCache`` work unchanged. What is LycheeDecode's own here: the role map,
the layer plans and the positions handed from layer to layer. Prefill (more than one query token) and
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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from lc_attention import integration
from lc_attention.integration import (
    DENSE_IMPLEMENTATIONS,
    AttentionHandle,
    AttentionMethod,
    attention_modules,
    check_can_enable,
    dense_function,
    install,
    is_enabled,
    key_padding,
    run_dense,
    sdpa_attention,
    uninstall,
)
from lc_attention.lychee import _kernels
from lc_attention.lychee.attention import HeadPlan, head_plan, padding_bias, run_plan
from lc_attention.lychee.config import LycheeConfig, route
from lc_attention.lychee.roles import RoleMap, model_fingerprint
from lc_kernels.backend import Backend

ATTN_NAME = "lc_lychee"
_ATTR = "lc_lychee"


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
        return sdpa_attention(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if query.shape[2] != 1 or key.shape[2] < plan.config.topk or plan.shared.dense:
        return run_dense(  # type: ignore[no-any-return]
            plan.dense,
            plan.dense_name,
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
            valid = key_padding(attention_mask, b, t)
            shared.mask, shared.bias = attention_mask, padding_bias(valid, query.device)
        bias = shared.bias
    topk = plan.config.topk
    if plan.first:
        shape = (b, hq, topk)
        buf = shared.indices
        if buf is None or buf.shape != shape or buf.device != query.device:
            shared.indices = torch.zeros(shape, dtype=torch.long, device=query.device)
        shared.steps += 1
    kernels = route(
        plan.config.backend, query.is_cuda and _kernels.kernels_available(), bias is not None
    )
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
        kernels,
    )
    return out.unsqueeze(1), None


METHOD = AttentionMethod(
    name="LycheeDecode",
    attn_name=ATTN_NAME,
    function=lychee_hf_attention,
    module_attrs=(_ATTR,),
    disable="disable_lychee",
    wraps=DENSE_IMPLEMENTATIONS,
)


def register() -> None:
    """Register ``"lc_lychee"`` in transformers' attention and mask interfaces (idempotent)."""
    integration.register(METHOD)


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


class LycheeHandle(AttentionHandle):
    """Returned by [enable_lychee][lc_attention.lychee.hf.enable_lychee]; a context
    manager that restores the model on exit."""

    def __init__(
        self, model: torch.nn.Module, role_map: RoleMap, config: LycheeConfig, shared: _Shared
    ):
        super().__init__(model, METHOD, config)
        self.role_map = role_map
        self._shared = shared

    @property
    def hybrid_steps(self) -> int:
        """Decode steps that ran hybrid attention so far (dense steps not counted)."""
        return self._shared.steps


def enable_lychee(
    model: torch.nn.Module,
    role_map: RoleMap,
    *,
    topk: int | None = None,
    block_size: int | None = None,
    backend: Backend | str | None = None,
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
        backend: ``"auto" | "torch" | "triton"`` (overrides config; see
            [LycheeConfig][lc_attention.lychee.config.LycheeConfig]).
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
    previous = check_can_enable(model, METHOD)  # family, another method, sdpa/eager
    role_map.check_model(model, strict_name=strict_name)
    mods = sorted(attention_modules(model), key=lambda m: int(m.layer_idx))  # type: ignore[arg-type]
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
    num_kv = int(model_fingerprint(model)["num_kv_heads"])
    plans: dict[int, _LayerPlan] = {}
    for layer, m in enumerate(mods):
        if not hybrid[layer]:
            continue
        dev = next(m.parameters()).device
        plans[id(m)] = _LayerPlan(
            config=cfg,
            retrieval=torch.tensor(roles[layer], dtype=torch.bool, device=dev),
            publish=torch.tensor(publish[layer], dtype=torch.bool, device=dev),
            heads=head_plan(roles[layer], publish[layer], role_map.num_heads, num_kv, dev),
            first=layer == first,
            dense=dense_function(m, previous),
            dense_name=previous,
            shared=shared,
        )
    install(model, METHOD, lambda m: {_ATTR: plans[id(m)]} if id(m) in plans else None)
    return LycheeHandle(model, role_map, cfg, shared)


def disable_lychee(model: torch.nn.Module) -> None:
    """Restore the attention implementation active before ``enable_lychee``.

    Raises:
        ValueError: LycheeDecode is not enabled on ``model``.
    """
    uninstall(model, METHOD)


def is_lychee_enabled(model: torch.nn.Module) -> bool:
    """Whether [enable_lychee][lc_attention.lychee.hf.enable_lychee] is active on ``model``."""
    return is_enabled(model, METHOD)
