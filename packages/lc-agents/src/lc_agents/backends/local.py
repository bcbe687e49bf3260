"""A chat backend running a transformers causal LM in this process.

Example:
    >>> from lc_agents.backends import LocalBackend
    >>> backend = LocalBackend()  # the embedded Qwen2.5-Coder-0.5B-Instruct  # doctest: +SKIP
    >>> backend.chat([{"role": "user", "content": "Say hi."}], max_tokens=8)  # doctest: +SKIP
    'Hi! How can I help you today?'
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lc_agents.backends.base import Message, validate_messages
from lc_agents.constrained import CopyLogitsProcessor, SpanCopyConstraint
from lc_agents.models import load_model

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["LocalBackend"]


@functools.cache
def _cache_kwarg() -> str:
    """``generate``'s name for a KV cache argument: ``cache`` from transformers 5.24 on
    (where ``past_key_values`` is deprecated), ``past_key_values`` before."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "cache" if (major, minor) >= (5, 24) else "past_key_values"


def takes_logits_to_keep(model: Any) -> bool:
    """Whether ``model.forward`` takes ``logits_to_keep`` (transformers' causal LMs do; a
    wrapper hiding its signature does not, and gets full logits)."""
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False
    return "logits_to_keep" in params


class LocalBackend:
    """Chat with a local transformers model; greedy decoding unless ``temperature > 0``.

    Args:
        model: ``None`` for the default embedded model (Qwen2.5-Coder-0.5B-Instruct), an
            embedded model name (see :data:`lc_agents.models.EMBEDDED_MODELS`), a local model directory,
            or a model object (then pass ``tokenizer``).
        tokenizer: tokenizer path or object (default: beside the model).
        max_tokens: default cap on generated tokens per reply.
        device: torch device for the model (default: where it already is).
        adapter: a LoRA adapter merged into the weights after loading: the name of a
            shipped adapter (e.g. ``"memagent-smollm2"``, see
            :func:`lc_agents.adapters.available_adapters`) or an adapter folder. ``None``
            (default): the plain model. A model object passed in is modified in place.
            Raises :class:`~lc_agents.adapters.AdapterError` when the adapter was trained
            on another base model.
        prefix_cache: keep the last prompt's keys and values for the next call (below).
        dtype: weight dtype or its name (default float32). ``"bfloat16"`` roughly halves
            the time per token on a CPU with native bfloat16 support, at some precision.

    Prefix cache: the keys and values of the last prompt (and its reply) are kept, and a
    next prompt that starts with the same tokens reuses them, so only the new suffix is
    computed (as with vLLM's automatic prefix caching, one entry deep). MemAgent's
    chunk-major multi-question runs and several questions after one long document hit
    it. Outputs are the same as without it up to float rounding; turn it off with
    ``prefix_cache=False``.

    Attributes:
        model: the causal LM (eval mode).
        tokenizer: its tokenizer; it must have a chat template.
        supports_constraints: ``True``: :meth:`chat` accepts ``constraint=``.
    """

    supports_constraints = True

    def __init__(
        self,
        model: str | os.PathLike[str] | PreTrainedModel | None = None,
        tokenizer: str | os.PathLike[str] | PreTrainedTokenizerBase | None = None,
        *,
        max_tokens: int = 256,
        device: str | None = None,
        adapter: str | os.PathLike[str] | None = None,
        prefix_cache: bool = True,
        dtype: Any = None,
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.model: Any
        self.tokenizer: Any
        self.model, self.tokenizer = load_model(model, tokenizer, dtype=dtype)
        self.adapter = adapter
        if adapter is not None:
            from lc_agents.adapters import merge_adapter

            merge_adapter(self.model, adapter)
        if device is not None:
            self.model.to(device)
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; LocalBackend needs one")
        self.max_tokens = max_tokens
        self.prefix_cache = prefix_cache
        self.prefix_hits = 0
        """Number of calls that reused cached keys and values (for tests and profiling)."""
        self._cache: Any = None
        self._cache_ids: list[int] = []
        self._lock = threading.Lock()
        self._logits_to_keep: bool | None = None
        eos = {self.tokenizer.eos_token_id}
        gen_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        if isinstance(gen_eos, int):
            eos.add(gen_eos)
        elif gen_eos:
            eos.update(gen_eos)
        self.end_ids: list[int] = sorted(t for t in eos if t is not None)

    @property
    def context_window(self) -> int:
        """Largest number of positions the model was trained for (tokens)."""
        return int(getattr(self.model.config, "max_position_embeddings", 2048))

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` (no special tokens)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the chat-formatted conversation, ready for the assistant's turn."""
        msgs = validate_messages(messages)
        ids: Any = self.tokenizer.apply_chat_template(
            msgs, add_generation_prompt=True, tokenize=True
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return [int(t) for t in ids]

    def chat(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
        constraint: SpanCopyConstraint | None = None,
        **_: Any,
    ) -> str:
        """Reply to ``messages``.

        Args:
            messages: the conversation (OpenAI chat format).
            max_tokens: cap on generated tokens (default: the backend's).
            temperature: 0 for greedy decoding; > 0 samples (then ``seed`` matters).
            seed: random seed for sampling.
            constraint: copy constraint on the generated tokens (see
                :mod:`lc_agents.constrained`); its end tokens should include the model's.

        Returns:
            The reply text, stripped of special tokens and surrounding whitespace.
        """
        ids = self.generate_ids(
            self.prompt_ids(messages),
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            constraint=constraint,
        )
        return self.tokenizer.decode(ids, skip_special_tokens=True).strip()

    def generate_ids(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        seed: int | None = None,
        constraint: SpanCopyConstraint | None = None,
    ) -> list[int]:
        """Generate after the token ids ``prompt``; returns the new ids without end tokens."""
        import torch
        from transformers import LogitsProcessorList

        max_new = max_tokens or self.max_tokens
        if max_new < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_new}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([list(prompt)], dtype=torch.long, device=device)
        processors = LogitsProcessorList()
        if constraint is not None:
            processors.append(CopyLogitsProcessor(constraint, prompt_length=len(prompt)))
        kwargs: dict[str, Any] = {"do_sample": temperature > 0}
        if temperature > 0:
            kwargs.update(temperature=temperature, top_p=1.0, top_k=0)
        else:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        with self._lock, torch.inference_mode():
            if seed is not None:
                torch.manual_seed(seed)
            cache = self._reusable_cache(prompt)
            if cache is not None:
                kwargs[_cache_kwarg()] = cache
            out = self.model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=max_new,
                logits_processor=processors,
                eos_token_id=self.end_ids,
                pad_token_id=self.end_ids[0],
                **kwargs,
            )
            if self.prefix_cache and cache is not None:
                ids = [int(t) for t in out[0].tolist()]
                self._cache, self._cache_ids = cache, ids[: cache.get_seq_length()]
        new = [int(t) for t in out[0, len(prompt) :].tolist()]
        while new and new[-1] in self.end_ids:
            new.pop()
        return new

    _MIN_PREFIX = 32

    def _reusable_cache(self, prompt: Sequence[int]) -> Any:
        """A KV cache holding the longest cached prefix of ``prompt`` (cropped in place),
        a fresh cache when nothing useful is cached, or ``None`` with the cache off."""
        if not self.prefix_cache:
            return None
        from transformers import DynamicCache

        cached, n = self._cache_ids, 0
        limit = min(len(cached), len(prompt) - 1)  # generate needs one uncached token
        while n < limit and cached[n] == prompt[n]:
            n += 1
        if self._cache is None or n < self._MIN_PREFIX or not self._cache.is_croppable:
            self._cache, self._cache_ids = None, []
            return DynamicCache(config=self.model.config)
        extra = self._cache.get_seq_length() - n
        if extra > 0:  # a negative argument removes that many tokens (transformers 4 and 5)
            self._cache.crop(-extra)
        self.prefix_hits += 1
        return self._cache

    def score_continuations(
        self, prompt: Sequence[int], continuations: Sequence[Sequence[int]]
    ) -> list[float]:
        """Log-likelihood (nats) of each token sequence as the text that follows ``prompt``.

        Ranking fixed candidate answers this way (a multiple-choice reader) needs no
        generation. The prompt goes through the prefix cache like :meth:`generate_ids`
        (only its uncached suffix is computed, and it stays cached for the next call);
        then one batched forward per continuation length runs over copies of the cache.

        Args:
            prompt: token ids, e.g. from :meth:`prompt_ids` plus the start of the reply.
            continuations: token ids of each candidate (each non-empty).

        Returns:
            One summed log-probability per continuation, in order.
        """
        import copy

        import torch
        from transformers import DynamicCache

        if not prompt:
            raise ValueError("score_continuations needs a non-empty prompt")
        conts = [[int(t) for t in c] for c in continuations]
        if any(not c for c in conts):
            raise ValueError("every continuation needs at least one token")
        device = next(self.model.parameters()).device

        def forward(rows: list[list[int]], cache: Any, *, last_only: bool = False) -> Any:
            x = torch.tensor(rows, dtype=torch.long, device=device)
            kwargs = {_cache_kwarg(): cache}
            if last_only and self._keeps_logits():
                kwargs["logits_to_keep"] = 1  # not [T, vocab] logits for a long prompt
            out = self.model(input_ids=x, use_cache=True, **kwargs)
            return out.logits.float().log_softmax(-1)

        with self._lock, torch.inference_mode():
            cache = self._reusable_cache(prompt)
            if cache is None:  # prefix cache off: a private cache for this call
                cache = DynamicCache(config=self.model.config)
            done = cache.get_seq_length()
            first = forward([list(prompt[done:])], cache, last_only=True)[0, -1]
            if self.prefix_cache:
                self._cache, self._cache_ids = cache, [int(t) for t in prompt]
            scores = [float(first[c[0]]) for c in conts]
            by_len: dict[int, list[int]] = {}
            for j, c in enumerate(conts):
                if len(c) > 1:
                    by_len.setdefault(len(c), []).append(j)
            for length, group in sorted(by_len.items()):
                branch = copy.deepcopy(cache)
                branch.batch_repeat_interleave(len(group))
                lp = forward([conts[j][: length - 1] for j in group], branch)
                for row, j in enumerate(group):
                    c = conts[j]
                    scores[j] += float(sum(lp[row, k, c[k + 1]] for k in range(length - 1)))
        return scores

    def _keeps_logits(self) -> bool:
        """:func:`takes_logits_to_keep` of the model, looked up once."""
        if self._logits_to_keep is None:
            self._logits_to_keep = takes_logits_to_keep(self.model)
        return self._logits_to_keep

    def clear_cache(self) -> None:
        """Drop the cached prefix (frees its memory)."""
        with self._lock:
            self._cache, self._cache_ids = None, []

    async def achat(self, messages: Sequence[Message], **options: Any) -> str:
        """Asynchronous :meth:`chat` (runs in a worker thread; calls are serialized)."""
        return await asyncio.to_thread(self.chat, messages, **options)

    def chat_batch(self, conversations: Sequence[Sequence[Message]], **options: Any) -> list[str]:
        """Reply to several conversations with one padded generation (greedy decoding).

        The prompts are left-padded into one batch, so a group of short prompts costs
        about as much as its longest one (decoding reads the weights once per step for
        the whole batch). Replies equal :meth:`chat`'s up to float rounding. Sampling
        (``temperature > 0``) and ``constraint=`` go through :meth:`chat` one by one.
        The prefix cache is neither used nor changed.
        """
        if not conversations:
            return []
        if float(options.get("temperature", 0.0) or 0.0) > 0 or options.get("constraint"):
            return [self.chat(m, **options) for m in conversations]
        prompts = [self.prompt_ids(m) for m in conversations]
        out = self.generate_batch_ids(prompts, max_tokens=options.get("max_tokens"))
        return [self.tokenizer.decode(ids, skip_special_tokens=True).strip() for ids in out]

    def generate_batch_ids(
        self, prompts: Sequence[Sequence[int]], *, max_tokens: int | None = None
    ) -> list[list[int]]:
        """Greedy generation after each token-id prompt, as one left-padded batch.

        Returns:
            The new ids of each prompt, without end tokens (as :meth:`generate_ids`).
        """
        import torch

        max_new = max_tokens or self.max_tokens
        if max_new < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_new}")
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        device = next(self.model.parameters()).device
        width = max(len(p) for p in prompts)
        pad = self.end_ids[0]
        ids = torch.full((len(prompts), width), pad, dtype=torch.long, device=device)
        mask = torch.zeros_like(ids)
        for row, p in enumerate(prompts):
            ids[row, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            mask[row, width - len(p) :] = 1
        with self._lock, torch.inference_mode():
            out = self.model.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=max_new,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                eos_token_id=self.end_ids,
                pad_token_id=pad,
            )
        replies = []
        for row in out[:, width:].tolist():
            new = [int(t) for t in row]
            for k, t in enumerate(new):  # generation stops at the first end token
                if t in self.end_ids:
                    new = new[:k]
                    break
            replies.append(new)
        return replies
