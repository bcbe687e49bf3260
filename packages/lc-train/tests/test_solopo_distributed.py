"""Data-parallel SoLoPO: two gloo processes under torchrun equal one process on the full batch.

Run as a script (``python -m torch.distributed.run --nproc_per_node 2 this_file OUT``),
this file is the worker: each rank trains one SGD step on half of the batch and rank 0
saves the change of the LoRA parameters. With SGD (lr 1, no clipping) the parameter change is minus
the gradient, so equal parameters mean equal gradients.

The alignment distance is ``"squared"`` here: with ``"abs"`` a row whose short/long reward
gap is near zero (these rows' gaps are 1e-5 to 1e-2) contributes the gap's gradient
times the gap's sign, which float rounding can flip; the all-reduce under test does not
depend on the distance.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

HERE = Path(__file__).resolve()


def _train(out: Path, per_device_batch: int, accumulation: int = 1) -> dict[str, torch.Tensor]:
    sys.path.insert(0, str(HERE.parent))
    from datasets import Dataset
    from test_solopo_trainer import char_tokenizer, dpo_args, lora, lora_state, rows, tiny_llama

    from lc_train.preference import SoLoPOConfig, SoLoPOTrainer

    torch.set_num_threads(1)
    args = dpo_args(
        out,
        per_device_train_batch_size=per_device_batch,
        gradient_accumulation_steps=accumulation,
        learning_rate=1.0,
        ddp_backend="gloo" if "WORLD_SIZE" in os.environ else None,
        dataloader_drop_last=True,
    )
    trainer = SoLoPOTrainer(
        tiny_llama(),
        args=args,
        solopo=SoLoPOConfig(
            method="dpo", beta=0.5, alignment_weight=1.0, chosen_only=False, distance="squared"
        ),
        train_dataset=Dataset.from_list(rows(4)),
        processing_class=char_tokenizer(),
        peft_config=lora(),
    )
    before = lora_state(trainer.model)
    trainer.train()
    after = lora_state(trainer.model)
    return {k: after[k] - before[k] for k in after}


def test_two_gloo_processes_match_one_process_full_batch(tmp_path: Path, torchrun: Any) -> None:
    pytest.importorskip("trl")
    torchrun(str(HERE), str(tmp_path / "ddp"))
    ddp = torch.load(tmp_path / "ddp" / "delta.pt")
    # the same global batch of 4 in one process: two accumulated micro-batches of 2 (the
    # micro-batches each rank runs) and one batch of 4
    accumulated = _train(tmp_path / "accumulated", per_device_batch=2, accumulation=2)
    single = _train(tmp_path / "single", per_device_batch=4)
    assert set(ddp) == set(single) == set(accumulated)
    assert any(float(v.abs().max()) > 1e-4 for v in single.values())  # a real update
    scale = max(float(v.abs().max()) for v in single.values())
    for key in single:
        # the all-reduce: equal to accumulating the two ranks' micro-batches (observed
        # bitwise); a missing all-reduce, a world-size factor or a half batch moves the
        # update by tens of percent
        torch.testing.assert_close(ddp[key], accumulated[key], rtol=1e-5, atol=1e-6 * scale)
        # Against one batch of 4 the update differs by up to 0.9% (relative norm per
        # tensor; 5e-3 of the largest update), the same for DDP and for accumulation:
        # float32 rounding of this tiny random model's ill-conditioned gradients (how the
        # rows are grouped changes the summation; in float64 a batch of 4 and 2 + 2 agree
        # to 1e-15)
        torch.testing.assert_close(ddp[key], single[key], rtol=1e-2, atol=1e-2 * scale)


if __name__ == "__main__":
    import torch.distributed as dist

    from conftest import end_process_group

    out = Path(sys.argv[1])
    delta = _train(out, per_device_batch=2)
    if dist.is_initialized() and dist.get_rank() == 0:
        out.mkdir(parents=True, exist_ok=True)
        torch.save(delta, out / "delta.pt")
    end_process_group()
