"""Data parallelism of chunk-recurrent training under ``torchrun`` (2 gloo processes, CPU).

- :func:`chunk_recurrent_backward` on a ``DistributedDataParallel`` model averages the
  gradients over the ranks: each rank's half of the batch gives the full-batch gradients
  of ordinary back-propagation.
- ``lc-train oomb-finetune`` under ``torchrun`` shards the windows by rank, writes one
  log and one set of checkpoints (rank 0), ends with the weights of one process on the
  doubled batch, and resumes.

Run as a script under ``torchrun``, this file is the worker of the first test.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve()
SMALL = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _torchrun(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
        *args,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def _model_and_ids():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SMALL)).float()
    ids = torch.randint(0, 64, (4, 24), generator=torch.Generator().manual_seed(7))
    return model, ids


def _worker(out: Path) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model, ids = _model_and_ids()
    ddp = DistributedDataParallel(model)
    config = ChunkRecurrentConfig(chunk_size=8, page_size=4, block_tokens=8)
    result = chunk_recurrent_backward(ddp, ids.chunk(world)[rank], config=config)
    if rank == 0:
        grads = {n: p.grad for n, p in model.named_parameters()}
        torch.save({"grads": grads, "loss": result.loss}, out / "grads.pt")
    dist.barrier()
    dist.destroy_process_group()


def test_ddp_wrapped_model_gets_full_batch_gradients(tmp_path: Path) -> None:
    _torchrun(str(HERE), str(tmp_path))
    got = torch.load(tmp_path / "grads.pt")
    model, ids = _model_and_ids()
    model(ids, labels=ids).loss.backward()
    for name, p in model.named_parameters():
        err = ((got["grads"][name] - p.grad).norm() / p.grad.norm()).item()
        assert err < 1e-5, f"{name}: relative error {err:.2e}"


def _model_dir(path: Path) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**SMALL)).save_pretrained(path)
    return path


def _corpus(path: Path) -> Path:
    gen = torch.Generator().manual_seed(0)
    with path.open("w") as f:
        for _ in range(6):
            f.write(json.dumps({"input_ids": torch.randint(0, 64, (40,), generator=gen).tolist()}))
            f.write("\n")
    return path


def _weights(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(path / "final" / "model.safetensors"))


@pytest.mark.slow  # two torchrun launches and one single-process run: 1-5 min by machine load
def test_cli_under_torchrun_equals_one_process_on_the_doubled_batch(tmp_path: Path) -> None:
    from lc_train.cli import main

    model = _model_dir(tmp_path / "model")
    data = _corpus(tmp_path / "docs.jsonl")
    common = [
        "oomb-finetune", "--model", str(model), "--data", str(data), "--seq-len", "24",
        "--chunk", "8", "--page", "4", "--steps", "4", "--save-every", "2", "--lr", "3e-3",
        "--device", "cpu", "--no-progress", "--keep-checkpoints", "3",
    ]  # fmt: skip
    _torchrun("-m", "lc_train.cli", *common, "--batch", "1", "--out", str(tmp_path / "dp"))
    assert main([*common, "--batch", "2", "--out", str(tmp_path / "one")]) == 0

    rows = [json.loads(x) for x in (tmp_path / "dp" / "log.jsonl").read_text().splitlines()]
    one = [json.loads(x) for x in (tmp_path / "one" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]  # one log, written by rank 0
    for a, b in zip(rows, one, strict=True):
        assert abs(a["loss"] - b["loss"]) < 1e-5
    dp, single = _weights(tmp_path / "dp"), _weights(tmp_path / "one")
    for name, value in single.items():
        assert (dp[name] - value).abs().max().item() < 1e-5, name
    meta = json.loads((tmp_path / "dp" / "checkpoints" / "step-0000004" / "meta.json").read_text())
    assert meta["world_size"] == 2
    assert meta["data_position"] == 8

    # interrupted after step 2: resume on two ranks and end with the same weights
    ckpts = tmp_path / "dp" / "checkpoints"
    shutil.rmtree(ckpts / "step-0000004")
    shutil.rmtree(tmp_path / "dp" / "final")
    (ckpts / "latest").write_text("step-0000002")
    _torchrun("-m", "lc_train.cli", *common, "--batch", "1", "--out", str(tmp_path / "dp"),
              "--resume")  # fmt: skip
    resumed = _weights(tmp_path / "dp")
    for name, value in dp.items():
        assert (resumed[name] - value).abs().max().item() < 1e-6, name


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
