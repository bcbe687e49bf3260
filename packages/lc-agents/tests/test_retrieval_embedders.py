"""Embedders (hashing, MiniLM, CLIP hook) and the resource-aware index plan."""

from __future__ import annotations

import numpy as np
import pytest

from lc_agents.errors import ModelLoadError
from lc_agents.retrieval import (
    ClipEmbedder,
    Embedder,
    EmptyIndexError,
    HashingEmbedder,
    IndexPlan,
    MiniLMEmbedder,
    plan_index,
)


def test_hashing_embedder_is_deterministic_unit_norm_and_lexical():
    e = HashingEmbedder(dim=128)
    assert isinstance(e, Embedder)
    v = e.embed_texts(["parse_config_file", "parseConfigFile", "sum prices", ""])
    assert v.shape == (4, 128)
    assert v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v[:3], axis=1), 1.0, rtol=1e-6)
    assert not v[3].any()  # no words -> zero vector
    assert v[0] @ v[1] > 0.5 > v[0] @ v[2]  # identifiers split at snake/camel boundaries
    np.testing.assert_array_equal(
        v,
        HashingEmbedder(dim=128).embed_texts(
            ["parse_config_file", "parseConfigFile", "sum prices", ""]
        ),
    )
    with pytest.raises(ValueError, match="dim"):
        HashingEmbedder(dim=4)


@pytest.mark.model
def test_minilm_embeds_offline_into_384_unit_vectors():
    e = MiniLMEmbedder()
    assert isinstance(e, Embedder)
    assert (e.name, e.dim) == ("all-MiniLM-L6-v2", 384)
    v = e.embed_texts(["open a file for reading", "read the contents of a file", "bake bread"])
    assert v.shape == (3, 384)
    assert v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2  # paraphrase beats an unrelated text
    assert e.embed_texts([]).shape == (0, 384)


def test_clip_hook_reports_a_missing_model_clearly(tmp_path):
    e = ClipEmbedder(str(tmp_path / "no-such-clip"))
    with pytest.raises(ModelLoadError, match="no CLIP model directory"):
        e.embed_texts(["a cat"])
    with pytest.raises(ModelLoadError, match="no CLIP model directory"):
        e.embed_images([str(tmp_path / "cat.png")])
    with pytest.raises(ValueError, match="model_dir"):
        ClipEmbedder("")


def test_index_plan_flat_for_small_corpora_and_ivf_pq_for_large_or_tight_memory():
    gib = 2**30
    small = plan_index(10_000, 384, available_bytes=8 * gib)
    assert small.index_type == "flat"
    assert small.num_partitions == 0
    big = plan_index(400_000, 384, available_bytes=64 * gib)
    assert big.index_type == "ivf_pq"
    assert big.num_partitions == round(400_000**0.5)
    assert big.num_sub_vectors == 48
    # 50k x 384 float32 = 77 MB; with 200 MB available that is over a quarter
    tight = plan_index(50_000, 384, available_bytes=200 * 2**20)
    assert tight.index_type == "ivf_pq"
    assert "memory" in tight.reason
    assert plan_index(511, 384, available_bytes=1).index_type == "flat"
    # partitions keep >= 256 rows each
    assert plan_index(1_000, 8, available_bytes=1, flat_max_rows=10).num_partitions == 3
    # PQ sub-vectors divide the width
    assert plan_index(10**6, 100, available_bytes=gib).num_sub_vectors == 10


def test_batch_size_follows_memory_and_corpus_size():
    per_text = 24 * 256 * 384 * 4
    assert plan_index(10_000, 384, available_bytes=10 * 64 * per_text).batch_size == 64
    assert plan_index(10_000, 384, available_bytes=10**12).batch_size == 256
    assert plan_index(10_000, 384, available_bytes=1).batch_size == 1
    assert plan_index(3, 384, available_bytes=10**12).batch_size == 4


def test_plan_validation():
    with pytest.raises(EmptyIndexError, match="empty"):
        plan_index(0, 384)
    with pytest.raises(ValueError, match="memory_fraction"):
        plan_index(10, 384, memory_fraction=0)
    with pytest.raises(ValueError, match="index_type"):
        IndexPlan("hnsw", 8)
