"""Cache correction: periodically recompute the generated tokens' KV entries densely.

With LycheeDecode, a generated token's keys and values come from hidden states that
were computed with sparse attention, so they drift from what full attention would have
cached, and later steps read that drift. A correction pass crops the cache back to the
last corrected position and re-runs the tokens generated since then as one dense chunk
(like a prefill): their KV entries become exactly those of full attention, and the last
position's logits are full attention's next-token logits. Done every ``every`` decode
steps, it costs one dense chunk of ``every`` queries over the context per ``every``
tokens.

This follows the optional cache-correction step the LycheeDecode paper describes for
long generations; the schedule (a fixed interval) and the chunked dense re-run are our
reading of it.

Example:
    >>> from lc_attention.lychee import enable_lychee, generate_with_correction
    >>> with enable_lychee(model, roles, topk=256):  # doctest: +SKIP
    ...     out = generate_with_correction(model, ids, max_new_tokens=256, every=32)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from lc_attention.integration import attention_modules
from lc_attention.lychee.cache import PreallocatedCache


@contextmanager
def _dense(model: torch.nn.Module) -> Iterator[None]:
    """Make LycheeDecode (if enabled) run dense attention inside the block."""
    shared: list[Any] = [
        getattr(m, "lc_lychee").shared  # noqa: B009
        for m in attention_modules(model)
        if hasattr(m, "lc_lychee")
    ]
    old = [s.dense for s in shared]
    for s in shared:
        s.dense = True
    try:
        yield
    finally:
        for s, o in zip(shared, old, strict=True):
            s.dense = o


def correct_cache(
    model: torch.nn.Module,
    cache: Any,
    ids: torch.Tensor,
    start: int,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Recompute the cache entries of positions ``start ..`` densely.

    Args:
        model: a causal LM (LycheeDecode enabled or not).
        cache: its KV cache (``DynamicCache`` or
            [PreallocatedCache][lc_attention.lychee.cache.PreallocatedCache]) holding the
            first ``L = cache.get_seq_length()`` tokens of ``ids``.
        ids: ``[B, L]`` token ids whose KV entries the cache holds.
        start: first position to recompute, ``0 <= start < L``.
        attention_mask: optional ``[B, L]`` padding mask of ``ids``.

    Returns:
        ``[B, vocab]`` logits of the last position under dense attention.

    Raises:
        ValueError: ``ids`` does not match the cache length or ``start`` is out of range.
    """
    length = int(cache.get_seq_length())
    if ids.dim() != 2 or ids.shape[1] != length:
        raise ValueError(
            f"ids must be [B, L] with L = the cache length {length}, got {tuple(ids.shape)}"
        )
    if not 0 <= start < length:
        raise ValueError(f"start must lie in [0, {length}), got {start}")
    cache.crop(start - length)
    kwargs: dict[str, Any] = {"cache": cache, "use_cache": True}
    if attention_mask is not None:
        kwargs["attention_mask"] = attention_mask
    with torch.no_grad(), _dense(model):
        logits = model(ids[:, start:], **kwargs).logits
    return logits[:, -1]  # type: ignore[no-any-return]


def generate_with_correction(
    model: torch.nn.Module,
    ids: torch.Tensor,
    max_new_tokens: int,
    every: int,
    cache: Any = None,
) -> torch.Tensor:
    """Greedy decoding with a cache-correction pass every ``every`` steps.

    Args:
        model: a causal LM, usually with LycheeDecode enabled.
        ids: ``[B, L]`` prompt ids (no padding).
        max_new_tokens: tokens to generate (>= 1).
        every: decode steps between correction passes (>= 1; 1 feeds every generated
            token densely, i.e. plain full-attention decoding).
        cache: an empty cache to use (default: a ``PreallocatedCache`` sized for the
            prompt plus the new tokens).

    Returns:
        ``[B, L + max_new_tokens]`` prompt and generated ids.

    Raises:
        ValueError: ``max_new_tokens`` or ``every`` below 1.
    """
    for name, v in (("max_new_tokens", max_new_tokens), ("every", every)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if cache is None:
        cache = PreallocatedCache(
            config=getattr(model, "config", None), capacity=ids.shape[1] + max_new_tokens
        )
    with torch.no_grad():
        logits = model(ids, cache=cache, use_cache=True).logits[:, -1]
    out = ids
    clean = ids.shape[1]  # positions below this hold dense (prefill or corrected) entries
    for step in range(max_new_tokens):
        tok = logits.argmax(-1, keepdim=True)
        out = torch.cat([out, tok], dim=1)
        if step == max_new_tokens - 1:
            break
        if out.shape[1] - clean >= every:
            # drop the sparse-decoded entries since the last pass and re-run them with the
            # new token as one dense chunk: dense entries and dense logits for the next one
            extra = int(cache.get_seq_length()) - clean
            if extra:
                cache.crop(-extra)
            with torch.no_grad(), _dense(model):
                logits = model(out[:, clean:], cache=cache, use_cache=True).logits[:, -1]
            clean = out.shape[1]
        else:
            with torch.no_grad():
                logits = model(tok, cache=cache, use_cache=True).logits[:, -1]
    return out
