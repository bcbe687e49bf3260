"""Shared helpers of the LycheeDecode benchmarks (SmolLM2-135M-Instruct by default, or the
embedded Gemma-3-270M base model with ``--model gemma-3-270m``; lc-evals prompts)."""

from __future__ import annotations

import pathlib
import platform

import torch

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs/benchmarks/lc-attention-lychee"
ROLES = OUT / "smollm2_roles.json"
GEMMA = "gemma-3-270m"


def default_roles(model: str | None) -> pathlib.Path:
    """Default role-map file of a ``--model`` name (``None``: SmolLM2)."""
    return ROLES if model is None else OUT / f"{model.replace('-', '_')}_roles.json"


def model_label(model: str | None) -> str:
    """Model description written into the result JSON files."""
    name = "SmolLM2-135M-Instruct" if model is None else "Gemma-3-270M (base)"
    if model not in (None, GEMMA):
        name = model
    return f"{name} (embedded GGUF, float32)"


def full_attention_layers(model) -> list[bool]:
    """Per layer, whether it is a full-attention (hybrid) layer; sliding-window layers
    (Gemma-3) stay dense under LycheeDecode."""
    types = getattr(model.config, "layer_types", None)
    if not types:
        return [True] * int(model.config.num_hidden_layers)
    return [t == "full_attention" for t in types]


def machine(threads: int) -> str:
    """One-line description of the machine a result came from."""
    return f"{platform.processor() or platform.machine()}, {threads} threads, CPU (shared 2-core)"


def chat_ids(tok, prompt: str, answer: str | None = None) -> torch.Tensor:
    """Token ids ``[1, L]`` of a one-turn chat prompt, optionally followed by an answer
    (a base model without a chat template: the plain prompt and a blank line)."""
    if tok.chat_template:
        msgs = [{"role": "user", "content": prompt}]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    else:
        text = prompt + "\n\n"
    if answer is not None:
        text += answer
    return tok(text, return_tensors="pt").input_ids


def task_ids(
    tok, task: str, length: int, seed: int, with_answer: bool = False, prefix: bool = False
):
    """``(ids [1, L], answers)`` of one lc-evals item rendered with the chat template
    (or plainly, for a base model).

    ``prefix``: end the prompt with RULER's answer prefix ("The special magic number for
    <key> mentioned in the text above is"), so a small model answers at once.
    """
    from lc_evals import generate, render_prompt

    item = generate(task, n=1, length=length, seed=seed, tokenizer=tok)[0]
    answer = None
    if with_answer:
        answer = "The answer is " + ", ".join(item.answers) + "."
    elif prefix:
        key = item.metadata["keys"][0]
        answer = f"The special magic number for {key} mentioned in the text above is"
    return chat_ids(tok, render_prompt(item), answer), list(item.answers)
