"""MemAgent with a tiny random Llama: chunking, memory budget, trace, checkpoints."""

from __future__ import annotations

import functools
import json
import operator
from dataclasses import replace

import pytest

from lc_agents.constrained import is_span_concatenation
from lc_agents.errors import CheckpointError, InputError
from lc_agents.memagent import MemAgent, MemAgentConfig, MemAgentPrompts, split_tokens

QUESTION = "What is the special magic number for river?"


def test_split_tokens_is_exact_and_bounded() -> None:
    ids = list(range(23))
    chunks = split_tokens(ids, 5)
    assert [len(c) for c in chunks] == [5, 5, 5, 5, 3]
    assert functools.reduce(operator.iadd, chunks, []) == ids
    with pytest.raises(ValueError, match="chunk_tokens"):
        split_tokens(ids, 0)


def test_chunks_cover_the_document_token_for_token(tiny_backend, document) -> None:
    tok = tiny_backend.tokenizer
    ids = tok.encode(document, add_special_tokens=False)
    chunks = split_tokens(ids, 37)
    assert all(len(c) == 37 for c in chunks[:-1])
    assert tok.decode(functools.reduce(operator.iadd, chunks, [])) == document


def test_plain_run_holds_the_memory_budget(tiny_backend, document) -> None:
    cfg = MemAgentConfig.plain(chunk_tokens=64, memory_tokens=12)
    agent = MemAgent(tiny_backend, cfg)
    n_tokens = len(tiny_backend.tokenizer.encode(document, add_special_tokens=False))
    result = agent.run(document, QUESTION)
    assert result.n_chunks == -(-n_tokens // 64) == len(result.trace)
    assert result.document_tokens == n_tokens
    assert [s.chunk_index for s in result.trace] == list(range(result.n_chunks))
    for step in result.trace:
        assert len(tiny_backend.tokenizer.encode(step.memory, add_special_tokens=False)) <= 12
    assert result.memory == result.trace[-1].memory
    assert result.answer


def test_copy_constrained_memory_is_spans_of_chunk_and_previous_memory(
    tiny_backend, document
) -> None:
    """Every line of every memory is a substring of that chunk's text or of the old memory."""
    cfg = replace(
        MemAgentConfig(chunk_tokens=48, memory_tokens=20), max_spans=None, memory_mode="generate"
    )
    agent = MemAgent(tiny_backend, cfg)
    tok = tiny_backend.tokenizer
    chunks = split_tokens(tok.encode(document, add_special_tokens=False), 48)
    result = agent.run(document, QUESTION)
    previous = ""
    changed = 0
    for step, chunk in zip(result.trace, chunks, strict=True):
        if step.kept:
            assert step.memory == previous
        else:
            changed += 1
            text = tok.decode(chunk)
            for line in filter(None, (x.strip() for x in step.memory.split("\n"))):
                assert line in text or line in previous, (line, step)
        previous = step.memory
    assert changed > 0  # the random model did write memories


def test_copy_decoding_emits_token_spans(tiny_backend) -> None:
    """At the token level the generated memory ids are spans of the chunk ids."""
    tok = tiny_backend.tokenizer
    agent = MemAgent(
        tiny_backend,
        replace(MemAgentConfig(memory_tokens=20), max_spans=None, memory_mode="generate"),
    )
    chunk = tok.encode("The river number is 5471234. Quiet golden stone.", add_special_tokens=False)
    captured = {}
    original = tiny_backend.generate_ids

    def spy(prompt, **kw):
        out = original(prompt, **kw)
        captured["ids"], captured["constraint"] = out, kw["constraint"]
        return out

    tiny_backend.generate_ids = spy
    try:
        agent.update(QUESTION, "", chunk)
    finally:
        del tiny_backend.generate_ids
    sources = [chunk]
    assert captured["ids"]
    assert is_span_concatenation(captured["ids"], sources, agent._separator_ids())


def test_checkpoint_resumes_after_an_interruption_with_nothing_lost(
    tiny_backend, document, tmp_path
) -> None:
    cfg = MemAgentConfig.plain(chunk_tokens=64, memory_tokens=8)
    agent = MemAgent(tiny_backend, cfg)
    full = agent.run(document, QUESTION)
    assert full.n_chunks >= 3

    ckpt = tmp_path / "run.json"

    class Interrupt(Exception):
        pass

    def stop_after_two(step):
        if step.chunk_index == 1:
            raise Interrupt

    with pytest.raises(Interrupt):
        agent.run(document, QUESTION, checkpoint=ckpt, on_step=stop_after_two)
    saved = json.loads(ckpt.read_text())
    assert len(saved["trace"]) == 2  # both finished chunks were saved before the stop
    assert not list(tmp_path.glob(".*tmp"))  # no temporary files left behind

    resumed = agent.run(document, QUESTION, checkpoint=ckpt)
    assert resumed.resumed_from == 2
    assert [s.memory for s in resumed.trace] == [s.memory for s in full.trace]
    assert resumed.answer == full.answer
    assert len(json.loads(ckpt.read_text())["trace"]) == full.n_chunks


def test_checkpoint_of_another_run_is_refused(tiny_backend, document, tmp_path) -> None:
    agent = MemAgent(tiny_backend, MemAgentConfig.plain(chunk_tokens=256, memory_tokens=4))
    ckpt = tmp_path / "run.json"
    agent.run(document, QUESTION, checkpoint=ckpt)
    with pytest.raises(CheckpointError, match="different document"):
        agent.run(document, "another question?", checkpoint=ckpt)
    ckpt.write_text("{not json")
    with pytest.raises(CheckpointError, match="cannot read"):
        agent.run(document, QUESTION, checkpoint=ckpt)


def test_keep_word_keeps_the_memory() -> None:
    class Scripted:
        """A backend replying from a script: it records what it was shown."""

        supports_constraints = False

        def __init__(self, replies):
            self.replies = list(replies)
            self.prompts: list[str] = []

        def chat(self, messages, **options):
            self.prompts.append(messages[-1]["content"])
            return self.replies.pop(0)

    from transformers import AutoTokenizer  # noqa: F401  (tokenizer comes from the fixture)

    backend = Scripted(["fact A", "None.", "42"])
    tok = _WordTokenizer()
    agent = MemAgent(backend, MemAgentConfig.plain(chunk_tokens=3, memory_tokens=5), tokenizer=tok)
    result = agent.run("w1 w2 w3 w4 w5", "q?")
    assert [(s.memory, s.kept) for s in result.trace] == [("fact A", False), ("fact A", True)]
    assert result.answer == "42"
    assert "fact A" in backend.prompts[1]
    assert "fact A" in backend.prompts[2]
    assert "No notes yet." in backend.prompts[0]


class _WordTokenizer:
    """Whitespace tokenizer (ids index a growing vocabulary); enough for scripted runs."""

    def __init__(self):
        self.vocab: dict[str, int] = {}
        self.words: list[str] = []

    def encode(self, text, add_special_tokens=False):
        out = []
        for w in text.split():
            if w not in self.vocab:
                self.vocab[w] = len(self.words)
                self.words.append(w)
            out.append(self.vocab[w])
        return out

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(self.words[i] for i in ids)


def test_bad_inputs_and_configs_are_rejected(tiny_backend) -> None:
    agent = MemAgent(tiny_backend)
    with pytest.raises(InputError, match="document is empty"):
        agent.run("  \n", QUESTION)
    with pytest.raises(InputError, match="question is empty"):
        agent.run("text", " ")
    with pytest.raises(ValueError, match="chunk_tokens"):
        MemAgentConfig(chunk_tokens=0)
    with pytest.raises(ValueError, match=r"\{chunk\}"):
        MemAgentPrompts(update="{question} {memory}")
    assert MemAgentConfig.paper().chunk_tokens == 5000
    assert MemAgentConfig.paper().memory_tokens == 1024
