"""Chunked LM-head cross-entropy gives the loss and gradients of the unchunked loss."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import Qwen2Config, Qwen2ForCausalLM

from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward
from lc_train.oomb.loss import lm_head_loss_backward


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm().clamp_min(1e-12)).item()


@pytest.mark.parametrize("loss_chunk", [None, 1, 5, 13, 1000])
def test_piecewise_loss_equals_autograd_of_the_whole_loss(loss_chunk: int | None) -> None:
    gen = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(24, 37)
    hidden = torch.randn(2, 19, 24, generator=gen, requires_grad=True)
    targets = torch.randint(0, 37, (2, 19), generator=gen)
    targets[0, :12] = -100  # a piece of 5 with no target at all is skipped
    targets[1, -1] = -100
    normalizer = 41.0

    ref = (
        F.cross_entropy(head(hidden).float().reshape(-1, 37), targets.reshape(-1), reduction="sum")
        / normalizer
    )
    ref.backward()
    ref_grads = [hidden.grad.clone(), head.weight.grad.clone(), head.bias.grad.clone()]
    head.zero_grad()

    loss, grad_hidden = lm_head_loss_backward(head, hidden, targets, normalizer, loss_chunk)
    assert loss.requires_grad is False
    assert grad_hidden.shape == hidden.shape
    torch.testing.assert_close(loss, ref.detach(), rtol=1e-6, atol=0)
    for got, want in zip([grad_hidden, head.weight.grad, head.bias.grad], ref_grads):
        assert _rel(got, want) < 1e-6


def test_head_sees_at_most_loss_chunk_positions_at_once() -> None:
    head = torch.nn.Linear(8, 11)
    widths: list[int] = []
    head.register_forward_hook(lambda m, i, o: widths.append(o.shape[0]))
    hidden = torch.randn(3, 10, 8)
    targets = torch.randint(0, 11, (3, 10))
    lm_head_loss_backward(head, hidden, targets, 30.0, loss_chunk=4)
    assert widths == [4] * 7 + [2]
    with pytest.raises(ValueError, match="loss_chunk"):
        lm_head_loss_backward(head, hidden, targets, 30.0, loss_chunk=0)
    with pytest.raises(ValueError, match="targets"):
        lm_head_loss_backward(head, hidden, targets[:, :-1], 30.0)


def test_config_rejects_a_bad_loss_chunk() -> None:
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="loss_chunk_size"):
            ChunkRecurrentConfig(loss_chunk_size=bad)  # type: ignore[arg-type]
    assert ChunkRecurrentConfig(loss_chunk_size=None).loss_chunk_size is None


def test_chunk_recurrent_gradients_with_chunked_loss_equal_unchunked_and_full() -> None:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=157,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        use_sliding_window=False,
        tie_word_embeddings=True,  # the head's and the embedding's gradients add up
    )
    model = Qwen2ForCausalLM(config).float()
    ids = torch.randint(0, 157, (2, 45), generator=torch.Generator().manual_seed(1))
    labels = ids.clone()
    labels[:, :17] = -100  # a chunk with no target still carries key/value gradients
    widths: list[int] = []
    model.get_output_embeddings().register_forward_hook(
        lambda m, i, o: widths.append(o.reshape(-1, o.shape[-1]).shape[0])
    )

    def run(loss_chunk: int | None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        model.zero_grad()
        cfg = ChunkRecurrentConfig(
            chunk_size=16, page_size=4, block_tokens=8, loss_chunk_size=loss_chunk
        )
        loss = chunk_recurrent_backward(model, ids, labels, cfg).loss
        return loss, {n: p.grad.clone() for n, p in model.named_parameters()}

    model.zero_grad()
    full = model(ids, labels=labels).loss
    full.backward()
    full_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    widths.clear()
    whole_loss, whole = run(None)
    assert max(widths) == 2 * 16  # batch x chunk positions at once
    widths.clear()
    piece_loss, pieces = run(7)
    assert max(widths) == 7
    torch.testing.assert_close(piece_loss, whole_loss, rtol=1e-6, atol=0)
    torch.testing.assert_close(piece_loss, full.detach(), rtol=1e-5, atol=0)
    for name, grad in pieces.items():
        assert _rel(grad, whole[name]) < 1e-5, name
        assert _rel(grad, full_grads[name]) < 1e-5, name


@pytest.mark.parametrize(
    ("flag", "expected"), [([], 512), (["--loss-chunk", "0"], None), (["--loss-chunk", "64"], 64)]
)
def test_cli_passes_the_loss_chunk_to_training(
    monkeypatch: pytest.MonkeyPatch, flag: list[str], expected: int | None
) -> None:
    import importlib
    from types import SimpleNamespace

    from lc_train.cli import main

    ft = importlib.import_module(
        "lc_train.oomb.finetune"
    )  # the package exports a function of that name

    seen = []

    def fake(config, progress=True):
        seen.append(config.chunk_config())
        return SimpleNamespace(losses={}, steps_done=0)

    monkeypatch.setattr(ft, "finetune", fake)
    argv = ["oomb-finetune", "--model", "m", "--data", "d.txt", "--out", "o", *flag]
    assert main(argv) == 0
    assert seen[0].loss_chunk_size == expected
