"""ContextNav end to end on a real LanceDB pool (hashing embedder, scripted ICL model).

The scripted model copies the label of the shot closest to the query (the last one),
the behaviour small models show in in-context classification; so the accuracy it gets
is the share of contexts whose closest shot is correctly labelled and aligned.
"""

from __future__ import annotations

import re
import zlib

import numpy as np
import pytest

from lc_agents.contextnav import (
    CachedChat,
    ContextItem,
    ContextNav,
    ContextNavConfig,
    ExamplePool,
    IclAnswerer,
    ItemEncoder,
    default_grammar,
    random_shots,
    similarity_shots,
)
from lc_agents.retrieval import HashingEmbedder
from lc_evals.icl import POOL_LABELS, make_icl_pool, make_pool_queries
from lc_evals.icl.pool import INSTRUCTION


class CopyLastLabel:
    """Replies with the label of the last shot in the prompt."""

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, messages, **options) -> str:
        self.calls += 1
        labels = re.findall(r"Topic: (\S+)", messages[-1]["content"])
        return labels[-1] if labels else "none"


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    data = make_icl_pool(240, noise_rate=0.25, misaligned_rate=0.2, seed=0)
    path = tmp_path_factory.mktemp("pool")
    pool = ExamplePool.open(path, HashingEmbedder(dim=256))
    items = [ContextItem(e.id, e.text, e.label, metadata={"kind": e.kind}) for e in data.examples]
    report = pool.add(items)
    assert report.added == 240
    queries = [ContextItem(q.id, q.text, q.label) for q in make_pool_queries(data, 30, seed=1)]
    kinds = {e.id: e.kind for e in data.examples}
    return pool, path, queries, kinds, items


def test_contextnav_drops_planted_noise(planted) -> None:
    pool, _, queries, kinds, _ = planted
    nav = ContextNav(pool, ContextNavConfig(shots=4))
    nav_kinds, sim_kinds = [], []
    for q in queries:
        res = nav.build(q, label_space=POOL_LABELS)
        assert len(res.shots) == 4
        assert res.chain == default_grammar().plan()
        nav_kinds += [kinds[c.item.id] for c in res.shots]
        sim_kinds += [kinds[it.id] for it in similarity_shots(pool, q, 4)]
    bad = {"noisy", "misaligned_format", "misaligned_labels"}
    nav_bad = sum(k in bad for k in nav_kinds)
    sim_bad = sum(k in bad for k in sim_kinds)
    assert sum(k.startswith("misaligned") for k in nav_kinds) == 0
    assert sim_bad >= 20  # planted noise does reach plain similarity top-k
    assert nav_bad <= sim_bad / 5


def test_accuracy_with_a_label_copying_model(planted) -> None:
    pool, _, queries, _, items = planted
    answerer = IclAnswerer(CopyLastLabel(), INSTRUCTION, POOL_LABELS)
    nav = ContextNav(pool, ContextNavConfig(shots=4))
    acc_nav = np.mean([answerer.correct(q, nav.build(q, POOL_LABELS).examples) for q in queries])
    acc_sim = np.mean([answerer.correct(q, similarity_shots(pool, q, 4)) for q in queries])
    acc_rand = np.mean(
        [answerer.correct(q, random_shots(items, 4, seed=0, query_id=q.id)) for q in queries]
    )
    assert acc_nav >= 0.9
    assert acc_nav > acc_sim + 0.15
    assert acc_rand < 0.5


def test_optimize_learns_from_feedback(planted) -> None:
    pool, _, queries, _, _ = planted
    nav = ContextNav(pool, ContextNavConfig(shots=4, refine_budget=4))
    start = ("retrieve", "select_top")  # plain similarity: hurt by noise
    answerer = IclAnswerer(CopyLastLabel(), INSTRUCTION, POOL_LABELS)
    steps = nav.graph.refine(
        lambda chain: [
            answerer.correct(q, nav.run_chain(chain, q, POOL_LABELS).examples) for q in queries[:12]
        ],
        budget=4,
        start=start,
    )
    assert steps[0].chain == start
    best = nav.graph.plan()
    assert nav.graph.estimate(best) >= max(s.accuracy for s in steps) - 1e-9
    assert nav.graph.estimate(best) > steps[0].accuracy
    # the built-in optimize runs the same loop from the current plan
    more = nav.optimize(queries[12:20], answerer, POOL_LABELS, budget=2)
    assert len(more) == 2
    with pytest.raises(ValueError, match="labelled"):
        nav.optimize([ContextItem("x", "text")], answerer)


def test_retrieval_widens_when_filters_leave_too_few(planted) -> None:
    pool, _, queries, _, _ = planted
    nav = ContextNav(pool, ContextNavConfig(shots=4, candidates=4, max_candidates=64))
    res = nav.build(queries[0], label_space=POOL_LABELS)
    assert len(res.shots) == 4
    assert res.k > 4
    assert any(line.startswith("widen") for line in res.trace)
    with pytest.raises(ValueError, match="not accepted"):
        nav.run_chain(("select_top",), queries[0])


def test_pool_reopens_from_disk(planted) -> None:
    pool, path, queries, _, _ = planted
    again = ExamplePool.open(path, HashingEmbedder(dim=256))
    assert len(again) == 240
    a = [c.item.id for c in pool.search(queries[0], 5)]
    b = again.search(queries[0], 5)
    assert [c.item.id for c in b] == a
    assert all(c.item.label is not None for c in b)
    assert np.allclose(np.linalg.norm(np.stack([c.vector for c in b]), axis=1), 1.0, atol=1e-5)


class PathImages:
    """A stand-in image embedder (no image model ships with lc): a fixed unit vector
    per image file name, so two items showing "cat.png" share their image part."""

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed_images(self, images):
        out = []
        for p in images:
            # crc32, not hash(): str hashes change with each process (PYTHONHASHSEED)
            rng = np.random.default_rng(zlib.crc32(str(p).rsplit("/", 1)[-1].encode()))
            v = rng.standard_normal(self.dim)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


def test_image_path_goes_through_the_image_embedder(tmp_path) -> None:
    text = HashingEmbedder(dim=64)
    enc = ItemEncoder(text, PathImages(64), image_weight=0.5)
    plain = ContextItem("a", "a photo")
    with_img = ContextItem("b", "a photo", image_path="/x/cat.png")
    v = enc.encode([plain, with_img])
    t = text.embed_texts(["a photo"])[0]
    img = PathImages(64).embed_images(["cat.png"])[0]
    expect = 0.5 * t + 0.5 * img
    assert np.allclose(v[0], t, atol=1e-6)
    assert np.allclose(v[1], expect / np.linalg.norm(expect), atol=1e-6)
    # retrieval by image: same picture, different caption, wins
    pool = ExamplePool.open(tmp_path, text, image_embedder=PathImages(64))
    pool.add(
        [
            ContextItem("1", "a photo", "dog", image_path="/d/dog.png"),
            ContextItem("2", "a picture", "cat", image_path="/d/cat.png"),
        ]
    )
    hit = pool.search(ContextItem("q", "a photo", image_path="/q/cat.png"), 1)[0]
    assert hit.item.label == "cat"
    with pytest.raises(ValueError, match="share"):
        ItemEncoder(text, PathImages(32)).encode([with_img])


def test_answerer_parsing_and_cache(tmp_path) -> None:
    ans = IclAnswerer(CopyLastLabel(), INSTRUCTION, POOL_LABELS)
    assert ans.parse("Topic: Billing, I think") == "billing"
    assert ans.parse("no idea") is None
    msgs = ans.prompt(
        ContextItem("q", "my box is late"), [ContextItem("s", "late parcel", "shipping")]
    )
    assert (
        msgs[1]["content"]
        == "Message: late parcel\nTopic: shipping\n\nMessage: my box is late\nTopic:"
    )
    model = CopyLastLabel()
    cached = CachedChat(model, tmp_path / "c.jsonl", model_key="copy")
    for _ in range(3):
        assert cached.chat(msgs) == "shipping"
    assert (model.calls, cached.hits, cached.misses) == (1, 2, 1)
    replay = CachedChat(None, tmp_path / "c.jsonl", model_key="copy")
    assert replay.chat(msgs) == "shipping"
    with pytest.raises(KeyError):
        replay.chat([{"role": "user", "content": "new"}])
    assert CachedChat(None, tmp_path / "c.jsonl", model_key="other").key(msgs, {}) != replay.key(
        msgs, {}
    )


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="candidates"):
        ContextNavConfig(shots=5, candidates=3)
    with pytest.raises(ValueError, match="consistency_threshold"):
        ContextNavConfig(consistency_threshold=1.5)


def test_label_alignment_without_a_label_space_keeps_unaligned_queries_served(tmp_path) -> None:
    # Statement examples, a question query, no label space given: no candidate shares the
    # query's structure, so none can tell the label space. align_labels must then leave
    # the candidates alone (label space unknown), not drop them all as outside an empty one.
    pool = ExamplePool.open(tmp_path, HashingEmbedder(dim=128))
    pool.add(
        [
            ContextItem(f"m{i}", f"Return the {w} of x.", "math")
            for i, w in enumerate(
                ["sine", "cosine", "square root", "logarithm", "tangent", "floor"]
            )
        ]
        + [
            ContextItem(f"t{i}", f"Return the {w} of the string.", "text")
            for i, w in enumerate(["length", "lowercase copy", "title case", "first word"])
        ]
    )
    nav = ContextNav(pool, ContextNavConfig(shots=2, candidates=4, max_candidates=10))
    query = ContextItem("q", "What is the square root of x?")
    res = nav.run_chain(["retrieve", "align_labels", "select_top"], query, label_space=None)
    assert [s.item.label for s in res.shots] == ["math", "math"]
    assert "align_labels: 4 -> 4" in res.trace
    # a given label space still filters, and an inferred one still does when examples align
    given = nav.run_chain(["retrieve", "align_labels", "select_top"], query, label_space=["text"])
    assert {s.item.label for s in given.shots} == {"text"}
    aligned = ContextItem("q2", "Return the sine of the string.")
    kept = nav.run_chain(["retrieve", "align_labels", "select_top"], aligned, label_space=None)
    assert len(kept.shots) == 2
