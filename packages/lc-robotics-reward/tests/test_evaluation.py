"""Metrics of reward quality against closed forms, and the text embedders."""

from __future__ import annotations

import numpy as np
import pytest

from lc_robotics_reward.evaluation import pearson, ranking_auc, spearman, stage_accuracy
from lc_robotics_reward.text import HashingTextEmbedder, make_text_embedder, minilm_path


def test_metrics() -> None:
    assert stage_accuracy(np.array([0, 1, 2, 2]), np.array([0, 1, 1, 2])) == 0.75
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert pearson(x, 2 * x + 1) == pytest.approx(1.0)
    assert spearman(x, x**3) == pytest.approx(1.0)
    assert spearman(x, -x) == pytest.approx(-1.0)
    assert spearman(np.array([1.0, 1.0, 2.0]), np.array([1.0, 2.0, 3.0])) == pytest.approx(
        np.corrcoef([0.5, 0.5, 2.0], [0.0, 1.0, 2.0])[0, 1]
    )
    assert ranking_auc(np.array([3.0, 4.0]), np.array([1.0, 2.0])) == 1.0
    assert ranking_auc(np.array([1.0]), np.array([1.0])) == 0.5


def test_hashing_embedder_is_deterministic_and_unit_norm() -> None:
    emb = HashingTextEmbedder(64)
    a = emb(["put the red block in the bin", "push the puck", "put the red block in the bin"])
    assert a.shape == (3, 64)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(a[0], a[2])
    assert abs(float(a[0] @ a[1])) < 0.9


def test_auto_embedder_falls_back_when_minilm_is_absent() -> None:
    emb = make_text_embedder("auto")
    expected = "MiniLMTextEmbedder" if minilm_path() else "HashingTextEmbedder"
    assert type(emb).__name__ == expected
    assert emb(["stack the cups"]).shape == (1, 384)
    with pytest.raises(ValueError, match="allowed"):
        make_text_embedder("clip")
