"""Chunk-recurrent training of an FSDP2 (``fully_shard``) model: two gloo ranks on CPU.

Run as a script under ``python -m torch.distributed.run --nproc_per_node 2 this_file OUT``,
this file is the worker: each rank shards a tied-embedding Llama with ``fully_shard``
(every decoder layer, then the model), runs :func:`chunk_recurrent_backward` on its half
of the batch (chunked loss on), twice, and rank 0 saves the gathered gradients. Both
halves have the same number of target tokens, so FSDP's mean over the ranks must equal
the full-batch gradient of ordinary back-propagation in one process.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve()
SMALL = dict(
    vocab_size=97,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    tie_word_embeddings=True,
)
BATCH, SEQ = 2, 40


def _model_and_ids():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SMALL)).float()
    ids = torch.randint(0, 97, (BATCH, SEQ), generator=torch.Generator().manual_seed(7))
    return model, ids


def _worker(out: Path) -> None:
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from conftest import end_process_group
    from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))
    config = ChunkRecurrentConfig(chunk_size=16, page_size=4, block_tokens=8, loss_chunk_size=5)

    model, ids = _model_and_ids()
    part = ids.chunk(world)[rank]
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    refused = ""
    try:  # the embedding and LM head would stay sharded without a sharded root
        chunk_recurrent_backward(model, part, config=config)
    except ValueError as exc:
        refused = str(exc)
    fully_shard(model, mesh=mesh)
    for _ in range(2):  # a second step starts from a finalized backward
        model.zero_grad()
        chunk_recurrent_backward(model, part, config=config)
    grads = {name: p.grad.full_tensor() for name, p in model.named_parameters()}
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        torch.save({"grads": grads, "refused": refused}, out / "grads.pt")
    end_process_group()


def test_fully_sharded_model_gets_full_batch_gradients(tmp_path: Path, torchrun: Any) -> None:
    torchrun(str(HERE), str(tmp_path))
    saved = torch.load(tmp_path / "grads.pt")
    assert "fully_shard(model)" in saved["refused"]
    model, ids = _model_and_ids()
    model(ids, labels=ids).loss.backward()
    assert set(saved["grads"]) == {n for n, _ in model.named_parameters()}
    for name, p in model.named_parameters():
        got = saved["grads"][name]
        err = ((got - p.grad).norm() / p.grad.norm().clamp_min(1e-12)).item()
        assert err < 1e-5, f"{name}: relative error {err:.2e}"


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
