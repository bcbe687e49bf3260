"""Data-parallel chunk-recurrent training: two gloo processes equal one full-batch process.

Run as a script under ``python -m torch.distributed.run --nproc_per_node 2 this_file OUT``,
this file is the worker: each rank runs :func:`chunk_recurrent_backward` on its half of
the batch, the gradients are averaged with ``all_reduce`` (what DDP does, here by hand
because chunk-recurrent training calls backward once per chunk), and rank 0 saves them.
Both halves have the same number of target tokens, so the mean of the two per-rank mean
losses is the full-batch mean loss and the averaged gradients must equal the full-batch
gradients of ordinary back-propagation.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve()
SMALL = dict(
    vocab_size=101,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=6,
    num_key_value_heads=2,
    max_position_embeddings=128,
)
BATCH, SEQ = 4, 40


def _model_and_ids():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SMALL)).float()
    ids = torch.randint(0, 101, (BATCH, SEQ), generator=torch.Generator().manual_seed(7))
    return model, ids


def _worker(out: Path) -> None:
    import torch.distributed as dist

    from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model, ids = _model_and_ids()
    part = ids.chunk(world)[rank]
    config = ChunkRecurrentConfig(chunk_size=8, page_size=4, block_tokens=8)
    chunk_recurrent_backward(model, part, config=config)
    grads = {}
    for name, p in model.named_parameters():
        assert p.grad is not None
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        grads[name] = p.grad / world
    if rank == 0:
        out.mkdir(parents=True, exist_ok=True)
        torch.save(grads, out / "grads.pt")
    dist.barrier()  # no rank tears gloo down while its peer still uses the connection
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_gloo_processes_match_full_batch_backprop(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
        str(HERE),
        str(tmp_path),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ddp = torch.load(tmp_path / "grads.pt")
    model, ids = _model_and_ids()
    model(ids, labels=ids).loss.backward()
    assert set(ddp) == {n for n, _ in model.named_parameters()}
    for name, p in model.named_parameters():
        err = ((ddp[name] - p.grad).norm() / p.grad.norm().clamp_min(1e-12)).item()
        assert err < 1e-4, f"{name}: relative error {err:.2e}"


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
