"""The one ``Embedder`` protocol and the one row normalisation (``normalize_rows``).

Every embedder class in lc-agents (found by reading the source, so a new one cannot be
forgotten) satisfies :class:`lc_agents.retrieval.Embedder` at run time and returns
float32 ``[n, dim]`` unit rows on a tiny input. lc-robotics-reward cannot import
lc-agents, and this package's test environment does not hold lc-robotics-reward, so each
side pins its protocol to the same documented signature (``DOCUMENTED_SIGNATURE`` here
and in lc-robotics-reward's ``test_text.py``) and checks that its code accepts any object
with exactly that shape; the integration tests check the two packages together.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import typing
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import lc_agents
from lc_agents.ace import PlaybookStore, deduplicate, find_duplicates
from lc_agents.ace.deltas import Delta
from lc_agents.contextnav import ContextItem, ItemEncoder
from lc_agents.ldar.data import similarities
from lc_agents.retrieval import (
    ClipEmbedder,
    Embedder,
    HashingEmbedder,
    ImageEmbedder,
    ImageEncoder,
    MiniLMEmbedder,
    cosine_similarities,
    minilm_model_dir,
    normalize_rows,
)

# The documented method of the protocol, word for word the same in lc-robotics-reward's
# tests (its TextEmbedder states the same contract: name: str, dim: int, this method,
# float32 [len(texts), dim] with unit L2 rows).
DOCUMENTED_SIGNATURE = "(self, texts: 'list[str]') -> 'np.ndarray'"

TINY = ["open a file for reading", "", "parseConfigFile", "bake bread"]


def _hashing() -> Embedder:
    return HashingEmbedder(dim=64)


def _minilm() -> Embedder:
    return MiniLMEmbedder()


def _clip_text_path() -> Embedder:
    # No CLIP checkpoint ships with lc; a sentence-transformers directory (the embedded
    # MiniLM) loads through the same code path and exercises ClipEmbedder's text tower.
    return ClipEmbedder(minilm_model_dir())


FACTORIES: dict[str, Callable[[], Embedder]] = {
    "HashingEmbedder": _hashing,
    "MiniLMEmbedder": _minilm,
    "ClipEmbedder": _clip_text_path,
}
NEEDS_MODEL = {"MiniLMEmbedder", "ClipEmbedder"}


def _check_protocol_and_rows(embedder: object, texts: list[str]) -> np.ndarray:
    assert isinstance(embedder, Embedder)
    v = embedder.embed_texts(texts)
    assert isinstance(v, np.ndarray)
    assert v.shape == (len(texts), int(embedder.dim))
    assert v.dtype == np.float32
    norms = np.linalg.norm(v, axis=1)
    assert np.all((np.abs(norms - 1.0) < 1e-5) | (norms == 0.0)), norms
    assert norms[0] > 0  # a real sentence never embeds to zero
    np.testing.assert_allclose(normalize_rows(v), v, atol=1e-6)
    assert isinstance(embedder.name, str)
    assert embedder.name
    return v


@pytest.mark.parametrize(
    "cls",
    [
        pytest.param(name, marks=[pytest.mark.model] if name in NEEDS_MODEL else [])
        for name in FACTORIES
    ],
)
def test_every_embedder_class_satisfies_the_protocol(cls: str) -> None:
    embedder = FACTORIES[cls]()
    assert type(embedder).__name__ == cls
    v = _check_protocol_and_rows(embedder, TINY)
    np.testing.assert_array_equal(v, embedder.embed_texts(TINY))  # deterministic
    assert embedder.embed_texts([]).shape[0] == 0


def _embedder_classes_in_source() -> set[str]:
    """Names of the (non-protocol) classes in lc_agents' source defining embed_texts."""
    root = pathlib.Path(lc_agents.__file__).parent
    found = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = {
                b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases
            }
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            if "embed_texts" in methods and "Protocol" not in bases:
                found.add(node.name)
    return found


def test_the_protocol_check_covers_every_embedder_class() -> None:
    assert _embedder_classes_in_source() == set(FACTORIES)


def test_there_is_one_embedder_protocol() -> None:
    import lc_agents.ace
    import lc_agents.contextnav

    # the former aliases are gone (see "former paths" below)
    assert not hasattr(lc_agents.ace, "Embedder")
    assert not hasattr(lc_agents.contextnav, "ImageEncoder")
    assert Embedder in ImageEmbedder.__mro__
    assert ImageEncoder in ImageEmbedder.__mro__


# --------------------------------------------------------------------------- normalize_rows


def test_normalize_rows_closed_form_and_zero_rows() -> None:
    rows = np.array([[3.0, 4.0], [0.0, 0.0], [0.0, -2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division-by-zero warning for the zero row
        out = normalize_rows(rows)
    np.testing.assert_array_equal(out, np.array([[0.6, 0.8], [0.0, 0.0], [0.0, -1.0]], np.float32))
    assert not np.isnan(out).any()
    np.testing.assert_array_equal(rows, [[3.0, 4.0], [0.0, 0.0], [0.0, -2.0]])  # not in place


def test_normalize_rows_dtype() -> None:
    assert normalize_rows(np.ones((2, 3), np.float64)).dtype == np.float32  # default
    assert normalize_rows([[1, 1], [2, 0]]).dtype == np.float32  # integers are converted
    out64 = normalize_rows([[1.0, 2.0, 2.0]], dtype=np.float64)
    assert out64.dtype == np.float64
    np.testing.assert_array_equal(out64, [[1 / 3, 2 / 3, 2 / 3]])
    with pytest.raises(ValueError, match="floating"):
        normalize_rows([[1.0]], dtype=np.int64)


@pytest.mark.parametrize("bad", [np.ones(3), np.ones((2, 3, 4)), np.float32(1.0)])
def test_normalize_rows_rejects_non_matrices(bad: np.ndarray) -> None:
    with pytest.raises(ValueError, match="2-D"):
        normalize_rows(bad)


def test_normalize_rows_keeps_empty_shapes() -> None:
    assert normalize_rows(np.zeros((0, 5))).shape == (0, 5)
    assert normalize_rows(np.zeros((3, 0))).shape == (3, 0)


@settings(max_examples=60, deadline=None)
@given(
    arrays(
        np.float64, st.tuples(st.integers(1, 6), st.integers(1, 8)), elements=st.floats(-1e3, 1e3)
    )
)
def test_normalize_rows_gives_unit_rows_in_the_same_direction(rows: np.ndarray) -> None:
    out = normalize_rows(rows, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1)
    live = norms > 1e-150
    np.testing.assert_allclose(np.linalg.norm(out[live], axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(out[live] * norms[live, None], rows[live], rtol=1e-9, atol=1e-9)
    # rows whose norm is 0 (all zeros, or squares that underflow) come back unchanged
    np.testing.assert_array_equal(out[norms == 0], rows[norms == 0])
    np.testing.assert_array_equal(out[~rows.any(axis=1)], 0.0)


# --------------------------------------------------------------------------- the users


class Scaled:
    """An embedder whose rows are NOT unit: hashing vectors times 1..n (a test double of
    a careless embedder, to show each user normalises through normalize_rows)."""

    name, dim = "scaled-hashing-64", 64

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        v = HashingEmbedder(dim=64).embed_texts(texts)
        return v * np.arange(1, len(texts) + 1, dtype=np.float32)[:, None]


def test_every_user_normalises_a_non_unit_embedder_the_same_way() -> None:
    texts = ["the parcel is late", "?!", "my card was charged twice"]  # "?!": no words, zero row
    unit = HashingEmbedder(dim=64).embed_texts(texts)
    assert isinstance(Scaled(), Embedder)
    # ContextNav's item encoder
    enc = ItemEncoder(Scaled()).encode([ContextItem(str(i), t) for i, t in enumerate(texts)])
    np.testing.assert_allclose(enc, unit, atol=1e-6)
    # LDAR's similarity labels: cosines, 0 for the empty passage
    sims = similarities(Scaled(), texts[0], texts)
    np.testing.assert_allclose(sims, unit.astype(np.float64) @ unit[0], atol=1e-6)
    assert sims[1] == 0.0
    # ACE's grow-and-refine: scaled copies of one text are still duplicates
    store = PlaybookStore()
    store.apply([Delta.add("r", "Prices in cents."), Delta.add("r", "Prices in cents.")])
    assert find_duplicates(store, Scaled(), threshold=0.99) == [["r-00001", "r-00002"]]


# --------------------------------------------------------------------------- the contract


def test_the_protocol_has_the_documented_signature() -> None:
    assert str(inspect.signature(Embedder.embed_texts)) == DOCUMENTED_SIGNATURE
    assert typing.get_type_hints(Embedder) == {"name": str, "dim": int}
    assert {m for m in vars(Embedder) if not m.startswith("_")} == {"embed_texts"}


@pytest.mark.parametrize("cls", sorted(FACTORIES))
def test_every_embedder_class_takes_the_documented_arguments(cls: str) -> None:
    # embed_texts(self, texts): one positional list, nothing else required
    method = getattr(importlib.import_module("lc_agents.retrieval"), cls).embed_texts
    params = list(inspect.signature(method).parameters.values())
    assert [p.name for p in params] == ["self", "texts"]
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)


class Documented:
    """Exactly the documented shape and nothing more, written as lc-robotics-reward's
    HashingTextEmbedder is (``embed_texts`` takes any sequence): what an embedder from
    the other package looks like to lc-agents."""

    name, dim = "documented-64", 64

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        return HashingEmbedder(dim=64).embed_texts(list(texts))


def test_an_object_of_the_documented_shape_serves_every_user() -> None:
    emb = Documented()
    assert isinstance(emb, Embedder)
    texts = ["the parcel is late", "my card was charged twice"]
    unit = HashingEmbedder(dim=64).embed_texts(texts)
    np.testing.assert_allclose(ItemEncoder(emb).encode([ContextItem("a", texts[0])]), unit[:1])
    np.testing.assert_allclose(similarities(emb, texts[0], texts), unit @ unit[0], atol=1e-6)
    store = PlaybookStore()
    store.apply([Delta.add("r", "Prices in cents."), Delta.add("r", "Prices in cents.")])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the protocol's shape needs no deprecated path
        assert [d.ids for d in deduplicate(store, emb)] == [("r-00001", "r-00002")]


# --------------------------------------------------------------------------- cosines


def test_cosine_similarities_closed_form() -> None:
    sims = cosine_similarities([3.0, 4.0], [[3.0, 4.0], [-6.0, -8.0], [4.0, -3.0], [0.0, 0.0]])
    assert sims.dtype == np.float32
    np.testing.assert_allclose(sims, [1.0, -1.0, 0.0, 0.0], atol=1e-7)
    out = cosine_similarities([0.0, 0.0], [[1.0, 2.0]], dtype=np.float64)  # zero query
    assert out.dtype == np.float64
    assert out.tolist() == [0.0]
    assert cosine_similarities([1.0, 0.0], np.zeros((0, 2))).shape == (0,)


@pytest.mark.parametrize(
    ("query", "rows", "match"),
    [
        ([[1.0, 0.0]], [[1.0, 0.0]], "1-D"),
        ([1.0, 0.0], [1.0, 0.0], "2-D"),
        ([1.0, 0.0, 0.0], [[1.0, 0.0]], "3-d"),
    ],
)
def test_cosine_similarities_rejects_bad_shapes(query, rows, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cosine_similarities(query, rows)


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.tuples(st.integers(0, 5), st.just(4)), elements=st.floats(-1e3, 1e3)),
    arrays(np.float64, st.just(4), elements=st.floats(-1e3, 1e3)),
)
def test_cosine_similarities_is_the_textbook_cosine(rows: np.ndarray, query: np.ndarray) -> None:
    out = cosine_similarities(query, rows, dtype=np.float64)
    den = np.linalg.norm(rows, axis=1) * np.linalg.norm(query)
    live = den > 1e-100
    expect = (rows[live] @ query) / den[live]
    np.testing.assert_allclose(out[live], expect, rtol=1e-9, atol=1e-12)
    assert np.all(np.abs(out) <= 1.0 + 1e-12)
    # a zero row, or a zero query, gives 0
    zero = ~rows.any(axis=1) if query.any() else np.ones(len(rows), bool)
    np.testing.assert_array_equal(out[zero], 0.0)


# --------------------------------------------------------------------------- former paths

REMOVED = [
    ("lc_agents.ace", "Embedder"),
    ("lc_agents.ace", "MiniLMEmbedder"),
    ("lc_agents.ace", "minilm_model_dir"),
    ("lc_agents.ace.dedup", "Embedder"),
    ("lc_agents.ace.dedup", "MiniLMEmbedder"),
    ("lc_agents.ace.dedup", "minilm_model_dir"),
    ("lc_agents.contextnav", "ImageEncoder"),
    ("lc_agents.contextnav.pool", "ImageEncoder"),
]


@pytest.mark.parametrize(("module", "name"), REMOVED)
def test_former_import_paths_are_removed_and_name_the_new_home(module: str, name: str) -> None:
    mod = importlib.import_module(module)
    with pytest.raises(
        AttributeError,
        match=rf"^{module}\.{name} was removed in lc-agents 0\.11; import it from "
        r"lc_agents\.retrieval$",
    ) as caught:
        getattr(mod, name)
    assert caught.value.name == name
    assert not hasattr(mod, name)
    with pytest.raises(ImportError, match=name):
        exec(f"from {module} import {name}", {})
    assert name not in getattr(mod, "__all__", [])


@pytest.mark.parametrize("module", sorted({m for m, _ in REMOVED}))
def test_unknown_names_are_still_attribute_errors(module: str) -> None:
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        importlib.import_module(module).no_such_name  # noqa: B018


def test_the_current_paths_do_not_warn() -> None:
    retrieval = importlib.import_module("lc_agents.retrieval")
    current = {"Embedder": Embedder, "MiniLMEmbedder": MiniLMEmbedder}
    current |= {"minilm_model_dir": minilm_model_dir, "ImageEncoder": ImageEncoder}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _, name in REMOVED:
            assert getattr(retrieval, name) is current[name]
        assert MiniLMEmbedder().embed_texts([]).shape == (0, 384)  # no model load for []


def test_the_former_encode_method_is_removed_and_names_embed_texts() -> None:
    emb = MiniLMEmbedder()
    with pytest.raises(
        AttributeError,
        match=r"^MiniLMEmbedder\.encode was removed in lc-agents 0\.11; "
        r"call embed_texts$",
    ):
        emb.encode([])
    with pytest.raises(AttributeError, match="call embed_texts"):
        MiniLMEmbedder.encode  # noqa: B018
    assert not hasattr(emb, "encode")  # duck typing sees no encode method
    assert isinstance(emb, Embedder)


def test_an_embedder_with_only_encode_is_refused_by_name() -> None:
    class EncodeOnly:  # the former ACE embedder shape
        def encode(self, texts):
            return HashingEmbedder(dim=64).embed_texts(list(texts))

    store = PlaybookStore()
    store.apply([Delta.add("r", "Prices in cents."), Delta.add("r", "Prices in cents.")])
    for run in (find_duplicates, deduplicate):
        with pytest.raises(
            TypeError,
            match=r"EncodeOnly has encode\(texts\) but no embed_texts\(texts\) .* removed in "
            r"lc-agents 0\.11\); implement lc_agents\.retrieval\.Embedder",
        ):
            run(store, EncodeOnly())
    assert len(store) == 2  # nothing merged
    with pytest.raises(
        TypeError,
        match=r"object is not an Embedder: it has no embed_texts\(texts\) method; "
        r"implement lc_agents\.retrieval\.Embedder",
    ):
        find_duplicates(store, object())
