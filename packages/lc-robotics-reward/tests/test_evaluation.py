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


def test_auto_embedder_falls_back_when_minilm_is_absent(monkeypatch) -> None:
    import lc_robotics_reward.text as text

    monkeypatch.setattr(text, "minilm_path", lambda: None)
    emb = text.make_text_embedder("auto")
    assert isinstance(emb, HashingTextEmbedder)
    assert emb(["stack the cups"]).shape == (1, 384)
    with pytest.raises(ImportError, match=r"lc-robotics-reward\[text\]"):
        text.MiniLMTextEmbedder()
    with pytest.raises(ValueError, match="allowed"):
        make_text_embedder("clip")


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.skipif(
    minilm_path() is None, reason="the 'text' extra (all-MiniLM-L6-v2) is not installed"
)
def test_minilm_embeds_paraphrases_closer_than_other_tasks() -> None:
    emb = make_text_embedder("auto")
    v = emb(["put the red block in the bin", "place the red cube into the bin", "fold the towel"])
    assert v.shape == (3, 384)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2
