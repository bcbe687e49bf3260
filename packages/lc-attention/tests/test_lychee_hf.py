"""LycheeDecode on tiny random Hugging Face models: exactness, generate(), restore, errors,
and head-role training."""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import DSSAConfig
from lc_attention.hf import enable_dssa
from lc_attention.lychee import (
    RoleMap,
    RoleTrainingConfig,
    disable_lychee,
    enable_lychee,
    is_lychee_enabled,
    train_head_roles,
)
from lc_attention.lychee.ranking import select_by_rank

torch.set_num_threads(1)
V = 96


def _llama(impl: str = "sdpa", layers: int = 3) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=V, hidden_size=96, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=1024,
        eos_token_id=None, attn_implementation=impl,
    )  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return _llama()


def _ids(n: int = 160, seed: int = 1, batch: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (batch, n), generator=torch.Generator().manual_seed(seed))


def _sparse_roles(model) -> RoleMap:
    # layer 0 all retrieval; later layers: one retrieval head per KV group
    return RoleMap.from_model(model, [[True] * 6] + [[True, False, False, True, False, False]] * 2)


def _gen(model, ids, n=8, **kw):
    with torch.no_grad():
        return model.generate(
            ids,
            max_new_tokens=n,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
            **kw,
        )


def _max_diff(a, b) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def test_all_retrieval_decodes_exactly_like_full_attention(llama) -> None:
    ids = _ids()
    ref = _gen(llama, ids)
    with enable_lychee(llama, RoleMap.from_model(llama), topk=16) as handle_model:
        assert handle_model is llama
        assert is_lychee_enabled(llama)
        out = _gen(llama, ids)
    assert torch.equal(out.sequences, ref.sequences)
    assert _max_diff(out.scores, ref.scores) < 1e-5
    assert not is_lychee_enabled(llama)


def test_sparse_heads_with_budget_covering_the_context_are_exact(llama) -> None:
    ids = _ids(100)
    with torch.no_grad():
        past = llama(ids[:, :-1], use_cache=True).past_key_values
        ref = llama(ids[:, -1:], past_key_values=past).logits
        past = llama(ids[:, :-1], use_cache=True).past_key_values
        handle = enable_lychee(llama, _sparse_roles(llama), topk=100)  # == context length
        out = llama(ids[:, -1:], past_key_values=past).logits
        disable_lychee(llama)
    assert handle.hybrid_steps == 1  # the sparse path really ran
    assert float((out - ref).abs().max()) < 1e-5


def test_sparse_generate_runs_and_restore_gives_identical_logits(llama) -> None:
    ids = _ids()
    with torch.no_grad():
        before = llama(ids).logits
    ref = _gen(llama, ids, n=12)
    handle = enable_lychee(llama, _sparse_roles(llama), topk=4)
    out = _gen(llama, ids, n=12)
    assert handle.hybrid_steps == 11  # every decode step after the prefill
    assert _max_diff(out.scores, ref.scores) > 1e-3  # 4 of ~170 positions: not full attention
    assert torch.equal(out.scores[0], ref.scores[0])  # prefill stays dense
    disable_lychee(llama)
    assert llama.config._attn_implementation == "sdpa"
    with torch.no_grad():
        after = llama(ids).logits
    assert torch.equal(after, before)
    assert all(not hasattr(m, "lc_lychee") for m in llama.modules())


def test_left_padded_batch_matches_full_attention(llama) -> None:
    ids = _ids(60, batch=2)
    mask = torch.ones_like(ids)
    mask[0, :9] = 0  # left padding
    ref = _gen(llama, ids, attention_mask=mask)
    with enable_lychee(llama, RoleMap.from_model(llama), topk=8):
        out = _gen(llama, ids, attention_mask=mask)
    assert torch.equal(out.sequences, ref.sequences)
    assert _max_diff(out.scores, ref.scores) < 1e-5


def test_eager_model_restores_and_decodes() -> None:
    model = _llama("eager", layers=2)
    ids = _ids(50)
    ref = _gen(model, ids, n=4)
    with enable_lychee(model, RoleMap.from_model(model), topk=8):
        out = _gen(model, ids, n=4)
    assert torch.equal(out.sequences, ref.sequences)
    assert _max_diff(out.scores, ref.scores) < 1e-5
    assert model.config._attn_implementation == "eager"


def test_gemma3_sliding_layers_stay_dense() -> None:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(
        vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=32,
        layer_types=["sliding_attention", "full_attention", "full_attention"],
        max_position_embeddings=1024, eos_token_id=None, attn_implementation="sdpa",
    )  # fmt: skip
    model = Gemma3ForCausalLM(cfg).eval()
    ids = _ids(80)
    ref = _gen(model, ids, n=6)
    with enable_lychee(model, RoleMap.from_model(model), topk=8):
        out = _gen(model, ids, n=6)
    assert torch.equal(out.sequences, ref.sequences)
    assert _max_diff(out.scores, ref.scores) < 1e-5
    sparse = RoleMap.from_model(model, [[True] * 4, [True] * 4, [True, False, True, False]])
    with enable_lychee(model, sparse, topk=4) as _:
        assert _gen(model, ids, n=3).sequences.shape == (1, 83)
    # the first full-attention layer must be all retrieval, even when layer 0 is sliding
    with pytest.raises(ValueError, match="layer 1 is the first hybrid layer"):
        enable_lychee(
            model, RoleMap.from_model(model, [[True] * 4, [True, False, True, True], [True] * 4])
        )
    assert not is_lychee_enabled(model)


def test_bad_input_raises_clear_errors(llama) -> None:
    other = _llama(layers=2)
    with pytest.raises(ValueError, match=r"different model.*num_layers: map 2 vs model 3"):
        enable_lychee(llama, RoleMap.from_model(other))
    renamed = RoleMap(
        ((True,) * 6,) * 3, {**RoleMap.from_model(llama).fingerprint, "name": "SmolLM2"}
    )
    llama.config.name_or_path = "tiny-llama"
    try:
        with pytest.raises(ValueError, match="name: map 'SmolLM2' vs model 'tiny-llama'"):
            enable_lychee(llama, renamed)
        enable_lychee(llama, renamed, strict_name=False)
        disable_lychee(llama)
    finally:
        llama.config.name_or_path = ""
    with pytest.raises(TypeError, match="RoleMap"):
        enable_lychee(llama, [[True] * 6] * 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="topk must be an integer >= 1"):
        enable_lychee(llama, RoleMap.from_model(llama), topk=0)
    with (
        enable_lychee(llama, RoleMap.from_model(llama)),
        pytest.raises(ValueError, match="already enabled"),
    ):
        enable_lychee(llama, RoleMap.from_model(llama))
    with (
        enable_dssa(llama, DSSAConfig(dense_len=1000)),
        pytest.raises(ValueError, match="DSSA is enabled"),
    ):
        enable_lychee(llama, RoleMap.from_model(llama))
    with pytest.raises(ValueError, match="not enabled"):
        disable_lychee(llama)


def test_role_training_meets_the_budget_and_leaves_the_model_unchanged(llama) -> None:
    seqs = _ids(72, seed=3, batch=4)
    state = {k: v.clone() for k, v in llama.state_dict().items()}
    cfg = RoleTrainingConfig(topk=8, decode_len=8, target_retrieval=0.5, steps=60, lr=0.1)
    result = train_head_roles(llama, seqs, cfg, progress=False)
    rm = result.role_map
    assert rm.num_retrieval == 9
    assert all(rm.layer(0))
    assert rm.fingerprint["num_layers"] == 3
    hist = result.history
    assert len(hist) == 60
    assert hist[-1]["expected_fraction"] < hist[0]["expected_fraction"]  # the constraint bites
    assert abs(hist[-1]["expected_fraction"] - 0.5) < 0.12
    assert llama.config._attn_implementation == "sdpa"
    assert all(torch.equal(v, state[k]) for k, v in llama.state_dict().items())
    assert all(p.requires_grad for p in llama.parameters())
    with enable_lychee(llama, rm, topk=8):
        assert _gen(llama, _ids(), n=3).sequences.shape == (1, 163)


def test_role_training_kv_budget_warmup_and_penalty(llama) -> None:
    # one gate per KV head (3 layers x 2 KV heads, layer 0 fixed), budget 4 of 6 KV heads
    seqs = _ids(72, seed=5, batch=2)
    cfg = RoleTrainingConfig(
        topk=8, decode_len=8, target_retrieval=4 / 6, steps=24, lr=0.1, lambda_lr=0.5,
        penalty=2.0, target_warmup=10, gate_unit="kv_head", score_from=0.5,
    )  # fmt: skip
    result = train_head_roles(llama, seqs, cfg, progress=False)
    rm = result.role_map
    assert result.gates.log_a.shape == (3, 2)
    assert rm.kv_heads_read() == 4
    assert rm.num_retrieval == 12  # whole groups of 3 query heads
    assert rm.expand_to_kv_groups() == rm
    hist = result.history
    start = 1 - 2 / 3 * (0.1 / 1.2)  # E[L0]/N at init: 2 fixed + 4 uniform-Kuma gates
    assert hist[0]["target"] == pytest.approx(start)
    assert hist[5]["target"] == pytest.approx(start + (4 / 6 - start) * 5 / 10)
    assert all(h["target"] == pytest.approx(4 / 6) for h in hist[10:])
    # loss = distill + lam_prev * gap + c/2 gap^2, lam <- lam + eta * gap
    lam = 0.0
    for h in hist:
        gap = h["expected_fraction"] - h["target"]
        assert h["loss"] == pytest.approx(h["distill"] + lam * gap + gap * gap, rel=1e-4, abs=1e-6)
        assert h["lambda"] == pytest.approx(lam + 0.5 * gap, abs=1e-6)
        lam = h["lambda"]
    # the hard map is the lexicographic selection of the averaged scores
    assert result.score_late is not None
    assert result.score_overall is not None
    keep = select_by_rank(result.score_late, result.score_overall, 4, result.gates.fixed)
    assert rm.retrieval == tuple(tuple(r) for r in keep.repeat_interleave(3, dim=1).tolist())
    with pytest.raises(ValueError, match="keeps fewer than the 2 KV heads"):
        train_head_roles(
            llama, seqs, RoleTrainingConfig(topk=4, target_retrieval=0.3, gate_unit="kv_head")
        )


def test_role_training_rank_by_final_vs_average(llama) -> None:
    # same seed and schedule: the gates train identically, only the read-out differs
    seqs = _ids(40, seed=6, batch=1)
    base = dict(topk=4, decode_len=6, target_retrieval=0.5, steps=12, lr=0.1)
    avg = train_head_roles(llama, seqs, RoleTrainingConfig(**base), progress=False)
    fin = train_head_roles(llama, seqs, RoleTrainingConfig(**base, rank_by="final"), progress=False)
    assert torch.equal(avg.gates.log_a, fin.gates.log_a)
    assert fin.role_map.retrieval == tuple(tuple(r) for r in fin.gates.hard(9).tolist())
    assert avg.role_map.num_retrieval == fin.role_map.num_retrieval == 9
    with pytest.raises(ValueError, match="rank_by"):
        RoleTrainingConfig(rank_by="median")
    with pytest.raises(ValueError, match="gate_unit"):
        RoleTrainingConfig(gate_unit="layer")
    with pytest.raises(ValueError, match="target_warmup"):
        RoleTrainingConfig(target_warmup=-1)
    with pytest.raises(ValueError, match="penalty"):
        RoleTrainingConfig(penalty=-0.1)
    with pytest.raises(ValueError, match="score_from"):
        RoleTrainingConfig(score_from=2.0)


def test_role_training_with_gates_pinned_open_has_zero_distillation_loss(llama) -> None:
    # log a = 6: Kuma samples sit at 1, every stretched gate clips to exactly 1, so the
    # student is the teacher; a wrong carry/causal mask in the training path would show
    seqs = _ids(40, seed=4, batch=2)
    cfg = RoleTrainingConfig(
        topk=4, decode_len=6, target_retrieval=1.0, steps=2, init_log_a=6.0, lr=1e-6
    )
    result = train_head_roles(llama, seqs, cfg, progress=False)
    assert result.history[0]["distill"] < 1e-10


def test_role_training_rejects_bad_input(llama) -> None:
    with pytest.raises(ValueError, match="prefix must hold topk"):
        train_head_roles(
            llama, _ids(20, batch=2), RoleTrainingConfig(topk=16, decode_len=8), progress=False
        )
    with pytest.raises(ValueError, match="keeps fewer than the 6 heads"):
        train_head_roles(
            llama,
            _ids(40, batch=2),
            RoleTrainingConfig(topk=4, target_retrieval=0.2),
            progress=False,
        )
    with pytest.raises(ValueError, match="share one length"):
        train_head_roles(llama, [torch.arange(40), torch.arange(30)], progress=False)
    with pytest.raises(ValueError, match="target_retrieval must be in"):
        RoleTrainingConfig(target_retrieval=0.0)


def _gemma3(layer_types: list[str]) -> torch.nn.Module:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(
        vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=len(layer_types),
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=16,
        layer_types=layer_types, max_position_embeddings=1024, eos_token_id=None,
        attn_implementation="sdpa",
    )  # fmt: skip
    return Gemma3ForCausalLM(cfg).eval()


def test_role_training_on_gemma3_pins_sliding_layers_and_matches_dense() -> None:
    # one full-attention layer (the first hybrid one): every gate is pinned, so the
    # training forward must reproduce the dense model, sliding windows (16 < 40) included
    pinned = _gemma3(["sliding_attention", "full_attention", "sliding_attention"])
    seqs = _ids(48, seed=7, batch=2)
    cfg = RoleTrainingConfig(topk=8, decode_len=8, target_retrieval=1.0, steps=2)
    res = train_head_roles(pinned, seqs, cfg, progress=False)
    assert all(h["distill"] < 1e-8 for h in res.history)
    assert res.role_map.num_retrieval == 12
    # two full layers, KV-head gates: 6 KV-head units, 4 pinned (sliding + first
    # hybrid), budget 5 keeps exactly one of the last layer's two KV heads
    model = _gemma3(["full_attention", "sliding_attention", "full_attention"])
    cfg = RoleTrainingConfig(
        topk=8, decode_len=8, target_retrieval=5 / 6, steps=6, gate_unit="kv_head"
    )
    rm = train_head_roles(model, seqs, cfg, progress=False).role_map
    assert all(rm.layer(0))
    assert all(rm.layer(1))
    assert sum(rm.layer(2)) == 2
    assert rm.layer(2)[0] == rm.layer(2)[1]
    with pytest.raises(ValueError, match="fewer than the 4 KV heads pinned"):
        train_head_roles(
            model, seqs, RoleTrainingConfig(topk=8, decode_len=8, target_retrieval=0.5,
                                            gate_unit="kv_head"), progress=False,
        )  # fmt: skip
    with enable_lychee(model, rm, topk=8):
        assert _gen(model, _ids(60), n=3).sequences.shape == (1, 63)
