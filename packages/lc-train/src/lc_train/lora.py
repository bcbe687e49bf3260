"""LoRA adapters on a causal LM's projections, with a seeded initialisation.

:func:`apply_lora` is the one place where lc-train adds LoRA adapters (through
``peft``, extra ``lc-train[trl]``): OOMB fine-tuning (:func:`lc_train.finetune` with
``lora_rank > 0``), the SoLoPO benchmarks and the memory-agent training recipe go
through it.

    >>> peft_model = apply_lora(model, rank=16, alpha=32, seed=0)  # doctest: +SKIP
    >>> adapters = [p for p in peft_model.parameters() if p.requires_grad]  # doctest: +SKIP
    >>> peft_model.get_base_model() is model  # the adapters live in model  # doctest: +SKIP
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from peft import PeftModel

LORA_TARGET_MODULES: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)
"""Default targets: the attention and MLP projections of Llama-style decoders (Llama,
Qwen2, Qwen3, Mistral, SmolLM2)."""


def _matches(module_name: str, target: str) -> bool:
    # peft's rule for a list of names: the full name, or its last dotted components
    return module_name == target or module_name.endswith("." + target)


def apply_lora(
    model: nn.Module,
    *,
    rank: int,
    alpha: int,
    seed: int,
    dropout: float = 0.0,
    target_modules: Sequence[str] = LORA_TARGET_MODULES,
    layers: Sequence[int] | None = None,
    task_type: str | None = None,
) -> PeftModel:
    """Freeze ``model`` and add LoRA adapters to its ``target_modules`` (with ``peft``).

    The adapters' initial values (``peft``'s default: Kaiming-uniform ``A``, zero ``B``)
    are drawn right after ``torch.manual_seed(seed)`` inside
    ``torch.random.fork_rng(devices=[])``: the same seed gives the same adapters whatever
    ran before, and the global CPU generator is left as it was (an accelerator's
    generators are reseeded, as ``torch.manual_seed`` does).

    Args:
        model: a causal LM (any ``nn.Module`` whose targets ``peft`` supports, e.g.
            ``nn.Linear``). Its own weights are frozen; the adapters are added to its
            modules in place.
        rank: adapter rank ``r >= 1``.
        alpha: scaling numerator (the update is ``alpha / rank * B @ A``), ``>= 1``.
        seed: seed of the adapters' initial values.
        dropout: dropout on the adapters' input, in ``[0, 1)``.
        target_modules: names of the modules to adapt; a name matches a module whose
            full name is the name or ends with ``"." + name`` (``peft``'s rule). Each
            must match at least one module of ``model``.
        layers: decoder layers to adapt (indices into the model's ``layers`` list, e.g.
            ``range(16, 24)`` for the top 8 of 24); ``None`` adapts every layer. Each
            index must hold at least one target module.
        task_type: ``peft``'s task type (``"CAUSAL_LM"`` wraps the model in a
            ``PeftModelForCausalLM``); ``None`` for a plain ``PeftModel``.

    Returns:
        The ``peft`` model. Its trainable parameters (``requires_grad``) are exactly the
        adapters (named ``...lora_A...`` / ``...lora_B...``); ``.get_base_model()`` is
        ``model`` itself, now holding the adapters.

    Raises:
        ValueError: ``rank < 1``, ``alpha < 1``, ``dropout`` outside ``[0, 1)``, no
            target, a target that matches no module of ``model``, or ``layers`` empty,
            repeated or naming a layer that holds no target.
        TypeError: ``rank``, ``alpha`` or ``seed`` not an int, ``target_modules`` a
            single string or holding something else than strings.
        ImportError: ``peft`` is not installed.
        TypeError: ``layers`` holding something else than ints.
    """
    if isinstance(rank, bool) or not isinstance(rank, int):
        raise TypeError(f"LoRA rank must be an int, got {rank!r}")
    if rank < 1:
        raise ValueError(f"LoRA rank must be >= 1, got {rank}")
    if isinstance(alpha, bool) or not isinstance(alpha, int):
        raise TypeError(f"LoRA alpha must be an int (as peft's LoraConfig), got {alpha!r}")
    if alpha < 1:
        raise ValueError(f"LoRA alpha must be >= 1, got {alpha}")
    if isinstance(dropout, bool) or not isinstance(dropout, int | float) or not 0 <= dropout < 1:
        raise ValueError(f"LoRA dropout must be in [0, 1), got {dropout!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r}")
    if isinstance(target_modules, str):
        raise TypeError(
            f"target_modules must be a sequence of module names, not the string "
            f"{target_modules!r} (write [{target_modules!r}])"
        )
    targets = list(target_modules)
    if not targets:
        raise ValueError("target_modules is empty: LoRA needs at least one module to adapt")
    if not all(isinstance(t, str) for t in targets):
        raise TypeError(f"target_modules must hold module names (str), got {targets!r}")
    names = [name for name, _ in model.named_modules()]
    missing = [t for t in targets if not any(_matches(name, t) for name in names)]
    if missing:
        raise ValueError(
            f"target_modules {missing} match no module of {type(model).__name__} "
            f"(a name matches a module called NAME or ending in .NAME)"
        )
    chosen = None if layers is None else _check_layers(layers, names, targets)
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:
        raise ImportError("apply_lora needs peft (pip install 'lc-train[trl]')") from exc

    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=targets,
        layers_to_transform=chosen,
        task_type=task_type,
    )
    model.requires_grad_(False)  # peft freezes them too; only the adapters train
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return get_peft_model(model, config)


def _check_layers(layers: Sequence[int], names: Sequence[str], targets: Sequence[str]) -> list[int]:
    """``layers`` as a list, after checking each index holds a target module."""
    if isinstance(layers, str) or not isinstance(layers, Sequence | range):
        raise TypeError(f"layers must be a sequence of layer indices, got {layers!r}")
    chosen = list(layers)
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in chosen):
        raise TypeError(f"layers must hold layer indices (int), got {chosen!r}")
    if not chosen:
        raise ValueError("layers is empty: give None to adapt every layer")
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"layers {chosen} repeats an index")
    held = {
        int(m.group(1))
        for name in names
        if (m := re.search(r"(?:^|\.)layers\.(\d+)\.", name))
        and any(_matches(name, t) for t in targets)
    }
    missing = [i for i in chosen if i not in held]
    if missing:
        span = f"0..{max(held)}" if held else "none"
        raise ValueError(
            f"layers {missing} hold none of the target modules (layers with targets: {span})"
        )
    return chosen


__all__ = ["LORA_TARGET_MODULES", "apply_lora"]
