"""Sampling a chat model on (context, question) prompts, for building preference pairs.

:func:`chat_sampler` returns the ``sample(context, question, n)`` callable that
:func:`~lc_train.preference.data.build_pairs` expects; :func:`chat_answer` is its
greedy counterpart for evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from lc_train.preference.data import PROMPT_TEMPLATE


def _prompt_ids(tokenizer: Any, content: str, device: torch.device) -> torch.Tensor:
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    return ids.to(device)


def _generate(
    model: Any, tokenizer: Any, content: str, n: int, max_new_tokens: int, temperature: float | None
) -> list[str]:
    device = next(model.parameters()).device
    ids = _prompt_ids(tokenizer, content, device)
    options: dict[str, Any] = {"do_sample": False}
    if temperature is not None:
        options = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            num_return_sequences=n,
            pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
            **options,
        )
    return [tokenizer.decode(row[ids.shape[1] :], skip_special_tokens=True).strip() for row in out]


def chat_sampler(
    model: Any,
    tokenizer: Any,
    *,
    template: str = PROMPT_TEMPLATE,
    max_new_tokens: int = 24,
    temperature: float = 1.0,
    seed: int = 0,
) -> Callable[[str, str, int], list[str]]:
    """``sample(context, question, n) -> n`` responses drawn from ``model`` at ``temperature``.

    Args:
        model: a transformers causal LM with a chat template on ``tokenizer``.
        tokenizer: its tokenizer.
        template: user prompt with ``{context}`` and ``{question}``.
        max_new_tokens: response budget (tokens).
        temperature: sampling temperature (> 0).
        seed: the k-th call reseeds torch with ``seed + k``, so a run is reproducible.

    Example:
        >>> sample = chat_sampler(model, tokenizer, seed=0)  # doctest: +SKIP
        >>> sample("The code is 7.", "What is the code?", 4)  # doctest: +SKIP
        ['The code is 7.', '7', 'It is 3.', '7.']
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
    calls = [0]

    def sample(context: str, question: str, n: int) -> list[str]:
        torch.manual_seed(seed + calls[0])
        calls[0] += 1
        content = template.format(context=context, question=question)
        return _generate(model, tokenizer, content, n, max_new_tokens, temperature)

    return sample


def chat_answer(
    model: Any,
    tokenizer: Any,
    context: str,
    question: str,
    *,
    template: str = PROMPT_TEMPLATE,
    max_new_tokens: int = 24,
) -> str:
    """The greedy reply of ``model`` to one (context, question) prompt."""
    content = template.format(context=context, question=question)
    return _generate(model, tokenizer, content, 1, max_new_tokens, None)[0]
