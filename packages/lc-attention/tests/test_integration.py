"""The shared Hugging Face switch: one method at a time, restore, masks, dense fallbacks."""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import DSSAConfig
from lc_attention.hf import disable_dssa, enable_dssa, is_dssa_enabled
from lc_attention.integration import (
    AttentionHandle,
    AttentionMethod,
    attention_modules,
    dense_function,
    enabled_method,
    install,
    key_padding,
    run_dense,
    sdpa_attention,
    uninstall,
)
from lc_attention.lychee import RoleMap, disable_lychee, enable_lychee, is_lychee_enabled

torch.set_num_threads(1)

CALLS: list[int] = []


def _scaled_attention(module, query, key, value, attention_mask, **kwargs):
    """A toy method: SDPA with the keys scaled by the module's ``lc_toy_gain``."""
    CALLS.append(int(module.layer_idx))
    gain = module.lc_toy_gain
    return sdpa_attention(module, query, key * gain, value, attention_mask, **kwargs)


TOY = AttentionMethod("Toy", "lc_toy_test", _scaled_attention, ("lc_toy_gain",), "disable_toy")


@pytest.fixture
def llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=1024,
        eos_token_id=None, attn_implementation="sdpa",
    )  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


def _ids(n: int = 40) -> torch.Tensor:
    return torch.randint(0, 64, (2, n), generator=torch.Generator().manual_seed(3))


def test_a_method_in_a_few_lines_runs_and_restores(llama) -> None:
    ids = _ids()
    with torch.no_grad():
        want = llama(ids).logits
    CALLS.clear()
    install(llama, TOY, lambda m: {"lc_toy_gain": 1.0})
    with AttentionHandle(llama, TOY, None) as model, torch.no_grad():
        assert model.config._attn_implementation == "lc_toy_test"
        same = model(ids).logits
        for m in attention_modules(model):
            m.lc_toy_gain = 2.0
        other = model(ids).logits
    assert CALLS == [0, 1, 0, 1]
    torch.testing.assert_close(same, want)
    assert not torch.allclose(other, want, atol=1e-3)
    assert llama.config._attn_implementation == "sdpa"
    assert enabled_method(llama) is None
    assert not any(hasattr(m, "lc_toy_gain") for m in llama.modules())


def test_one_method_at_a_time(llama) -> None:
    roles = RoleMap.from_model(llama)
    with enable_lychee(llama, roles):
        with pytest.raises(ValueError, match="LycheeDecode is enabled on this model"):
            enable_dssa(llama, DSSAConfig(dense_len=100))
        with pytest.raises(ValueError, match="DSSA is not enabled"):
            disable_dssa(llama)
        assert is_lychee_enabled(llama)
        assert not is_dssa_enabled(llama)
    with enable_dssa(llama, DSSAConfig(dense_len=100)):
        with pytest.raises(ValueError, match="already enabled on this model; call disable_dssa"):
            enable_dssa(llama, DSSAConfig(dense_len=100))
        with pytest.raises(ValueError, match="LycheeDecode is not enabled"):
            disable_lychee(llama)
    assert enabled_method(llama) is None
    with pytest.raises(ValueError, match="Toy is not enabled"):
        uninstall(llama, TOY)


def test_undeclared_module_state_is_refused_before_any_change(llama) -> None:
    with pytest.raises(ValueError, match=r"undeclared module attributes \['lc_other'\]"):
        install(llama, TOY, lambda m: {"lc_other": 1})
    assert llama.config._attn_implementation == "sdpa"
    assert enabled_method(llama) is None


def test_a_method_that_wraps_sdpa_or_eager_refuses_others(llama) -> None:
    wrapped = AttentionMethod("Wrapped", "lc_wrapped_test", _scaled_attention, (), "x", ("eager",))
    with pytest.raises(ValueError, match=r"wraps the \('eager',\) implementations"):
        install(llama, wrapped, lambda m: None)


def test_key_padding_reads_the_last_row_of_bool_and_float_masks() -> None:
    allowed = torch.tensor([[[False, True, True, False], [False, True, True, True]]])
    want = [[False, True, True, True]] * 3
    assert key_padding(allowed[:, None], 3, 4).tolist() == want
    additive = torch.zeros(1, 1, 2, 5).masked_fill(
        ~torch.cat([allowed, allowed[..., :1]], -1)[:, None], -1e9
    )
    assert key_padding(additive, 3, 4).tolist() == want
    assert key_padding(None, 3, 4) is None


def test_eager_fallback_gets_the_mask_it_expects(llama) -> None:
    """``run_dense`` with the eager function equals SDPA for plain causal (None) and
    boolean padding masks."""
    m = attention_modules(llama)[0]
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 6, 9, 8, generator=g)
    k, v = torch.randn(2, 2, 9, 8, generator=g), torch.randn(2, 2, 9, 8, generator=g)
    eager = dense_function(m, "eager")
    rows = torch.arange(4, 9).view(5, 1)
    causal = (torch.arange(9).view(1, 9) <= rows)[None, None].expand(2, 1, 5, 9).clone()
    causal[0, ..., :3] = False  # padding of the first sequence
    for queries, mask in ((q, None), (q[:, :, 4:], causal)):
        want, _ = run_dense(sdpa_attention, "sdpa", m, queries, k, v, mask, scaling=0.3)
        got, _ = run_dense(eager, "eager", m, queries, k, v, mask, scaling=0.3, dropout=0.0)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="dense implementation must be one of"):
        dense_function(m, "flash_attention_2")
