"""A chat backend running a transformers causal LM in this process.

Example:
    >>> from lc_agents.backends import LocalBackend
    >>> backend = LocalBackend()  # the embedded SmolLM2-135M-Instruct  # doctest: +SKIP
    >>> backend.chat([{"role": "user", "content": "Say hi."}], max_tokens=8)  # doctest: +SKIP
    'Hi! How can I help you today?'
"""

from __future__ import annotations

import asyncio
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


class LocalBackend:
    """Chat with a local transformers model; greedy decoding unless ``temperature > 0``.

    Args:
        model: ``None`` for the embedded SmolLM2-135M-Instruct, a local model directory,
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
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.model: Any
        self.tokenizer: Any
        self.model, self.tokenizer = load_model(model, tokenizer)
        self.adapter = adapter
        if adapter is not None:
            from lc_agents.adapters import merge_adapter

            merge_adapter(self.model, adapter)
        if device is not None:
            self.model.to(device)
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; LocalBackend needs one")
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
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
            out = self.model.generate(
                input_ids,
                attention_mask=torch.ones_like(input_ids),
                max_new_tokens=max_new,
                logits_processor=processors,
                eos_token_id=self.end_ids,
                pad_token_id=self.end_ids[0],
                **kwargs,
            )
        new = [int(t) for t in out[0, len(prompt) :].tolist()]
        while new and new[-1] in self.end_ids:
            new.pop()
        return new

    async def achat(self, messages: Sequence[Message], **options: Any) -> str:
        """Asynchronous :meth:`chat` (runs in a worker thread; calls are serialized)."""
        return await asyncio.to_thread(self.chat, messages, **options)

    def chat_batch(self, conversations: Sequence[Sequence[Message]], **options: Any) -> list[str]:
        """Reply to each conversation in turn (one model, so no parallelism is gained)."""
        return [self.chat(m, **options) for m in conversations]
