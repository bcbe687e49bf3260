"""Shared helpers of the LycheeDecode benchmarks (SmolLM2-135M-Instruct, lc-evals prompts)."""

from __future__ import annotations

import pathlib
import platform

import torch

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs/benchmarks/lc-attention-lychee"
ROLES = OUT / "smollm2_roles.json"


def machine(threads: int) -> str:
    """One-line description of the machine a result came from."""
    return f"{platform.processor() or platform.machine()}, {threads} threads, CPU (shared 2-core)"


def chat_ids(tok, prompt: str, answer: str | None = None) -> torch.Tensor:
    """Token ids ``[1, L]`` of a one-turn chat prompt, optionally followed by an answer."""
    msgs = [{"role": "user", "content": prompt}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    if answer is not None:
        text += answer
    return tok(text, return_tensors="pt").input_ids


def task_ids(
    tok, task: str, length: int, seed: int, with_answer: bool = False, prefix: bool = False
):
    """``(ids [1, L], answers)`` of one lc-evals item rendered with the chat template.

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
