"""LycheeDecode's decode step and head plans reject bad input at the boundary."""

from __future__ import annotations

import pytest
import torch

from lc_attention.lychee import hybrid_decode_attention
from lc_attention.lychee.attention import decode_step, head_plan

torch.set_num_threads(1)
B, HQ, HKV, T, D = 2, 4, 2, 11, 8
RETRIEVAL = [True, False, True, False]  # heads 1 and 3 are sparse


def _qkv(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, HQ, D, generator=g)
    k = torch.randn(B, HKV, T, D, generator=g).transpose(1, 2)  # HF layout, strided view
    v = torch.randn(B, HKV, T, D, generator=g).transpose(1, 2)
    return q, k, v


def _indices(seed: int = 1, topk: int = 3) -> torch.Tensor:
    return torch.randint(0, T, (B, HQ, topk), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("bad", [T, T + 3, -1, -T])
def test_decode_step_rejects_indices_outside_the_cache(bad: int) -> None:
    """A position past the cache would read the next KV head's rows (a negative one the
    previous head's): a ValueError naming the argument, the entry and the range."""
    q, k, v = _qkv()
    plan = head_plan(RETRIEVAL, None, HQ, HKV)
    idx = _indices()
    idx[1, 3, 2] = bad  # a sparse head's row
    with pytest.raises(ValueError, match=rf"indices\[1, 3, 2\] = {bad} .*\[0, {T}\)"):
        decode_step(plan, q, k, v, indices=idx, topk=3)
    with pytest.raises(ValueError, match="indices"):
        hybrid_decode_attention(q, k, v, retrieval=RETRIEVAL, indices=idx, topk=3)
    decode_step(plan, q, k, v, indices=idx.clamp(0, T - 1), topk=3)  # in range: fine


def test_decode_step_range_check_reads_only_the_sparse_rows_and_can_be_skipped() -> None:
    q, k, v = _qkv(2)
    plan = head_plan(RETRIEVAL, None, HQ, HKV)
    idx = _indices(3)
    ref, _ = decode_step(plan, q, k, v, indices=idx, topk=3)
    idx[:, 0] = T + 5  # a retrieval head's row is never read, whatever it holds
    out, new = decode_step(plan, q, k, v, indices=idx, topk=3)
    assert torch.equal(out, ref)
    assert int(new[:, 0].max()) < T  # and is replaced by the published positions
    ok = _indices(3)
    out2, _ = decode_step(plan, q, k, v, indices=ok, topk=3, check=False)
    assert torch.equal(out2, ref)


def test_decode_step_rejects_indices_of_the_wrong_kind() -> None:
    q, k, v = _qkv()
    plan = head_plan(RETRIEVAL, None, HQ, HKV)
    with pytest.raises(ValueError, match="indices must be an integer tensor"):
        decode_step(plan, q, k, v, indices=_indices().float(), topk=3)
    with pytest.raises(ValueError, match="indices is on meta"):
        decode_step(plan, q, k, v, indices=_indices().to("meta"), topk=3)


def test_decode_step_checks_its_tensors_and_plan() -> None:
    q, k, v = _qkv()
    plan = head_plan(RETRIEVAL, None, HQ, HKV)
    idx = _indices()
    with pytest.raises(TypeError, match="plan must be a HeadPlan"):
        decode_step(RETRIEVAL, q, k, v, indices=idx, topk=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected q"):
        decode_step(plan, q[..., None], k, v, indices=idx, topk=3)
    with pytest.raises(ValueError, match="does not fit"):
        decode_step(plan, q[:1], k, v, indices=idx[:1], topk=3)
    meta = head_plan(RETRIEVAL, None, HQ, HKV, device="meta")
    with pytest.raises(ValueError, match="plan's index tensors are on meta"):
        decode_step(meta, q, k, v, indices=idx, topk=3)
    with pytest.raises(ValueError, match="valid must be a bool tensor"):
        decode_step(plan, q, k, v, indices=idx, topk=3, valid=torch.ones(B, T, dtype=torch.long))
    with pytest.raises(ValueError, match="out_indices must be an int64 tensor"):
        decode_step(plan, q, k, v, indices=idx, topk=3, out_indices=idx.int())


def test_head_plan_masks_must_be_booleans() -> None:
    """Head ids passed where a mask belongs (``[0, 2]`` for heads 0 and 2) would read as
    flags (``[False, True]``); only booleans (or 0/1) are masks."""
    with pytest.raises(ValueError, match=r"retrieval must hold booleans"):
        head_plan([0, 2, 1, 1], None, HQ, HKV)
    with pytest.raises(ValueError, match=r"publish must hold booleans"):
        head_plan(RETRIEVAL, torch.tensor([0.5, 0.0, 0.0, 0.0]), HQ, HKV)
    plan = head_plan([1, 0, 1, 0], [1, 0, 0, 0], HQ, HKV)
    assert [g.heads for g in plan.groups] == [(0,), (2,)]
    assert plan.sparse == (1, 3)
