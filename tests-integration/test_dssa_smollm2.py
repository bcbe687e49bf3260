"""DSSA on the real SmolLM2-135M-Instruct: exact when dense, still finds a needle when sparse."""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import DSSAConfig
from lc_attention.hf import enable_dssa

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def smollm2():
    from lc_agents.models import load_model

    return load_model("smollm2-135m-instruct")


def _prompt_ids(tok, length: int, seed: int) -> tuple[torch.Tensor, str]:
    from lc_evals import generate, render_prompt

    item = generate("niah_single", n=1, length=length, seed=seed, tokenizer=tok)[0]
    msgs = [{"role": "user", "content": render_prompt(item)}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return tok(text, return_tensors="pt").input_ids, item.answers[0]


def test_dense_len_above_length_gives_identical_logits(smollm2) -> None:
    model, tok = smollm2
    ids, _ = _prompt_ids(tok, 600, seed=0)
    with torch.no_grad():
        ref = model(ids).logits
        with enable_dssa(model, DSSAConfig.small(dense_len=4096)):
            out = model(ids).logits
    assert torch.equal(out, ref)


@pytest.mark.parametrize("preset", ["small", "training_free"])
def test_sparse_dssa_answers_niah_like_dense(smollm2, preset: str) -> None:
    model, tok = smollm2
    ids, answer = _prompt_ids(tok, 1500, seed=1)
    make = getattr(DSSAConfig, preset)
    cfg = make(dense_len=512, topk=8, window=256)  # 8 of ~25 blocks
    assert ids.shape[1] > cfg.dense_len
    with torch.no_grad():
        dense = model.generate(ids, max_new_tokens=12, do_sample=False)
        with enable_dssa(model, cfg):
            sparse = model.generate(ids, max_new_tokens=12, do_sample=False)
    dense_text = tok.decode(dense[0, ids.shape[1] :], skip_special_tokens=True)
    sparse_text = tok.decode(sparse[0, ids.shape[1] :], skip_special_tokens=True)
    assert (answer in sparse_text) == (answer in dense_text), (answer, dense_text, sparse_text)
