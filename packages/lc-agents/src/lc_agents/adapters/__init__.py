"""LoRA adapters shipped with lc-agents, merged into a loaded model with plain torch.

An adapter is a folder holding ``adapter.safetensors`` (for every adapted linear layer
``<module>``, the tensors ``<module>.lora_A`` ``[r, in_features]`` and
``<module>.lora_B`` ``[out_features, r]``) and ``adapter.json`` (rank, ``alpha``, the
base model's fingerprint, a description). Merging sets, for each adapted layer,

    W <- W + (alpha / r) * B @ A

which is exactly what a LoRA forward pass computes (``x W^T + (alpha/r) x A^T B^T``), so
no ``peft`` is needed at inference. Before merging, the model's fingerprint (its
architecture sizes and a checksum of its embedding matrix) is compared with the one the
adapter was trained on: a mismatch is an :class:`AdapterError`, not a silently wrong
model.

Shipped adapters live beside this file (``memagent-smollm2``: SmolLM2-135M-Instruct
trained as a free-text MemAgent memory writer; see the lc-train RL guide).

Example:
    >>> from lc_agents.adapters import available_adapters, merge_adapter
    >>> "memagent-smollm2" in available_adapters()  # doctest: +SKIP
    True
    >>> from lc_agents.models import load_model
    >>> model, tok = load_model("smollm2-135m-instruct")  # doctest: +SKIP
    >>> merge_adapter(model, "memagent-smollm2")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
from typing import Any

from lc_agents.errors import AgentError

__all__ = [
    "ADAPTER_FORMAT",
    "AdapterError",
    "adapter_base_model",
    "adapter_memagent_config",
    "adapter_path",
    "available_adapters",
    "load_adapter",
    "merge_adapter",
    "model_fingerprint",
    "save_adapter",
]

ADAPTER_FORMAT = "lc-lora-1"
"""Version tag written into every ``adapter.json``."""

_HERE = pathlib.Path(__file__).resolve().parent
_CONFIG = "adapter.json"
_WEIGHTS = "adapter.safetensors"
_PEFT_KEY = re.compile(r"^(?:base_model\.model\.)?(.+)\.lora_([AB])(?:\.[^.]+)?\.weight$")


class AdapterError(AgentError, ValueError):
    """An adapter is missing, malformed, or was trained on another base model."""


def available_adapters() -> list[str]:
    """Names of the adapters shipped with lc-agents."""
    return sorted(p.name for p in _HERE.iterdir() if (p / _CONFIG).is_file())


def adapter_path(adapter: str | os.PathLike[str]) -> pathlib.Path:
    """Folder of ``adapter``: a shipped adapter's name, or a path to an adapter folder.

    Raises:
        AdapterError: no such adapter.
    """
    if isinstance(adapter, str) and (_HERE / adapter / _CONFIG).is_file():
        return _HERE / adapter
    path = pathlib.Path(adapter)
    if (path / _CONFIG).is_file():
        return path
    raise AdapterError(
        f"no adapter {str(adapter)!r}: not a shipped adapter ({available_adapters()}) "
        f"nor a folder holding {_CONFIG}"
    )


def model_fingerprint(model: Any) -> str:
    """A short hash identifying a base model: architecture sizes + embedding checksum.

    The checksum reads the input-embedding matrix rounded to bfloat16, so the same
    weights loaded in float32 or bfloat16 give the same fingerprint. Compute it on the
    base model (before merging any adapter).
    """
    import torch

    cfg = model.config
    sizes = {
        k: getattr(cfg, k, None)
        for k in (
            "model_type",
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
        )
    }
    h = hashlib.sha256(json.dumps(sizes, sort_keys=True).encode())
    emb = model.get_input_embeddings().weight.detach()
    h.update(emb.to(torch.bfloat16).view(torch.int16).cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def _lora_pairs(model: Any) -> dict[str, dict[str, Any]]:
    """``{module: {"A": tensor, "B": tensor}}`` from a peft LoRA model's parameters."""
    pairs: dict[str, dict[str, Any]] = {}
    for name, param in model.named_parameters():
        m = _PEFT_KEY.match(name)
        if m is not None:
            pairs.setdefault(m.group(1), {})[m.group(2)] = param.detach()
    return pairs


def save_adapter(
    model: Any,
    directory: str | os.PathLike[str],
    *,
    description: str = "",
    base_model: str = "",
    extra: dict[str, Any] | None = None,
    dtype: str = "float16",
) -> pathlib.Path:
    """Write a peft LoRA model's adapter in the lc-agents format (no peft needed here).

    Args:
        model: a ``peft`` LoRA model (one adapter; its ``peft_config`` gives rank, alpha).
        directory: output folder (created).
        description: one line saying what the adapter does.
        base_model: a name for the base model (informational).
        extra: more JSON-serializable facts (training settings, results).
        dtype: storage dtype of the LoRA tensors (``"float16"`` or ``"float32"``).

    Returns:
        The folder written.
    """
    import torch
    from safetensors.torch import save_file

    pairs = _lora_pairs(model)
    if not pairs:
        raise AdapterError("the model has no LoRA parameters (expected a peft LoRA model)")
    if any(set(p) != {"A", "B"} for p in pairs.values()):
        raise AdapterError("every LoRA module needs both lora_A and lora_B")
    peft_cfg = next(iter(model.peft_config.values()))
    if getattr(peft_cfg, "use_rslora", False) or getattr(peft_cfg, "use_dora", False):
        raise AdapterError("rsLoRA / DoRA adapters are not supported")
    rank, alpha = int(peft_cfg.r), float(peft_cfg.lora_alpha)
    store = {"float16": torch.float16, "float32": torch.float32}[dtype]
    tensors = {}
    for module, p in pairs.items():
        tensors[f"{module}.lora_A"] = p["A"].to(store).cpu().contiguous()
        tensors[f"{module}.lora_B"] = p["B"].to(store).cpu().contiguous()
    base = model.get_base_model()
    out = pathlib.Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / _WEIGHTS))
    config = {
        "format": ADAPTER_FORMAT,
        "description": description,
        "rank": rank,
        "alpha": alpha,
        "modules": len(pairs),
        "dtype": dtype,
        "base_model": {
            "name": base_model or getattr(base.config, "_name_or_path", ""),
            "fingerprint": _fingerprint_unmerged(base, pairs),
        },
        "extra": extra or {},
    }
    (out / _CONFIG).write_text(json.dumps(config, indent=1) + "\n")
    return out


def _fingerprint_unmerged(base: Any, pairs: dict[str, Any]) -> str:
    """Fingerprint of the base under a peft model (its embeddings are never adapted)."""
    if any(m.endswith("embed_tokens") for m in pairs):
        raise AdapterError("adapters on the embedding matrix are not supported")
    return model_fingerprint(base)


def _read_config(path: pathlib.Path) -> dict[str, Any]:
    try:
        config = json.loads((path / _CONFIG).read_text())
    except json.JSONDecodeError as exc:
        raise AdapterError(f"{path / _CONFIG} is not valid JSON: {exc}") from exc
    if config.get("format") != ADAPTER_FORMAT:
        raise AdapterError(
            f"{path / _CONFIG}: format {config.get('format')!r}, expected {ADAPTER_FORMAT!r}"
        )
    return config


def adapter_base_model(adapter: str | os.PathLike[str]) -> str | None:
    """The name of the model an adapter was trained on, as it recorded it (or ``None``).

    >>> adapter_base_model("memagent-smollm2")
    'smollm2-135m-instruct'
    """
    name = _read_config(adapter_path(adapter)).get("base_model", {}).get("name")
    return str(name) if name else None


def adapter_memagent_config(adapter: str | os.PathLike[str]) -> Any:
    """The :class:`~lc_agents.memagent.MemAgentConfig` a MemAgent adapter was trained for.

    A memory-writer adapter records its ``chunk_tokens`` and ``memory_tokens`` in
    ``adapter.json`` (``extra``); the agent must prompt it the same way: free text
    (:meth:`~lc_agents.memagent.MemAgentConfig.plain`) at those sizes.

    Raises:
        AdapterError: no such adapter, or it records no MemAgent sizes.
    """
    from lc_agents.memagent import MemAgentConfig

    path = adapter_path(adapter)
    extra = _read_config(path).get("extra", {})
    sizes = {k: extra.get(k) for k in ("chunk_tokens", "memory_tokens")}
    if not all(isinstance(v, int) and v > 0 for v in sizes.values()):
        raise AdapterError(
            f"adapter {str(adapter)!r} records no MemAgent sizes (extra.chunk_tokens and "
            f"extra.memory_tokens in {_CONFIG}); it is not a MemAgent memory-writer adapter"
        )
    return MemAgentConfig.plain(**sizes)


def load_adapter(adapter: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(config, tensors)`` of an adapter (a shipped name or a folder).

    Raises:
        AdapterError: missing files, unknown format, or unpaired tensors.
    """
    from safetensors.torch import load_file

    path = adapter_path(adapter)
    config = _read_config(path)
    if not (path / _WEIGHTS).is_file():
        raise AdapterError(f"adapter {str(path)!r} has no {_WEIGHTS}")
    tensors = load_file(str(path / _WEIGHTS))
    return config, tensors


def merge_adapter(
    model: Any, adapter: str | os.PathLike[str], *, check_fingerprint: bool = True
) -> Any:
    """Merge a LoRA adapter into ``model``'s weights in place: ``W += (alpha/r) B @ A``.

    Args:
        model: the base model (not yet merged), e.g. from :func:`lc_agents.models.load_model`.
        adapter: a shipped adapter name (see :func:`available_adapters`) or a folder.
        check_fingerprint: compare :func:`model_fingerprint` with the adapter's base.

    Returns:
        ``model`` (merged, same object).

    Raises:
        AdapterError: fingerprint mismatch, or an adapted module missing from the model or
            of the wrong shape.
    """
    import torch

    config, tensors = load_adapter(adapter)
    if check_fingerprint:
        want = config.get("base_model", {}).get("fingerprint")
        have = model_fingerprint(model)
        if want != have:
            raise AdapterError(
                f"adapter {str(adapter)!r} was trained on base model "
                f"{config.get('base_model', {}).get('name')!r} (fingerprint {want}), but the "
                f"loaded model's fingerprint is {have}; load the matching base model "
                "(the embedded SmolLM2-135M-Instruct for the shipped adapters)"
            )
    scaling = float(config["alpha"]) / float(config["rank"])
    modules = dict(model.named_modules())
    names = sorted({k.rsplit(".", 1)[0] for k in tensors})
    with torch.no_grad():
        for name in names:
            a, b = tensors.get(f"{name}.lora_A"), tensors.get(f"{name}.lora_B")
            if a is None or b is None:
                raise AdapterError(f"adapter tensors for {name!r} are unpaired")
            layer = modules.get(name)
            weight = getattr(layer, "weight", None)
            if weight is None:
                raise AdapterError(f"the model has no linear layer {name!r} to adapt")
            delta = (b.to(torch.float32) @ a.to(torch.float32)) * scaling
            if tuple(delta.shape) != tuple(weight.shape):
                raise AdapterError(
                    f"adapter delta for {name!r} has shape {tuple(delta.shape)}, the "
                    f"layer's weight {tuple(weight.shape)}"
                )
            weight.add_(delta.to(weight.device, weight.dtype))
    return model
