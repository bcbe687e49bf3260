"""The one way an attention method of this package switches a loaded transformers model.

A method that runs on a pretrained model's own projections (DSSA, LycheeDecode) provides
an attention function in transformers' ``AttentionInterface`` convention and an
``enable_<method>(model, config)`` built on this module. The module holds what every
such switch needs, written once:

- [AttentionMethod][lc_attention.integration.AttentionMethod]: the method's name, its key
  in ``AttentionInterface`` (registered with transformers' SDPA boolean mask in
  ``AttentionMaskInterface``) and the attributes it sets on each attention module;
- [install][lc_attention.integration.install] /
  [uninstall][lc_attention.integration.uninstall]: checks (supported model family, no
  other method already enabled, the attention implementation it can wrap), the
  per-module state, the switch of ``config._attn_implementation`` and its restore;
- [AttentionHandle][lc_attention.integration.AttentionHandle]: what ``enable_<method>``
  returns, a context manager that restores the model on exit;
- mask and dense helpers: [key_padding][lc_attention.integration.key_padding] (the
  ``[B, S]`` real-key mask from transformers' mask),
  [dense_function][lc_attention.integration.dense_function] and
  [run_dense][lc_attention.integration.run_dense] (the model's previous ``"sdpa"`` or
  ``"eager"`` attention, with the mask it expects).

Grouped-query attention needs nothing here: transformers hands the attention function
``query [B, HQ, T, D]`` and the cache's ``key, value [B, H_kv, S, D]`` unexpanded, and the
methods' kernels take ``[B, T, H, D]`` tensors with ``HQ`` a multiple of ``H_kv``. The
KV cache stays transformers' own (``generate()`` works unchanged); a method keeps any
extra per-layer state (DSSA's compressed keys) in a module attribute it declares.

Example:
    >>> import torch
    >>> from lc_attention.integration import AttentionMethod, sdpa_attention
    >>> def my_attention(module, query, key, value, attention_mask, **kwargs):
    ...     return sdpa_attention(module, query, key, value, attention_mask, **kwargs)
    >>> METHOD = AttentionMethod("Mine", "lc_mine", my_attention, ("lc_mine_config",))
    >>> METHOD.attn_name
    'lc_mine'
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch

#: model families whose attention modules follow the Llama layout (``q_proj``,
#: ``num_key_value_groups``, ``layer_idx``; Gemma-3 adds sliding-window layers)
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma3", "gemma3_text")
#: attention implementations a method can fall back to for its dense steps
DENSE_IMPLEMENTATIONS = ("sdpa", "eager")
_ENABLED = "_lc_attention_enabled"


@dataclass(frozen=True)
class AttentionMethod:
    """An attention method that can switch a loaded transformers model.

    Args:
        name: the method's name in messages (``"DSSA"``).
        attn_name: its key in transformers' ``AttentionInterface`` (``"lc_dssa"``).
        function: the attention function, ``(module, query [B, HQ, T, D], key [B, H_kv, S,
            D], value, attention_mask [B, 1, T, S] bool or None, scaling=..., dropout=...,
            **kwargs) -> (out [B, T, HQ, D], weights or None)``.
        module_attrs: attributes the method sets on attention modules (removed on restore).
        disable: the name of the method's disable function (for messages).
        wraps: attention implementations the model must use when the method is enabled
            (``None``: any); a method that falls back to the previous implementation
            for dense steps sets ``DENSE_IMPLEMENTATIONS``.
    """

    name: str
    attn_name: str
    function: Callable[..., tuple[torch.Tensor, torch.Tensor | None]]
    module_attrs: tuple[str, ...]
    disable: str = "disable"
    wraps: tuple[str, ...] | None = None


@dataclass(frozen=True)
class _Enabled:
    method: AttentionMethod
    previous: str


def attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The attention modules of a transformers model, in module order.

    Raises:
        ValueError: the model has none (no ``*Attention`` module with
            ``num_key_value_groups``).
    """
    mods = [
        m
        for m in model.modules()
        if type(m).__name__.endswith("Attention") and hasattr(m, "num_key_value_groups")
    ]
    if not mods:
        raise ValueError(f"no attention modules found in {type(model).__name__}")
    return mods


def register(method: AttentionMethod) -> None:
    """Register ``method.attn_name`` in transformers' attention and mask interfaces, with
    the SDPA boolean mask (idempotent)."""
    register_function(method.attn_name, method.function)


def register_function(attn_name: str, function: Callable[..., Any]) -> None:
    """Register an attention function under ``attn_name`` with the SDPA boolean mask."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(attn_name, function)
    AttentionMaskInterface.register(attn_name, sdpa_mask)


def enabled_method(model: torch.nn.Module) -> AttentionMethod | None:
    """The method enabled on ``model`` by [install][lc_attention.integration.install], or None."""
    state: _Enabled | None = getattr(model, _ENABLED, None)
    return None if state is None else state.method


def is_enabled(model: torch.nn.Module, method: AttentionMethod) -> bool:
    """Whether ``method`` is the one enabled on ``model``."""
    return enabled_method(model) == method


def check_can_enable(model: torch.nn.Module, method: AttentionMethod) -> str:
    """The checks of [install][lc_attention.integration.install], run before a method
    builds its per-module state. Returns the model's current attention implementation.

    Raises:
        ValueError: unsupported model family, a method already enabled on the model, or
            an attention implementation the method cannot wrap.
    """
    mcfg = getattr(model, "config", None)
    mtype = getattr(mcfg, "model_type", None)
    if mtype not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"{method.name} supports model types {SUPPORTED_MODEL_TYPES}, got {mtype!r} "
            f"({type(model).__name__})"
        )
    other = enabled_method(model)
    if other == method:
        raise ValueError(
            f"{method.name} is already enabled on this model; call {method.disable} first"
        )
    if other is not None:
        raise ValueError(
            f"{other.name} is enabled on this model; disable it before enabling {method.name}"
        )
    previous: str = mcfg._attn_implementation  # type: ignore[union-attr]
    if method.wraps is not None and previous not in method.wraps:
        raise ValueError(
            f"{method.name} wraps the {method.wraps} implementations, the model uses "
            f"{previous!r}; load it with attn_implementation='sdpa'"
        )
    return previous


def install(
    model: torch.nn.Module,
    method: AttentionMethod,
    module_state: Callable[[torch.nn.Module], dict[str, Any] | None],
) -> str:
    """Enable ``method`` on ``model``: check, set each module's state, switch the attention.

    Args:
        model: a loaded ``PreTrainedModel`` of a supported family.
        method: the method.
        module_state: for each attention module, the attributes to set on it (keys among
            ``method.module_attrs``), or None to leave the module untouched.

    Returns:
        The attention implementation that was active (restored by ``uninstall``).

    Raises:
        ValueError: as [check_can_enable][lc_attention.integration.check_can_enable], or
            a ``module_state`` attribute the method does not declare.
    """
    previous = check_can_enable(model, method)
    mods = attention_modules(model)
    states = [module_state(m) for m in mods]
    for state in states:
        unknown = set(state or ()) - set(method.module_attrs)
        if unknown:
            raise ValueError(
                f"{method.name} sets undeclared module attributes {sorted(unknown)}; "
                f"declare them in AttentionMethod.module_attrs"
            )
    register(method)
    for m, state in zip(mods, states, strict=True):
        for name, value in (state or {}).items():
            setattr(m, name, value)
    setattr(model, _ENABLED, _Enabled(method, previous))
    model.set_attn_implementation(method.attn_name)  # type: ignore[operator]
    return previous


def uninstall(model: torch.nn.Module, method: AttentionMethod) -> None:
    """Restore the attention implementation active before ``install`` and remove the
    method's module attributes.

    Raises:
        ValueError: ``method`` is not enabled on ``model``.
    """
    state: _Enabled | None = getattr(model, _ENABLED, None)
    if state is None or state.method != method:
        raise ValueError(f"{method.name} is not enabled on this model")
    model.set_attn_implementation(state.previous)  # type: ignore[operator]
    for m in attention_modules(model):
        for name in method.module_attrs:
            if hasattr(m, name):
                delattr(m, name)
    delattr(model, _ENABLED)


class AttentionHandle:
    """What ``enable_<method>`` returns: a context manager that restores the model on exit.

    ``model`` is the switched model (also returned by ``__enter__``), ``config`` the
    method's config in use.
    """

    def __init__(self, model: torch.nn.Module, method: AttentionMethod, config: Any) -> None:
        self.model = model
        self.method = method
        self.config = config

    def __enter__(self) -> torch.nn.Module:
        return self.model

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        uninstall(self.model, self.method)


def key_padding(
    attention_mask: torch.Tensor | None, batch: int, num_keys: int
) -> torch.Tensor | None:
    """``[batch, S]`` bool real-key mask from transformers' ``[B|1, 1, T, S']`` mask.

    The mask registered with every method is transformers' SDPA mask: causal and padding,
    so its last query row (which sees every earlier key) is the padding mask itself.
    ``S' >= S`` (a preallocated mask) is cut to the ``num_keys`` keys; a float mask counts
    0 as visible.

    Example:
        >>> import torch
        >>> m = torch.tensor([[False, True, False], [False, True, True]]).view(1, 1, 2, 3)
        >>> key_padding(m, 2, 3).tolist()
        [[False, True, True], [False, True, True]]
    """
    if attention_mask is None:
        return None
    last = attention_mask[:, 0, -1, :num_keys]
    last = last if last.dtype == torch.bool else last == 0
    return last.expand(batch, -1)


def sdpa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' own SDPA attention function (its ``"sdpa"`` implementation, bit for
    bit): ``query [B, HQ, T, D]``, ``key, value [B, H_kv, S, D]`` -> ``([B, T, HQ, D], None)``."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)  # type: ignore[no-any-return]


def dense_function(module: torch.nn.Module, name: str) -> Callable[..., Any]:
    """The attention function of implementation ``name`` (``"sdpa"`` or ``"eager"``) for
    ``module`` (eager: the ``eager_attention_forward`` of the module's model file).

    Raises:
        ValueError: ``name`` is neither, or the module's file has no eager function.
    """
    if name == "eager":
        fn = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
        if fn is None:
            raise ValueError(f"{type(module).__name__} has no eager_attention_forward")
        return fn  # type: ignore[no-any-return]
    if name != "sdpa":
        raise ValueError(
            f"dense implementation must be one of {DENSE_IMPLEMENTATIONS}, got {name!r}"
        )
    return sdpa_attention


def run_dense(
    fn: Callable[..., Any],
    name: str,
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> Any:
    """Call the dense attention ``fn`` of implementation ``name`` with the mask it expects.

    The registered mask is SDPA's: boolean, or None for plain causal attention (SDPA then
    uses ``is_causal``). Eager has no such flag and adds a float mask, so for ``"eager"``
    the causal mask is spelled out and a boolean mask becomes additive (0 / dtype min).
    Shapes as in [sdpa_attention][lc_attention.integration.sdpa_attention].
    """
    q_len, k_len = query.shape[2], key.shape[2]
    if name == "eager" and attention_mask is None and q_len > 1:
        rows = torch.arange(k_len - q_len, k_len, device=query.device).view(q_len, 1)
        cols = torch.arange(k_len, device=query.device).view(1, k_len)
        attention_mask = (cols <= rows)[None, None]
    if name == "eager" and attention_mask is not None and attention_mask.dtype == torch.bool:
        attention_mask = torch.zeros(
            attention_mask.shape, dtype=query.dtype, device=query.device
        ).masked_fill(~attention_mask, torch.finfo(query.dtype).min)
    return fn(module, query, key, value, attention_mask, **kwargs)
