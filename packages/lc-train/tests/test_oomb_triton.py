"""Chunk-recurrent training through the Triton paged-attention kernels.

On CUDA ``attention_backend="auto"`` picks the Triton kernels; here they run under
Triton's interpreter. ``TRITON_INTERPRET`` must be set before triton is imported, and
other tests in this process may already have imported it, so without a GPU the check
runs in a fresh interpreter process (this file is also that process's script).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve()
SMALL = dict(
    vocab_size=101,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)


def _check(device: str) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SMALL)).float().to(device)
    ids = torch.randint(0, 101, (1, 16), generator=torch.Generator().manual_seed(3)).to(device)
    ref = model(ids, labels=ids).loss
    ref.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    for offload in (False, True):
        config = ChunkRecurrentConfig(
            chunk_size=8, page_size=4, block_tokens=8, attention_backend="triton", offload=offload
        )
        result = chunk_recurrent_backward(model, ids, config=config)
        torch.testing.assert_close(result.loss, ref.detach(), rtol=1e-5, atol=1e-6)
        for name, p in model.named_parameters():
            err = ((p.grad - want[name]).norm() / want[name].norm().clamp_min(1e-12)).item()
            assert err < 1e-4, f"offload={offload} {name}: relative error {err:.2e}"
        model.zero_grad()


def test_triton_backend_gives_exact_gradients() -> None:
    if torch.cuda.is_available():
        _check("cuda")
        return
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, str(HERE)], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ok" in proc.stdout


def test_triton_backend_on_cpu_without_interpreter_is_refused() -> None:
    if torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        pytest.skip("needs a CPU-only process without Triton's interpreter")
    from transformers import LlamaConfig, LlamaForCausalLM

    from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

    model = LlamaForCausalLM(LlamaConfig(**SMALL)).float()
    config = ChunkRecurrentConfig(
        chunk_size=8, page_size=4, block_tokens=8, attention_backend="triton"
    )
    with pytest.raises(ValueError, match="TRITON_INTERPRET"):
        chunk_recurrent_backward(model, torch.randint(0, 101, (1, 16)), config=config)


if __name__ == "__main__":
    torch.set_num_threads(1)
    _check("cpu")
    print("ok")
