"""Hugging Face integration: tiny random Llama / Gemma-3 models switched to DSSA."""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import DSSAConfig
from lc_attention.hf import ATTN_NAME, disable_dssa, enable_dssa, is_dssa_enabled

torch.set_num_threads(1)

ALL = DSSAConfig(window_size=64, topk=64, dense_len=0, backend="torch")
SPARSE = DSSAConfig(window_size=64, topk=2, dense_len=128, backend="torch")


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=96, hidden_size=96, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=1024,
        eos_token_id=None, attn_implementation="sdpa",
    )  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def gemma() -> torch.nn.Module:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(
        vocab_size=96, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=64,
        layer_types=["sliding_attention", "full_attention"], max_position_embeddings=1024,
        eos_token_id=None, attn_implementation="sdpa",
    )  # fmt: skip
    return Gemma3ForCausalLM(cfg).eval()


def _ids(n: int = 300, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 96, (1, n), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_dense_len_above_length_gives_identical_logits(family: str, request) -> None:
    model = request.getfixturevalue(family)
    ids = _ids()
    with torch.no_grad():
        ref = model(ids).logits
        with enable_dssa(model, DSSAConfig(dense_len=1000)):
            out = model(ids).logits
    assert torch.equal(out, ref)


@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_all_blocks_selected_matches_dense_logits_and_generate(family: str, request) -> None:
    model = request.getfixturevalue(family)
    ids = _ids()
    with torch.no_grad():
        ref = model(ids).logits
        ref_gen = model.generate(ids, max_new_tokens=12, do_sample=False)
        with enable_dssa(model, ALL):
            out = model(ids).logits
            gen = model.generate(ids, max_new_tokens=12, do_sample=False)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    assert torch.equal(gen, ref_gen)


def test_sparse_generate_changes_logits_and_decodes_incrementally(llama) -> None:
    ids = _ids()
    with torch.no_grad():
        ref = llama(ids).logits
        with enable_dssa(llama, SPARSE) as handle_model:
            assert handle_model is llama
            out = llama(ids).logits
            gen = llama.generate(ids, max_new_tokens=20, do_sample=False)
    # sparse prefill only changes rows past the first topk blocks (positions >= 128)
    torch.testing.assert_close(out[:, :128], ref[:, :128], rtol=1e-4, atol=1e-4)
    assert (out[:, 200:] - ref[:, 200:]).abs().max() > 1e-4
    assert gen.shape == (1, 320)


def test_dense_layers_keep_the_first_layers_dense(llama) -> None:
    from dataclasses import replace

    ids = _ids()
    with torch.no_grad():
        ref = llama(ids).logits
        outs = {}
        for n in (0, 1, 2):  # the tiny Llama has 2 layers
            with enable_dssa(llama, replace(SPARSE, dense_layers=n)):
                outs[n] = llama(ids).logits
    assert torch.equal(outs[2], ref)  # every layer dense: the SDPA path, bit for bit
    assert (outs[1] - ref).abs().max() > 1e-4  # layer 1 still sparse
    assert (outs[1] - outs[0]).abs().max() > 1e-4  # layer 0 no longer sparse


def test_decode_reuses_compressed_keys(llama) -> None:
    ids = _ids()
    h = enable_dssa(llama, SPARSE)
    try:
        with torch.no_grad():
            llama.generate(ids, max_new_tokens=24, do_sample=False)
        # one full compression at prefill, then only incremental updates
        assert [c.full_recomputes for c in h.caches] == [1, 1]
        assert all(c.kv_len == 323 for c in h.caches)
    finally:
        disable_dssa(llama)


def test_enable_disable_restores_implementation(llama) -> None:
    assert llama.config._attn_implementation == "sdpa"
    h = enable_dssa(llama, ALL)
    assert llama.config._attn_implementation == ATTN_NAME
    assert is_dssa_enabled(llama)
    with pytest.raises(ValueError, match="already enabled"):
        enable_dssa(llama, ALL)
    with h:
        pass
    assert llama.config._attn_implementation == "sdpa"
    assert not is_dssa_enabled(llama)
    assert not any(hasattr(m, "lc_dssa_config") for m in llama.modules())
    with pytest.raises(ValueError, match="not enabled"):
        disable_dssa(llama)


def test_eager_is_restored(llama) -> None:
    llama.set_attn_implementation("eager")
    try:
        with enable_dssa(llama, ALL):
            assert llama.config._attn_implementation == ATTN_NAME
        assert llama.config._attn_implementation == "eager"
    finally:
        llama.set_attn_implementation("sdpa")


def test_unsupported_family_and_bad_config() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    with pytest.raises(ValueError, match="gpt2"):
        enable_dssa(gpt2, ALL)
    with pytest.raises(TypeError, match="DSSAConfig"):
        enable_dssa(gpt2, {"topk": 2})  # type: ignore[arg-type]


def test_shared_selection_prefill_matches_dense_when_all_blocks_selected(llama) -> None:
    cfg = DSSAConfig(window_size=64, topk=64, dense_len=0, backend="torch", query_block=64)
    ids = _ids()
    with torch.no_grad():
        ref = llama(ids).logits
        ref_gen = llama.generate(ids, max_new_tokens=6, do_sample=False)
        with enable_dssa(llama, cfg):
            out = llama(ids).logits
            gen = llama.generate(ids, max_new_tokens=6, do_sample=False)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-4)
    assert torch.equal(gen, ref_gen)


def _tiny_llama(max_pos: int) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=max_pos,
        eos_token_id=None, attn_implementation="sdpa",
    )  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


def test_default_config_goes_sparse_within_the_model_context() -> None:
    """``enable_dssa(model)`` without a config is never a silent no-op: an 8K model (or
    anything up to 8K) gets the training-free preset, a longer one MiniCPM4's defaults."""
    from lc_attention.hf import default_dssa_config

    assert default_dssa_config(8192) == DSSAConfig.training_free()
    assert default_dssa_config(2048) == DSSAConfig.training_free()
    assert default_dssa_config(32768) == DSSAConfig()
    assert default_dssa_config(None) == DSSAConfig()
    for n in (1025, 2048, 8192, 8193, 131072):
        assert default_dssa_config(n).dense_len < n
    with pytest.raises(ValueError, match="max_position_embeddings"):
        default_dssa_config(1024)

    model = _tiny_llama(2048)
    ids = _ids(1300)
    with torch.no_grad():
        ref = model(ids).logits
        with enable_dssa(model) as m:
            cfgs = {mod.lc_dssa_config for mod in m.modules() if hasattr(mod, "lc_dssa_config")}
            out = model(ids).logits
    assert cfgs == {DSSAConfig.training_free()}
    torch.testing.assert_close(out[:, :1024], ref[:, :1024])  # dense below dense_len
    assert (out[:, 1100:] - ref[:, 1100:]).abs().max() > 1e-4  # sparse from there on


def test_default_config_on_a_short_context_model_raises() -> None:
    with pytest.raises(ValueError, match="max_position_embeddings=512"):
        enable_dssa(_tiny_llama(512))


def test_config_that_never_goes_sparse_warns(llama) -> None:
    with pytest.warns(UserWarning, match="never goes sparse"):
        h = enable_dssa(llama, DSSAConfig(dense_len=1024))  # the tiny Llama has 1024
    disable_dssa(llama)
    assert h.model is llama
