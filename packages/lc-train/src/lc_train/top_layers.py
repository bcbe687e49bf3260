"""Split a decoder-only model into a frozen lower part and a trainable top.

Adapters on the top ``k`` layers only see the hidden states that enter layer ``L - k``,
and those do not change while the adapters train. Computing them once per sequence
(``lower``) and running only the top layers afterwards (``upper``) makes every later
forward and backward pass cost ``k / L`` of the full model, which is what lets several
preference-optimization runs and their evaluations share one pass of the base model.

Works for Hugging Face causal LMs laid out as ``model.model.{embed_tokens, layers, norm,
rotary_emb}`` and ``model.lm_head`` (Llama, Qwen2, Mistral, SmolLM2 and most decoders).

    >>> lower, make_upper = split_top_layers(model, k=4)   # doctest: +SKIP
    >>> h = lower(input_ids)                              # [B, T, D], no gradients
    >>> upper = make_upper()                              # a fresh copy of the top 4 layers
    >>> upper(inputs_embeds=h).logits                     # equals model(input_ids).logits
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


def _parts(model: nn.Module) -> tuple[nn.Module, nn.ModuleList]:
    decoder = getattr(model, "model", None)
    needed = ("embed_tokens", "layers", "norm", "rotary_emb")
    if decoder is None or not all(hasattr(decoder, a) for a in needed):
        raise TypeError(
            f"{type(model).__name__} is not laid out as model.model.{{{', '.join(needed)}}}; "
            "split_top_layers supports Llama-style Hugging Face decoders"
        )
    if not hasattr(model, "lm_head"):
        raise TypeError(f"{type(model).__name__} has no lm_head")
    return decoder, decoder.layers


def _config(config: Any, layers: slice) -> Any:
    out = copy.deepcopy(config)
    n = config.num_hidden_layers
    out.num_hidden_layers = len(range(n)[layers])
    if getattr(config, "layer_types", None) is not None:
        out.layer_types = list(config.layer_types)[layers]
    return out


def split_top_layers(
    model: nn.Module, k: int
) -> tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[], nn.Module]]:
    """``(lower, make_upper)`` for a causal LM of ``L`` layers.

    Args:
        model: a Hugging Face causal LM (Llama-style layout), in eval mode.
        k: number of top layers, ``1 <= k < L``.

    Returns:
        ``lower(input_ids [B, T]) -> [B, T, D]``: the hidden states entering layer
        ``L - k`` (computed without gradients, shares the model's weights); and
        ``make_upper()``: a new causal LM of ``k`` layers that takes those states as
        ``inputs_embeds`` and returns the full model's logits. Each call copies the top
        layers afresh (so adapters can be added to one copy without touching another);
        the final norm, rotary embedding and LM head are shared with ``model``.
    """
    decoder, layers = _parts(model)
    n = len(layers)
    if not isinstance(k, int) or not 1 <= k < n:
        raise ValueError(f"k must be an int in [1, {n - 1}] for a {n}-layer model, got {k!r}")

    with torch.device("meta"):
        bottom = type(decoder)(_config(model.config, slice(0, n - k)))
    bottom.embed_tokens = decoder.embed_tokens
    bottom.layers = nn.ModuleList(layers[: n - k])
    bottom.norm = nn.Identity()
    bottom.rotary_emb = decoder.rotary_emb
    bottom.eval()

    def lower(input_ids: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return bottom(input_ids=input_ids, use_cache=False).last_hidden_state

    def make_upper() -> nn.Module:
        config = _config(model.config, slice(n - k, n))
        config.tie_word_embeddings = False
        with torch.device("meta"):
            top: Any = type(model)(config)
        top.model.embed_tokens = None  # the states come in as inputs_embeds
        top.model.layers = copy.deepcopy(layers[n - k :])
        for i, layer in enumerate(top.model.layers):  # cache slots count from 0 here
            for module in (layer, getattr(layer, "self_attn", None)):
                if hasattr(module, "layer_idx"):
                    setattr(module, "layer_idx", i)  # noqa: B010
        top.model.norm = decoder.norm
        top.model.rotary_emb = decoder.rotary_emb
        top.lm_head = model.lm_head
        return top.eval()

    return lower, make_upper
