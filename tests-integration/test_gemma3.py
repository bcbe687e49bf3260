"""The embedded Gemma-3-270M base model loads offline and works as a language model."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.model


def test_gemma3_loads_from_its_chunk_packages_and_retrieves_a_passkey() -> None:
    import torch

    from lc_agents.models import GEMMA_MODEL, embedded_model, load_model

    model, tokenizer = load_model(GEMMA_MODEL)
    assert type(model).__name__ == "Gemma3ForCausalLM"
    assert model.config.max_position_embeddings == embedded_model(GEMMA_MODEL).context_tokens
    filler = "The grass is green. The sky is blue. The sun is yellow. Here we go. " * 12
    prompt = (
        f"{filler}The pass key is 73914. Remember it. {filler}What is the pass key? The pass key is"
    )
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    assert ids.shape[1] > 300
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=6, do_sample=False)
    assert "73914" in tokenizer.decode(out[0, ids.shape[1] :])
