"""CompressedKeyCache misuse is caught: another config, another layer, another object."""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import CompressedKeyCache, DSSAConfig, compress_keys, dssa_attention

torch.set_num_threads(1)
FINE = DSSAConfig.training_free()  # 4-token spans every 4
COARSE = DSSAConfig.small()  # 32-token spans every 16


def _k(s: int = 300, seed: int = 0) -> torch.Tensor:
    return torch.randn(1, s, 2, 8, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("host_check", [True, False], ids=["host", "device"])
@pytest.mark.parametrize(("first", "then"), [(FINE, COARSE), (COARSE, FINE)], ids=["f-c", "c-f"])
def test_a_cache_fed_another_config_recomputes(
    host_check: bool, first: DSSAConfig, then: DSSAConfig
) -> None:
    """Keys compressed under one config are never extended under another (on the device
    path the two shapes differ and the pick between them failed)."""
    k = _k()
    cache = CompressedKeyCache(host_check=host_check)
    cache.update(k[:, :200], first)
    torch.testing.assert_close(cache.update(k, then), compress_keys(k, then))
    torch.testing.assert_close(cache.update(k, first), compress_keys(k, first))
    assert cache.full_recomputes == 3


def test_one_cache_serves_one_layer() -> None:
    cfg = DSSAConfig(window_size=64, topk=2, dense_len=128, backend="torch")
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(1, 300, 4, 8, generator=g), torch.randn(1, 300, 2, 8, generator=g)
    cache = CompressedKeyCache()
    dssa_attention(q, k, k, cfg, cache=cache, layer_idx=3)
    dssa_attention(q[:, -1:], k, k, cfg, cache=cache, layer_idx=3)  # its own layer: fine
    with pytest.raises(ValueError, match="CompressedKeyCache belongs to layer 3, got layer_idx=4"):
        dssa_attention(q[:, -1:], k, k, cfg, cache=cache, layer_idx=4)
    with pytest.raises(TypeError, match="cache must be a CompressedKeyCache"):
        dssa_attention(q, k, k, cfg, cache={})  # type: ignore[arg-type]
