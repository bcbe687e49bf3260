"""lc-robotics-reward's text embedders satisfy lc-agents' ``Embedder`` protocol.

lc-robotics-reward stands alone (it may not import lc-agents), so its protocol repeats
the shape; this checks, with both packages installed, that the two shapes agree.
"""

from __future__ import annotations

import numpy as np

from lc_agents.retrieval import Embedder
from lc_robotics_reward.text import HashingTextEmbedder, MiniLMTextEmbedder


def _unit_rows(emb: Embedder, texts: list[str]) -> None:
    assert isinstance(emb, Embedder)
    out = emb.embed_texts(texts)
    assert out.shape == (len(texts), emb.dim)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_robotics_text_embedders_satisfy_the_lc_agents_protocol() -> None:
    texts = ["pick up the cube", "place it in the bin"]
    _unit_rows(HashingTextEmbedder(32), texts)
    _unit_rows(MiniLMTextEmbedder(), texts)
