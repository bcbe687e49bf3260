"""Score-mode MemAgent: question-likelihood scores and the key-aware memory they select."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from lc_agents.memagent import MemAgent, MemAgentConfig
from lc_agents.memagent.scoring import NOTE_PREFIX, QUESTION_PREFIX, QuestionScorer

QUESTION = "What is the special magic number for river?"


def _logp_unbatched(model, tok, context: str, target: str) -> float:
    """log p(target | context) from one unpadded forward pass: the reference."""
    c = tok.encode(context, add_special_tokens=False)
    t = tok.encode(target, add_special_tokens=False)
    ids = torch.tensor([c + t])
    with torch.inference_mode():
        logp = model(ids).logits[0].float().log_softmax(-1)
    return sum(float(logp[len(c) - 1 + j, t[j]]) for j in range(len(t)))


def test_batched_scores_equal_the_unpadded_pmi(tiny_backend) -> None:
    """Left-padded batches give log p(q|note s) - log p(q|note) of one-by-one passes."""
    model, tok = tiny_backend.model, tiny_backend.tokenizer
    sentences = [
        "The river number is 5471234.",
        "Quiet golden stone of the ancient empire and the city by the shore.",
        "Apple.",
    ]
    scorer = QuestionScorer(model, tok, batch_size=2)  # two batches, one padded
    got = scorer.score(QUESTION, sentences)
    target = QUESTION_PREFIX + QUESTION
    base = _logp_unbatched(model, tok, NOTE_PREFIX, target)
    want = [_logp_unbatched(model, tok, f"{NOTE_PREFIX} {s}", target) - base for s in sentences]
    assert got == pytest.approx(want, abs=1e-3)
    assert len(set(round(g, 4) for g in got)) == 3  # distinct sentences, distinct scores


class _Wrapped(torch.nn.Module):
    """The tiny model behind a ``forward`` that records ``logits_to_keep``."""

    def __init__(self, model: torch.nn.Module, seen: list[int]) -> None:
        super().__init__()
        self.inner, self.seen = model, seen

    def forward(self, input_ids, attention_mask=None, position_ids=None, logits_to_keep=0):
        self.seen.append(logits_to_keep)
        return self.inner(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            logits_to_keep=logits_to_keep,
        )


class _Hiding(torch.nn.Module):
    """The tiny model behind a ``forward(**kw)``: no ``logits_to_keep`` in its signature."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.inner = model

    def forward(self, **kw):
        assert "logits_to_keep" not in kw
        return self.inner(**kw)


def test_scores_ask_only_for_the_question_logits(tiny_backend) -> None:
    """The model computes logits for the question line's positions only; the scores equal
    those of a model that returns every position's logits."""
    model, tok = tiny_backend.model, tiny_backend.tokenizer
    sentences = ["The river number is 5471234.", "A city by the shore, quiet and golden.", "Apple."]
    seen: list[int] = []
    kept = QuestionScorer(_Wrapped(model, seen), tok, batch_size=2).score(QUESTION, sentences)
    full = QuestionScorer(_Hiding(model), tok, batch_size=2).score(QUESTION, sentences)
    n = len(tok.encode(QUESTION_PREFIX + QUESTION, add_special_tokens=False))
    assert seen == [n + 1] * 3  # baseline, then two batches
    assert kept == pytest.approx(full, abs=1e-5)


def test_scores_are_cached_per_question_and_sentence(tiny_backend) -> None:
    calls = []
    model = tiny_backend.model

    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, **kw):
            calls.append(kw["input_ids"].shape[0])
            return self.inner(**kw)

    scorer = QuestionScorer(Counting(), tiny_backend.tokenizer)
    first = scorer.score(QUESTION, ["A river.", "A city."])
    assert calls == [1, 2]  # baseline, then both sentences in one batch
    assert scorer.score(QUESTION, [" A city. ", "A river."]) == [first[1], first[0]]
    assert calls == [1, 2]  # cached (surrounding whitespace ignored)
    scorer.score("Another question?", ["A river."])
    assert calls == [1, 2, 1, 1]
    scorer.clear()
    scorer.score(QUESTION, ["A river."])
    assert len(calls) == 6
    with pytest.raises(ValueError, match="batch_size"):
        QuestionScorer(model, tiny_backend.tokenizer, batch_size=0)


class _KeyScorer:
    """Stub scorer: a sentence scores the sum of the weights of the words it contains."""

    def __init__(self, weights: dict[str, float]):
        self.weights = weights
        self.cleared = 0

    def score(self, question, sentences):
        return [sum(w for k, w in self.weights.items() if k in s) for s in sentences]

    def clear(self):
        self.cleared += 1


def _agent(tiny_backend, weights, **cfg) -> MemAgent:
    config = replace(MemAgentConfig(chunk_tokens=40, memory_tokens=40, min_overlap=0), **cfg)
    agent = MemAgent(tiny_backend, config)
    assert agent._scorer is not None  # score mode is the default with a local backend
    agent._scorer = _KeyScorer(weights)  # type: ignore[assignment]
    return agent


def test_select_keeps_the_best_sentences_in_budget_best_first(tiny_backend) -> None:
    tok = tiny_backend.tokenizer
    agent = _agent(tiny_backend, {"river": 10.0, "city": 5.0, "stone": 1.0})
    chunk = tok.encode(
        " The city number is 111. The river number is 222. A stone. The apple.",
        add_special_tokens=False,
    )
    memory, kept = agent.update(QUESTION, "", chunk)
    lines = memory.split("\n")
    assert not kept
    assert lines[0] == "The river number is 222."  # best first
    assert lines[1] == "The city number is 111."
    assert len(tok.encode(memory, add_special_tokens=False)) <= 40
    # an old memory line outscoring the new chunk survives; a worse one is displaced
    memory2, kept2 = agent.update(
        QUESTION, memory, tok.encode(" A stone.", add_special_tokens=False)
    )
    assert memory2.split("\n")[:2] == lines[:2]
    assert kept2 == (memory2 == memory)
    assert agent.answer(QUESTION, memory) == "The river number is 222."


def test_budget_evicts_the_lowest_scores(tiny_backend) -> None:
    tok = tiny_backend.tokenizer
    agent = _agent(tiny_backend, {"river": 10.0, "city": 5.0}, memory_tokens=12)
    one = "The river number is 222."
    assert len(tok.encode(one, add_special_tokens=False)) <= 12
    chunk = tok.encode(" The city number is 111. " + one, add_special_tokens=False)
    memory, _ = agent.update(QUESTION, "", chunk)
    assert memory == one
    # a single over-budget sentence is cut to the budget, never dropped
    agent = _agent(tiny_backend, {"river": 10.0}, memory_tokens=3)
    memory, _ = agent.update(QUESTION, "", chunk)
    assert memory
    assert len(tok.encode(memory, add_special_tokens=False)) <= 3


def test_multikey_document_answers_the_key_not_the_distractors(tiny_backend) -> None:
    """End to end: the target needle comes first and distractors arrive later."""
    tok = tiny_backend.tokenizer
    filler = " Quiet golden stone of the city." * 12
    doc = (
        filler
        + " The special magic number for river is 7777777."
        + filler
        + " The special magic number for copper is 1111111."
        + filler
        + " The special magic number for shore is 2222222."
        + filler
    )
    weights = {"magic": 3.0, "river": 20.0}
    agent = _agent(tiny_backend, weights, memory_tokens=24)
    result = agent.run(doc, QUESTION)
    assert agent._scorer.cleared == 1  # type: ignore[union-attr]
    assert result.n_chunks >= 4
    assert result.answer == "The special magic number for river is 7777777."
    # ranking by a key-blind score keeps the last distractor instead: the key decides
    blind = _agent(tiny_backend, {"magic": 3.0, "2222222": 0.5}, memory_tokens=24)
    assert "2222222" in blind.run(doc, QUESTION).answer
    assert len(tok.encode(result.memory, add_special_tokens=False)) <= 24


def test_score_mode_memory_is_verbatim_sentences_and_resumes(
    tiny_backend, document, tmp_path
) -> None:
    """With the real (random) model scorer: invariants of every step, checkpoint resume."""
    tok = tiny_backend.tokenizer
    cfg = MemAgentConfig(chunk_tokens=48, memory_tokens=20, min_overlap=0)
    agent = MemAgent(tiny_backend, cfg)
    full = agent.run(document, QUESTION)
    chunks = [
        tok.decode(c)
        for c in (lambda ids: [ids[i : i + 48] for i in range(0, len(ids), 48)])(
            tok.encode(document, add_special_tokens=False)
        )
    ]
    previous = ""
    for step, text in zip(full.trace, chunks, strict=True):
        assert len(tok.encode(step.memory, add_special_tokens=False)) <= 20
        for line in step.memory.split("\n"):
            assert line in text or line in previous.split("\n") or line in text.strip(), line
        scores = agent.scores(QUESTION, step.memory.split("\n"))
        assert scores == sorted(scores, reverse=True)  # best first
        previous = step.memory
    assert all(math.isfinite(s) for s in agent.scores(QUESTION, ["x"]))

    ckpt = tmp_path / "run.json"

    def stop(step):
        if step.chunk_index == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        agent.run(document, QUESTION, checkpoint=ckpt, on_step=stop)
    resumed = agent.run(document, QUESTION, checkpoint=ckpt)
    assert resumed.resumed_from == 2
    assert [s.memory for s in resumed.trace] == [s.memory for s in full.trace]
    assert resumed.answer == full.answer


def test_memory_mode_is_validated_and_generate_mode_does_not_score(tiny_backend) -> None:
    with pytest.raises(ValueError, match="memory_mode"):
        MemAgentConfig(memory_mode="vote")
    assert MemAgentConfig.plain().memory_mode == "generate"
    assert MemAgentConfig.paper().memory_mode == "generate"
    agent = MemAgent(tiny_backend, replace(MemAgentConfig(), memory_mode="generate"))
    with pytest.raises(ValueError, match="does not score"):
        agent.scores(QUESTION, ["x"])
    assert MemAgent(tiny_backend, MemAgentConfig.plain())._scorer is None


@pytest.mark.model
def test_smollm2_scores_the_asked_key_above_distractor_needles() -> None:
    """The embedded 135M model: the needle with the asked key wins by a wide margin."""
    from lc_agents.backends.local import LocalBackend

    torch.set_num_threads(1)
    backend = LocalBackend("smollm2-135m-instruct")
    scorer = QuestionScorer(backend.model, backend.tokenizer)
    keys = {
        "steady-galaxy": "8749931",
        "gentle-monastery": "6921759",
        "huge-canyon": "5081235",
        "rude-carriage": "6456336",
    }
    needles = [f"One of the special magic numbers for {k} is: {v}." for k, v in keys.items()]
    essay = "The best way to learn to write is to write a great deal and read what you wrote."
    for key in keys:
        question = f"What is the special magic number for {key} mentioned in the provided text?"
        scores = scorer.score(question, [*needles, essay])
        ranked = sorted(zip(scores, [*keys, "essay"], strict=True), reverse=True)
        assert ranked[0][1] == key, ranked
        assert ranked[0][0] - ranked[1][0] > 5.0, ranked  # nats
