"""SmolLM2-135M's architecture with random weights, for timing on machines without its weights.

Latency depends on the geometry (30 layers, hidden 576, 9 query / 3 KV heads of dim 64,
MLP 1536, vocabulary 49152), not on the weight values, so speed benchmarks on a GPU
machine (which has no copy of the embedded model) use this stand-in.
"""

from __future__ import annotations

import torch


def random_smollm2(
    layers: int = 30, device: str = "cpu", dtype: torch.dtype = torch.float32, max_len: int = 8192
):
    """A ``LlamaForCausalLM`` shaped like SmolLM2-135M, seeded random weights, eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=layers,
        num_attention_heads=9,
        num_key_value_heads=3,
        max_position_embeddings=max(max_len, 8192),
        rope_theta=100000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
    )
    cfg._attn_implementation = "sdpa"
    return LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
