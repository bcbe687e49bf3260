"""Data parallelism of chunk-recurrent training under ``torchrun`` (2 gloo processes, CPU).

- :func:`chunk_recurrent_backward` on a ``DistributedDataParallel`` model averages the
  gradients over the ranks: each rank's half of the batch gives the full-batch gradients
  of ordinary back-propagation.
- ``lc-train oomb-finetune`` under ``torchrun`` shards the windows by rank, writes one
  log and one set of checkpoints (rank 0), ends with the weights of one process on the
  doubled batch: with DDP (weights replicated) and with ``--fsdp`` (weights, gradients
  and optimizer state sharded with FSDP2), which also resumes its shards.

Run as a script under ``torchrun``, this file is the worker of the first test.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

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


def _model_and_ids():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SMALL)).float()
    # 5 chunks of 8: the later chunks' key/value gradients reach the earlier ones
    ids = torch.randint(0, 64, (4, 40), generator=torch.Generator().manual_seed(7))
    return model, ids


def _worker(out: Path) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from conftest import end_process_group
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
    end_process_group()


def test_ddp_wrapped_model_gets_full_batch_gradients(tmp_path: Path, torchrun: Any) -> None:
    torchrun(str(HERE), str(tmp_path))
    got = torch.load(tmp_path / "grads.pt")
    model, ids = _model_and_ids()
    model(ids, labels=ids).loss.backward()
    assert set(got["grads"]) == {n for n, _ in model.named_parameters()}
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
    """The trained weights of a run: the model, or the LoRA adapters."""
    from safetensors.torch import load_file

    adapters = path / "final" / "adapter.safetensors"
    return load_file(str(adapters if adapters.is_file() else path / "final" / "model.safetensors"))


def _log(path: Path) -> list[dict[str, float]]:
    return [json.loads(x) for x in (path / "log.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The shared settings, and one process trained on the doubled batch (2 windows)."""
    from lc_train.cli import main

    root = tmp_path_factory.mktemp("oomb_torchrun")
    model = _model_dir(root / "model")
    data = _corpus(root / "docs.jsonl")
    common = [
        "oomb-finetune", "--model", str(model), "--data", str(data), "--seq-len", "24",
        "--chunk", "8", "--page", "4", "--steps", "4", "--save-every", "2", "--lr", "3e-3",
        "--device", "cpu", "--no-progress", "--keep-checkpoints", "3",
    ]  # fmt: skip
    assert main([*common, "--batch", "2", "--out", str(root / "one")]) == 0
    return {"root": root, "common": common, "one": root / "one"}


def _one_process_lora(run: dict[str, Any]) -> Path:
    from lc_train.cli import main

    one = run["root"] / "one-lora"
    args = [*run["common"], "--lora-rank", "2", "--batch", "2", "--out", str(one)]
    assert main(args) == 0
    return one


def _check_against_one_process(out: Path, one: Path) -> dict[str, torch.Tensor]:
    rows, single = _log(out), _log(one)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]  # one log, written by rank 0
    for a, b in zip(rows, single, strict=True):
        assert abs(a["loss"] - b["loss"]) < 1e-5
        assert abs(a["grad_norm"] - b["grad_norm"]) < 1e-5 * b["grad_norm"]
    dp, ref = _weights(out), _weights(one)
    assert set(dp) == set(ref)
    from safetensors.torch import load_file

    start = load_file(str(one.parent / "model" / "model.safetensors"))
    if all("lora_" in n for n in ref):  # adapters: B starts at zero
        assert max(ref[n].abs().max().item() for n in ref if "lora_B" in n) > 1e-3
    else:
        assert max((ref[n] - start[n]).abs().max().item() for n in ref) > 1e-3  # it trained
    for name, value in ref.items():
        assert (dp[name] - value).abs().max().item() < 1e-5, name
    meta = json.loads((out / "checkpoints" / "step-0000004" / "meta.json").read_text())
    assert meta["world_size"] == 2
    assert meta["data_position"] == 8
    return dp


def _interrupt_at_step_2(out: Path) -> None:
    ckpts = out / "checkpoints"
    shutil.rmtree(ckpts / "step-0000004")
    shutil.rmtree(out / "final")
    (ckpts / "latest").write_text("step-0000002")


@pytest.mark.slow  # one or two torchrun launches: 15-60 s by machine load
@pytest.mark.parametrize("mode", ["ddp", "fsdp", "fsdp-lora"])
def test_cli_under_torchrun_equals_one_process_on_the_doubled_batch(
    run: dict[str, Any], torchrun: Any, mode: str
) -> None:
    out = run["root"] / mode
    args = [*run["common"], "--batch", "1", "--out", str(out)]
    one = run["one"]
    if mode.startswith("fsdp"):
        args.append("--fsdp")
    if mode == "fsdp-lora":  # frozen base weights sharded beside trained adapters
        pytest.importorskip("peft")
        args += ["--lora-rank", "2"]
        one = _one_process_lora(run)
    torchrun("-m", "lc_train.cli", *args)
    final = _check_against_one_process(out, one)
    meta = json.loads((out / "checkpoints" / "step-0000004" / "meta.json").read_text())
    assert meta["config"]["fsdp"] is mode.startswith("fsdp")

    if mode == "ddp":
        # a replicated run resumes through the single-process path (test_oomb_finetune);
        # one launch less keeps the test session short
        return
    # interrupted after step 2: resume the shards on two ranks, end with the same weights
    _interrupt_at_step_2(out)
    torchrun("-m", "lc_train.cli", *args, "--resume")
    resumed = _weights(out)
    for name, value in final.items():
        assert (resumed[name] - value).abs().max().item() < 1e-6, name


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
