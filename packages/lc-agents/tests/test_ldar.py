"""LDAR: profile features, bands, the head, training against a known best band, I/O,
and offline labelling with a scripted reader over lc-evals distractor QA."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lc_agents.contextnav import CachedChat
from lc_agents.ldar import (
    Band,
    LdarConfig,
    LdarExample,
    LdarHead,
    LdarRetriever,
    QaQuestion,
    QaReader,
    default_bands,
    first_answer_correct,
    label_examples,
    load_examples,
    save_examples,
    similarity_features,
    sort_similarities,
)
from lc_agents.retrieval import HashingEmbedder

torch.set_num_threads(1)


def test_features_closed_form() -> None:
    s = np.array([0.9, 0.6, 0.6, 0.1])
    f = similarity_features(s)
    assert f.shape == (4, 11)
    mean, std = s.mean(), s.std()
    np.testing.assert_allclose(f[:, 0], s, rtol=1e-6)
    np.testing.assert_allclose(f[:, 1], s - 0.9, atol=1e-6)
    np.testing.assert_allclose(f[:, 2], (s - mean) / (std + 1e-6), rtol=1e-5)
    np.testing.assert_allclose(f[:, 3], [0, 0.3, 0, 0.5], atol=1e-6)
    np.testing.assert_allclose(f[:, 4], [0.3, 0, 0.5, 0], atol=1e-6)
    np.testing.assert_allclose(f[:, 5], [0, 1 / 3, 2 / 3, 1], atol=1e-6)
    np.testing.assert_allclose(f[:, 10], 0.3, atol=1e-6)
    with pytest.raises(ValueError, match="sorted"):
        similarity_features([0.1, 0.5])
    sims, order = sort_similarities([0.2, 0.9, 0.2, 0.5])
    assert order.tolist() == [1, 3, 0, 2]
    assert sims.tolist() == [0.9, 0.5, 0.2, 0.2]
    with pytest.raises(ValueError, match="finite"):
        sort_similarities([0.1, float("nan")])


def test_bands() -> None:
    bands = default_bands(8, max_skip=1, max_width=3)
    assert Band(0, 8) in bands  # full context
    assert Band(1, 2) in bands
    assert len(bands) == 8 + 3
    assert Band(1, 4).ranks(3) == [1, 2]
    assert not Band(0, 5).fits(4)
    with pytest.raises(ValueError, match="start < end"):
        Band(2, 2)


def test_head_masks_bands_past_the_list() -> None:
    bands = default_bands(4)
    head = LdarHead(bands)
    feats = torch.zeros(2, 4, 11)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    logits = head(feats, mask)
    fits = torch.tensor([[b.end <= n for b in bands] for n in (4, 2)])
    assert torch.isfinite(logits[fits]).all()
    assert torch.isinf(logits[~fits]).all()
    with pytest.raises(ValueError, match="features"):
        head(torch.zeros(2, 4, 3), mask)


def synthetic(n_items: int, seed: int, bands) -> list[LdarExample]:
    """Two regimes told apart only by the profile: a clear winner (the top passage is
    right and enough), or a flat top pair (the top passage is a near-miss that distracts;
    only the band holding rank 1 alone is right). No fixed band is right in both."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_items):
        trap = bool(rng.random() < 0.5)
        rest = np.sort(rng.uniform(0.1, 0.4, 6))[::-1]
        top = rng.uniform(0.6, 0.8)
        sims = (
            np.concatenate([[top, top - 0.01], rest])
            if trap
            else np.concatenate([[top, top - 0.25], rest])
        )
        sims = np.sort(sims)[::-1]
        correct = np.array(
            [float(b == Band(1, 2)) if trap else float(b.start == 0 and b.end <= 2) for b in bands]
        )
        tokens = np.array([10.0 * (b.end - b.start) for b in bands])
        out.append(LdarExample(f"s{i}", sims, np.arange(8), correct, tokens))
    return out


def test_training_learns_the_profile_dependent_band(tmp_path) -> None:
    bands = default_bands(8)
    train, test = synthetic(160, 0, bands), synthetic(80, 1, bands)
    r = LdarRetriever(bands, LdarConfig(epochs=150, seed=0))
    losses = r.fit(train)
    assert losses[-1] < losses[0]
    value = r.policy_value(test)
    best_fixed = max(np.mean([e.correct[a] for e in test]) for a in range(len(bands)))
    assert best_fixed < 0.6
    assert value["accuracy"] >= 0.95
    # and it uses fewer tokens than full context (80 tokens)
    assert value["tokens"] <= 20
    # save / load gives the same policy
    r.save(tmp_path / "ldar.pt")
    again = LdarRetriever.load(tmp_path / "ldar.pt")
    np.testing.assert_allclose(
        again.band_probabilities(test[0].similarities),
        r.band_probabilities(test[0].similarities),
        rtol=1e-6,
    )
    torch.save({"format": "other"}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="not an LDAR checkpoint"):
        LdarRetriever.load(tmp_path / "bad.pt")


def test_token_penalty_prefers_the_shortest_right_band() -> None:
    bands = default_bands(6)
    rng = np.random.default_rng(0)
    ex = [
        LdarExample(
            str(i),
            np.sort(rng.uniform(0, 1, 6))[::-1],
            np.arange(6),
            np.ones(len(bands)),
            np.array([10.0 * (b.end - b.start) for b in bands]),
        )
        for i in range(40)
    ]
    r = LdarRetriever(bands, LdarConfig(epochs=100, token_penalty=0.5))
    r.fit(ex)
    assert all(r.choose(e.similarities).end - r.choose(e.similarities).start == 1 for e in ex)


class ScriptedReader:
    """Right when the gold passage is present and no near-miss passage is: a reader that
    the near-miss distractors confuse."""

    def __init__(self, gold: dict[str, str], near: dict[str, set[str]]) -> None:
        self.gold, self.near, self.calls = gold, near, 0

    def chat(self, messages, **options) -> str:
        self.calls += 1
        user = messages[-1]["content"]
        q = user.rsplit("Question: ", 1)[1]
        gold_in = self.gold[q] in user
        near_in = any(p in user for p in self.near[q])
        return "1234" if not gold_in or near_in else "answer"


def test_labelling_with_a_scripted_reader_and_cache(tmp_path) -> None:
    import lc_evals

    items = lc_evals.generate(
        "distractor_qa", n=6, length=10_000, seed=3, distractors=2, irrelevant=3
    )
    qs = [QaQuestion.from_task_item(it) for it in items]
    gold = {it.question: it.metadata["passages"][it.metadata["gold_index"]] for it in items}
    near = {
        it.question: {
            p
            for p, k in zip(it.metadata["passages"], it.metadata["kinds"], strict=True)
            if k == "near_miss"
        }
        for it in items
    }
    model = ScriptedReader(gold, near)
    reader = QaReader(
        CachedChat(model, tmp_path / "cache.jsonl", model_key="scripted"),
        correct_fn=lambda reply, answers: reply == "answer",
    )
    bands = default_bands(6)
    emb = HashingEmbedder(dim=256)
    ex = label_examples(qs, emb, reader, bands)
    assert model.calls == 6 * len(bands)
    for e, q in zip(ex, qs, strict=True):
        for a, b in enumerate(bands):
            chosen = [q.passages[int(e.order[r])] for r in b.ranks(6)]
            expect = gold[q.question] in chosen and not (near[q.question] & set(chosen))
            assert e.correct[a] == float(expect)
            assert e.tokens[a] == reader.passage_tokens(chosen)
    assert np.all(np.diff(ex[0].similarities) <= 0)
    again = label_examples(qs, emb, reader, bands)
    assert model.calls == 6 * len(bands)  # every reply came from the cache
    save_examples(ex, tmp_path / "ex.jsonl")
    back = load_examples(tmp_path / "ex.jsonl")
    assert [b.to_dict() for b in back] == [a.to_dict() for a in again]


def test_answer_check_and_config() -> None:
    assert first_answer_correct("It is 4821.", ["4821"])
    assert not first_answer_correct("7730, then 4821", ["4821"])
    assert first_answer_correct("The Harbor", ["harbor"])
    with pytest.raises(ValueError, match="token_penalty"):
        LdarConfig(token_penalty=-1)
    with pytest.raises(ValueError, match="hidden"):
        LdarConfig(hidden=33, heads=2)
