"""dssa_attention and dense_attention refuse query, key and value of mixed dtype or device."""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import DSSAConfig, dense_attention, dssa_attention

CFG = DSSAConfig(window_size=64, topk=2, dense_len=128, backend="torch")


@pytest.mark.parametrize("fn", ["dense", "dssa"])
def test_mixed_dtypes_and_devices_raise_at_the_boundary(fn: str) -> None:
    run = dense_attention if fn == "dense" else lambda *a: dssa_attention(*a, CFG)
    q, k = torch.randn(1, 200, 4, 8), torch.randn(1, 200, 2, 8)
    with pytest.raises(ValueError, match=r"query, key, value must share a dtype"):
        run(q, k.double(), k.double())
    with pytest.raises(ValueError, match=r"query, key, value must be on one device"):
        run(q, k.to("meta"), k.to("meta"))
