"""The small BAM transformer: baselines as special cases, paths agree, bad inputs."""

from __future__ import annotations

import pytest
import torch

from lc_attention.bam import BAMTransformer, BAMTransformerConfig

torch.set_num_threads(1)


def _cfg(**kw) -> BAMTransformerConfig:
    return BAMTransformerConfig(vocab_size=20, dim=32, num_heads=4, **kw)


def test_sdpa_and_blockwise_models_give_the_same_logits_and_grads() -> None:
    tokens = torch.randint(0, 20, (2, 45), generator=torch.Generator().manual_seed(0))
    a = BAMTransformer(_cfg(method="sdpa", shape_init=0.8), seed=3)
    b = BAMTransformer(_cfg(method="blockwise", block_size=16, shape_init=0.8), seed=3)
    la, lb = a(tokens), b(tokens)
    torch.testing.assert_close(la, lb, rtol=1e-4, atol=1e-4)
    la.square().mean().backward()
    lb.square().mean().backward()
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-3, atol=1e-5, msg=name)
    assert a.priors()[0].theta_b.grad is not None
    assert float(a.priors()[0].theta_b.grad.abs().sum()) > 0


def test_alibi_model_is_bam_frozen_at_the_alibi_point() -> None:
    tokens = torch.randint(0, 20, (1, 17), generator=torch.Generator().manual_seed(1))
    alibi = BAMTransformer(_cfg(position="alibi"), seed=0)
    bam = BAMTransformer(_cfg(position="bam"), seed=0)
    torch.testing.assert_close(alibi(tokens), bam(tokens))
    assert not any(p.requires_grad for pr in alibi.priors() for p in pr.parameters())
    assert all(p.requires_grad for pr in bam.priors() for p in pr.parameters())


@pytest.mark.parametrize("position", ["nope", "rope"])
def test_baselines_have_no_prior(position: str) -> None:
    model = BAMTransformer(_cfg(position=position))
    assert model.priors() == []
    assert model(torch.zeros(1, 6, dtype=torch.long)).shape == (1, 6, 20)


def test_nope_model_is_blind_to_order_of_earlier_tokens() -> None:
    # one causal layer without positions: the last output depends only on the multiset of tokens
    model = BAMTransformer(_cfg(position="nope", num_layers=1), seed=0)
    x = torch.tensor([[3, 7, 1, 9, 5]])
    y = torch.tensor([[9, 1, 7, 3, 5]])
    torch.testing.assert_close(model(x)[0, -1], model(y)[0, -1], rtol=1e-5, atol=1e-5)
    bam = BAMTransformer(_cfg(position="bam", num_layers=1), seed=0)
    assert not torch.allclose(bam(x)[0, -1], bam(y)[0, -1], atol=1e-4)


def test_model_bad_inputs() -> None:
    model = BAMTransformer(_cfg(max_seq_len=8))
    with pytest.raises(ValueError, match="max_seq_len"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="token ids"):
        model(torch.full((1, 4), 20, dtype=torch.long))
    with pytest.raises(ValueError, match="int64"):
        model(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="position"):
        _cfg(position="sinusoidal")
    with pytest.raises(ValueError, match="multiple of num_heads"):
        BAMTransformerConfig(vocab_size=20, dim=30, num_heads=4)


def test_linear_shape_init_spreads_heads_from_flat_to_laplace() -> None:
    model = BAMTransformer(_cfg(shape_init="linear", train_scale=False, train_loc=False))
    prior = model.priors()[0]
    torch.testing.assert_close(prior.theta_b.detach(), torch.tensor([0.0, 1 / 3, 2 / 3, 1.0]))
    assert prior.theta_b.requires_grad
    assert not prior.theta_a.requires_grad
    assert not prior.theta_m.requires_grad
    # a shape-0 head has a constant prior: its attention equals NoPE's
    b = prior(torch.arange(6), torch.arange(6))
    torch.testing.assert_close(b[0], torch.full((6, 6), -float(prior.scale[0])))


@pytest.mark.parametrize("bad", ["cubic", 0.0, -1.0, float("inf")])
def test_bad_shape_init_is_rejected(bad) -> None:
    with pytest.raises(ValueError, match="shape_init"):
        _cfg(shape_init=bad)
