"""A Hugging Face KV cache whose append is an in-place write into a preallocated buffer.

``transformers.DynamicCache`` appends a decode token with ``torch.cat``, which copies the
whole cache of every layer at every step: at 32K tokens that copy costs more than the
attention itself on a CPU. [PreallocatedCache][lc_attention.lychee.cache.PreallocatedCache]
keeps each full-attention layer in a buffer ``[B, H, capacity, D]`` plus a length; an
append writes the new rows in place and the layer hands out the view ``[:, :, :length]``.
When the buffer is full it grows geometrically (one copy, amortized O(1) per token), so
``capacity`` is a hint, not a limit. Everything else (masks, ``generate()``, ``crop``,
beam reordering) behaves like ``DynamicCache``, of which it is a subclass; sliding-window
layers (Gemma-3, when built with ``config=``) keep transformers' own sliding layer.

The views alias the buffer: a tensor returned by an earlier ``update`` may change after a
``crop`` followed by a new ``update`` (the new rows overwrite the cropped ones).

Example:
    >>> import torch
    >>> cache = PreallocatedCache(capacity=16)
    >>> k = torch.randn(1, 2, 10, 8)
    >>> keys, _ = cache.update(k, k, 0)
    >>> keys.shape, cache.layers[0].capacity
    (torch.Size([1, 2, 10, 8]), 16)
    >>> keys, _ = cache.update(k[:, :, :1], k[:, :, :1], 0)  # in place, no copy of the past
    >>> keys.shape[2], cache.get_seq_length()
    (11, 11)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from transformers.cache_utils import (
    DYNAMIC_LAYER_TYPE_MAPPING,
    DynamicCache,
    DynamicLayer,
    get_layer_types_and_kwargs,
)

GROWTH = 1.5
"""Factor by which a full buffer grows (at least to the length needed)."""


class PreallocatedLayer(DynamicLayer):
    """One full-attention layer of a [PreallocatedCache][lc_attention.lychee.cache.PreallocatedCache].

    Args:
        capacity: tokens to allocate room for at the first write (at least the length of
            that write); ``None`` allocates exactly the first write plus growth room.

    ``keys`` / ``values`` are views ``[B, H, length, D]`` of the buffers
    ``[B, H, capacity, D]`` (contiguous per head, strided across heads).
    """

    def __init__(self, capacity: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        if capacity is not None and (
            not isinstance(capacity, int) or isinstance(capacity, bool) or capacity < 1
        ):
            raise ValueError(f"capacity must be an integer >= 1 or None, got {capacity!r}")
        self._hint = capacity
        self._kbuf: torch.Tensor | None = None
        self._vbuf: torch.Tensor | None = None
        self._len = 0

    @property
    def capacity(self) -> int:
        """Tokens the current buffer holds before it has to grow (0 before the first write)."""
        return 0 if self._kbuf is None else int(self._kbuf.shape[-2])

    def _set_views(self) -> None:
        assert self._kbuf is not None
        assert self._vbuf is not None
        self.keys = self._kbuf[:, :, : self._len]
        self.values = self._vbuf[:, :, : self._len]

    def _reserve(self, key_states: torch.Tensor, value_states: torch.Tensor, n: int) -> None:
        need = self._len + n
        if self._kbuf is not None and need <= self._kbuf.shape[-2]:
            return
        old = self.capacity
        cap = max(need, self._hint or 0, int(old * GROWTH) + 1 if old else 0)
        b, h, _, dk = key_states.shape
        dv = value_states.shape[-1]
        kbuf = key_states.new_empty(b, h, cap, dk)
        vbuf = value_states.new_empty(b, h, cap, dv)
        if self._kbuf is not None and self._vbuf is not None and self._len:
            kbuf[:, :, : self._len].copy_(self._kbuf[:, :, : self._len])
            vbuf[:, :, : self._len].copy_(self._vbuf[:, :, : self._len])
        self._kbuf, self._vbuf = kbuf, vbuf

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``[B, H, n, D]`` new keys/values after the cached ones, in place.

        Returns:
            ``(keys, values)``: views ``[B, H, length, D]`` of everything cached so far.
        """
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = int(key_states.shape[-2])
        self._reserve(key_states, value_states, n)
        assert self._kbuf is not None
        assert self._vbuf is not None
        self._kbuf[:, :, self._len : self._len + n].copy_(key_states)
        self._vbuf[:, :, self._len : self._len + n].copy_(value_states)
        self._len += n
        self._set_views()
        return self.keys, self.values  # type: ignore[return-value]

    def get_seq_length(self) -> int:
        """Tokens cached so far."""
        return self._len

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last ``-tokens_to_remove`` tokens (a negative count, as ``DynamicLayer``)."""
        if tokens_to_remove > 0:
            raise ValueError(
                f"crop takes a negative number of tokens to remove, got {tokens_to_remove}"
            )
        if tokens_to_remove == 0 or self._kbuf is None:
            return
        self._len = max(0, self._len + tokens_to_remove)
        self._set_views()

    def reset(self) -> None:
        """Forget the cached tokens and release the buffers."""
        self._kbuf = self._vbuf = None
        self._len = 0
        super().reset()

    def _replace(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """Apply a batch-dimension op to the cached part and rebuild the buffers from it."""
        if self._kbuf is None or self._vbuf is None or not self._len:
            return
        keys, values = fn(self._kbuf[:, :, : self._len]), fn(self._vbuf[:, :, : self._len])
        hint, self._hint = self._hint, max(self._hint or 0, self.capacity)
        self._kbuf = self._vbuf = None
        n, self._len = self._len, 0
        self._reserve(keys, values, n)
        self._hint = hint
        assert self._kbuf is not None
        assert self._vbuf is not None
        self._kbuf[:, :, :n].copy_(keys)
        self._vbuf[:, :, :n].copy_(values)
        self._len = n
        self._set_views()

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Reorder the batch rows (beam search)."""
        if self._kbuf is None:
            return
        idx = beam_idx.to(self._kbuf.device)
        self._replace(lambda x: x.index_select(0, idx))

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Repeat each batch row ``repeats`` times."""
        self._replace(lambda x: x.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the batch rows ``indices``."""
        self._replace(lambda x: x[indices])


class PreallocatedCache(DynamicCache):
    """``DynamicCache`` with in-place appends into preallocated per-layer buffers.

    Args:
        config: the model config; when given, every ``"full_attention"`` layer is a
            [PreallocatedLayer][lc_attention.lychee.cache.PreallocatedLayer] and the other
            kinds (sliding windows of Gemma-3, ...) keep transformers' own dynamic layer. Without it,
            every layer is preallocated (like ``DynamicCache()`` keeps every layer whole).
        capacity: tokens to allocate per layer at the first write, e.g. prompt length
            plus ``max_new_tokens`` (the buffer still grows if more arrive).

    Raises:
        ValueError: ``capacity`` not a positive integer.

    Example:
        >>> cache = PreallocatedCache(capacity=4096)  # doctest: +SKIP
        >>> out = model.generate(ids, max_new_tokens=64, past_key_values=cache)  # doctest: +SKIP
    """

    def __init__(self, config: Any = None, capacity: int | None = None):
        PreallocatedLayer(capacity)  # validates capacity
        self.capacity_hint = capacity
        if config is None:
            super().__init__()
            self.layer_class_to_replicate = self._new_layer  # type: ignore[assignment]
            return
        layer_types, per_layer_kwargs = get_layer_types_and_kwargs(
            config.get_text_config(decoder=True)
        )
        layers: list[Any] = []
        for layer_type, kwargs in zip(layer_types, per_layer_kwargs, strict=True):
            if layer_type == "full_attention":
                layers.append(PreallocatedLayer(capacity))
            else:  # sliding/chunked windows and other kinds: transformers' own layer
                layers.append(DYNAMIC_LAYER_TYPE_MAPPING[layer_type](**kwargs))
        super(DynamicCache, self).__init__(layers=layers)

    def _new_layer(self) -> PreallocatedLayer:
        return PreallocatedLayer(self.capacity_hint)
