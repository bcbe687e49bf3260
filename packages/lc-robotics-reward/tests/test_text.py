"""Every text embedder satisfies ``TextEmbedder``, the shape of lc-agents' ``Embedder``.

This package may not import lc-agents, so the contract is pinned by hand: the protocol's
method has ``DOCUMENTED_SIGNATURE``, word for word the one lc-agents' tests pin for
``lc_agents.retrieval.Embedder``, and ``SARMProcessor`` accepts any object with exactly
that shape (as every lc-agents embedder has). The integration tests check both packages
together.
"""

from __future__ import annotations

import doctest
import inspect
import typing
import warnings

import numpy as np
import pytest
import torch

import lc_robotics_reward.text as text
from lc_robotics_reward.text import (
    HashingTextEmbedder,
    MiniLMTextEmbedder,
    TextEmbedder,
    minilm_path,
)

TINY = ["put the red block in the bin", "", "push the puck"]

# lc_agents.retrieval.Embedder.embed_texts, as documented (and pinned in lc-agents' tests)
DOCUMENTED_SIGNATURE = "(self, texts: 'list[str]') -> 'np.ndarray'"


def _check(embedder: object) -> np.ndarray:
    assert isinstance(embedder, TextEmbedder)
    v = embedder.embed_texts(TINY)
    assert v.shape == (len(TINY), embedder.dim)
    assert v.dtype == np.float32
    norms = np.linalg.norm(v, axis=1)
    assert np.all((np.abs(norms - 1.0) < 1e-5) | (norms == 0.0)), norms
    assert norms[0] > 0
    np.testing.assert_array_equal(embedder(TINY), v)  # calling is an alias
    assert embedder.embed_texts([]).shape == (0, embedder.dim)
    assert isinstance(embedder.name, str)
    assert embedder.name
    return v


def test_the_protocol_has_the_lc_agents_embedder_shape() -> None:
    # lc_agents.retrieval.Embedder: name: str, dim: int, embed_texts(list[str]) -> ndarray.
    # This package may not import lc-agents, so the shape is pinned here by hand.
    hints = typing.get_type_hints(TextEmbedder)
    assert {k: hints[k] for k in ("name", "dim")} == {"name": str, "dim": int}
    assert callable(TextEmbedder.embed_texts)
    members = {m for m in vars(TextEmbedder) if not m.startswith("_")}
    assert members == {"embed_texts"}  # name / dim are annotations only


def test_every_embedder_class_is_covered() -> None:
    classes = {
        n for n, obj in vars(text).items() if isinstance(obj, type) and hasattr(obj, "embed_texts")
    }
    assert classes == {"HashingTextEmbedder", "MiniLMTextEmbedder", "TextEmbedder"}


def test_hashing_embedder_satisfies_the_protocol() -> None:
    v = _check(HashingTextEmbedder(32))
    assert not v[1].any()  # no words, zero row
    assert HashingTextEmbedder(32).name != HashingTextEmbedder(64).name  # one name per space


@pytest.mark.model
@pytest.mark.skipif(minilm_path() is None, reason="the 'text' extra is not installed")
def test_minilm_embedder_satisfies_the_protocol() -> None:
    _check(MiniLMTextEmbedder())


class _EmbedTextsOnly:
    """The protocol's shape and nothing more (as an lc-agents embedder has)."""

    name, dim = "ones-8", 8

    def embed_texts(self, texts):
        return np.full((len(texts), 8), 8**-0.5, np.float32)


class _CallableOnly:
    """The former TextEmbedder shape: ``dim`` and ``__call__`` only."""

    dim = 8

    def __call__(self, texts):
        return np.full((len(texts), 8), -(8**-0.5), np.float32)


@pytest.mark.parametrize("embedder", [_EmbedTextsOnly(), _CallableOnly()])
def test_the_processor_takes_the_protocol_and_plain_callables(embedder) -> None:
    from lc_robotics_reward import SARMConfig, SARMProcessor
    from lc_robotics_reward.dataset import Episode, RobotDataset
    from lc_robotics_reward.labels import SubtaskSpan

    frames = {
        "observation.image": np.zeros((12, 12, 12, 3), np.uint8),
        "observation.state": np.zeros((12, 3), np.float32),
    }
    spans = [SubtaskSpan("a", 0, 4), SubtaskSpan("b", 4, 8), SubtaskSpan("c", 8, 12)]
    ds = RobotDataset([Episode(0, "do it", frames, spans)], 10, {"do it": ["a", "b", "c"]})
    cfg = SARMConfig(num_stages=3, image_size=12, text_dim=8, frame_dim=8, hidden_dim=16,
                     num_heads=2, num_layers=1, num_frames=5, frame_gap=2, max_rewind=2)  # fmt: skip
    proc = SARMProcessor(ds, "do it", cfg, embedder)
    expect = (embedder.embed_texts if hasattr(embedder, "embed_texts") else embedder)(["do it"])
    np.testing.assert_array_equal(proc.text_table[0].numpy(), expect[0])
    assert isinstance(embedder, TextEmbedder) == hasattr(embedder, "embed_texts")


def test_the_protocol_has_the_documented_signature() -> None:
    assert str(inspect.signature(TextEmbedder.embed_texts)) == DOCUMENTED_SIGNATURE
    assert typing.get_type_hints(TextEmbedder) == {"name": str, "dim": int}


@pytest.mark.parametrize("cls", [HashingTextEmbedder, MiniLMTextEmbedder])
def test_every_embedder_class_takes_the_documented_arguments(cls: type) -> None:
    params = list(inspect.signature(cls.embed_texts).parameters.values())
    assert [p.name for p in params] == ["self", "texts"]
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)


def _processor(embedder, text_dim: int = 8):
    from lc_robotics_reward import SARMConfig, SARMProcessor
    from lc_robotics_reward.dataset import Episode, RobotDataset
    from lc_robotics_reward.labels import SubtaskSpan

    frames = {
        "observation.image": np.zeros((12, 12, 12, 3), np.uint8),
        "observation.state": np.zeros((12, 3), np.float32),
    }
    spans = [SubtaskSpan("a", 0, 4), SubtaskSpan("b", 4, 8), SubtaskSpan("c", 8, 12)]
    ds = RobotDataset([Episode(0, "do it", frames, spans)], 10, {"do it": ["a", "b", "c"]})
    cfg = SARMConfig(num_stages=3, image_size=12, text_dim=text_dim, frame_dim=8,
                     hidden_dim=16, num_heads=2, num_layers=1, num_frames=5, frame_gap=2,
                     max_rewind=2)  # fmt: skip
    return SARMProcessor(ds, "do it", cfg, embedder)


def test_the_documented_shape_needs_no_deprecated_path() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        proc = _processor(_EmbedTextsOnly())
        HashingTextEmbedder(8).embed_texts(["x"])
    assert proc.text_table.dtype == torch.float32


def test_calling_an_embedder_is_deprecated() -> None:
    emb = HashingTextEmbedder(16)
    with pytest.deprecated_call(match="call embed_texts"):
        v = emb(["push the puck"])
    np.testing.assert_array_equal(v, emb.embed_texts(["push the puck"]))


def test_a_plain_callable_is_deprecated() -> None:
    with pytest.deprecated_call(match="_CallableOnly has no embed_texts"):
        proc = _processor(_CallableOnly())
    np.testing.assert_array_equal(proc.text_table[0].numpy(), np.full(8, -(8**-0.5), np.float32))


class _WrongRows:
    name, dim = "wrong-rows", 8

    def embed_texts(self, texts):
        return np.zeros((len(texts) + 1, 8), np.float32)


def test_bad_embedders_are_refused_at_the_boundary() -> None:
    with pytest.raises(TypeError, match="not a TextEmbedder"):
        _processor(object())
    with pytest.raises(ValueError, match=r"expected \[\d+, dim\]"):
        _processor(_WrongRows())
    with pytest.raises(ValueError, match="text_dim=16"):
        _processor(_EmbedTextsOnly(), text_dim=16)


def test_module_example_runs() -> None:
    result = doctest.testmod(text)
    assert result.attempted > 0
    assert result.failed == 0
