"""DSSA on the real Gemma-3-270M: exact when dense, equal to dense with every block kept."""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import DSSAConfig
from lc_attention.hf import enable_dssa

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def gemma3():
    from lc_agents.models import GEMMA_MODEL, load_model

    return load_model(GEMMA_MODEL)


def _ids(tok, n_tokens: int) -> torch.Tensor:
    import random

    from lc_evals.haystack import essay_sentences

    sents = essay_sentences(random.Random(0))
    text = " ".join(next(sents) for _ in range(n_tokens // 8))
    ids = tok(text, return_tensors="pt").input_ids[:, :n_tokens]
    assert ids.shape[1] == n_tokens
    return ids


def test_dense_len_above_length_gives_identical_logits(gemma3) -> None:
    model, tok = gemma3
    ids = _ids(tok, 700)  # longer than the 512-token sliding window of the local layers
    with torch.no_grad():
        ref = model(ids).logits
        with enable_dssa(model, DSSAConfig.small(dense_len=4096)):
            out = model(ids).logits
    assert torch.equal(out, ref)
    assert model.config._attn_implementation != "lc_dssa"  # restored on exit


def test_sparse_with_every_block_kept_generates_like_dense(gemma3) -> None:
    model, tok = gemma3
    ids = _ids(tok, 700)
    # Sparse from 256 keys on; 16 blocks of 64 cover every causal block of <= 1024 keys.
    cfg = DSSAConfig.small(dense_len=256, window=256, topk=16)
    with torch.no_grad():
        ref_logits = model(ids).logits
        dense = model.generate(ids, max_new_tokens=8, do_sample=False)
        with enable_dssa(model, cfg):
            logits = model(ids).logits
            sparse = model.generate(ids, max_new_tokens=8, do_sample=False)
    torch.testing.assert_close(logits, ref_logits, rtol=1e-4, atol=2e-4)
    assert torch.equal(sparse, dense)


def test_sparse_with_few_blocks_leaves_out_keys_only_beyond_the_budget(gemma3) -> None:
    model, tok = gemma3
    ids = _ids(tok, 700)
    cfg = DSSAConfig.small(dense_len=256, window=128, topk=4)  # 4 of 11 blocks
    with torch.no_grad():
        ref = model(ids).logits
        with enable_dssa(model, cfg):
            out = model(ids).logits
    # The first 256 queries see at most 4 blocks, all selected: dense attention...
    torch.testing.assert_close(out[:, :256], ref[:, :256], rtol=1e-4, atol=2e-4)
    # ...while later queries see a subset of the keys in the global layers.
    assert not torch.allclose(out[:, -64:], ref[:, -64:], atol=1e-3)
