"""Hybrid decode attention on tensors, and role maps (JSON, fingerprints, bad input)."""

from __future__ import annotations

import pytest
import torch

from lc_attention.lychee import LycheeConfig, RoleMap, block_topk_indices, hybrid_decode_attention
from lc_attention.lychee._kernels import kernels_available
from lc_attention.lychee.attention import decode_step, head_plan, padding_bias
from lc_attention.lychee.hf import _publish_plan

torch.set_num_threads(1)
B, HQ, HKV, T, D = 2, 6, 2, 37, 16
BACKENDS = ["torch"] + (["triton"] if kernels_available() else [])
# the Triton kernels (on CPU under Triton's interpreter, see conftest) take float32 at most
PRECISION = {"torch": (torch.float64, 1e-10), "triton": (torch.float32, 1e-5)}


def _qkv(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, HQ, D, generator=g, dtype=torch.float64)
    # Hugging Face layout [B, HKV, T, D], passed as a strided [B, T, HKV, D] view
    k = torch.randn(B, HKV, T, D, generator=g, dtype=torch.float64)
    v = torch.randn(B, HKV, T, D, generator=g, dtype=torch.float64)
    return q, k.transpose(1, 2), v.transpose(1, 2)


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-10) -> None:
    # plain check: torch.testing's first call imports heavy modules (seconds on a busy CPU)
    assert a.shape == b.shape
    assert float((a - b).abs().max()) <= tol, float((a - b).abs().max())


def _attend(q, k, v, keep: torch.Tensor | None = None) -> torch.Tensor:
    """Reference: per head, softmax over the kept positions (all when ``keep`` is None)."""
    kx = k.repeat_interleave(HQ // HKV, dim=2)  # [B, T, HQ, D]
    vx = v.repeat_interleave(HQ // HKV, dim=2)
    logits = torch.einsum("bhd,bthd->bht", q, kx) * D**-0.5
    if keep is not None:
        logits = logits.masked_fill(~keep, float("-inf"))
    return torch.einsum("bht,bthd->bhd", torch.softmax(logits, -1), vx)


@pytest.mark.parametrize("backend", BACKENDS)
def test_all_retrieval_is_full_attention_and_publishes_topk(backend: str) -> None:
    dtype, tol = PRECISION[backend]
    q, k, v = (x.to(dtype) for x in _qkv())
    out, idx = hybrid_decode_attention(
        q, k, v, retrieval=[True] * HQ, indices=None, topk=5, backend=backend
    )
    _close(out, _attend(q, k, v), tol)
    logits = torch.einsum("bhd,bthd->bht", q, k.repeat_interleave(3, dim=2))
    want = logits.topk(5, dim=-1).indices.sort(-1).values
    assert torch.equal(idx.sort(-1).values, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_heads_attend_only_to_the_given_positions(backend: str) -> None:
    dtype, tol = PRECISION[backend]
    q, k, v = (x.to(dtype) for x in _qkv(1))
    retrieval = [True, False, False, True, False, True]
    g = torch.Generator().manual_seed(5)
    given = torch.stack([torch.randperm(T, generator=g)[:7] for _ in range(B * HQ)]).view(B, HQ, 7)
    out, idx = hybrid_decode_attention(
        q, k, v, retrieval=retrieval, indices=given, topk=7, backend=backend
    )
    keep = torch.zeros(B, HQ, T, dtype=torch.bool).scatter_(-1, given, True)
    ref = _attend(q, k, v, keep)
    full = _attend(q, k, v)
    sparse = torch.tensor(retrieval).logical_not()
    _close(out[:, sparse], ref[:, sparse], tol)
    _close(out[:, ~sparse], full[:, ~sparse], tol)
    assert torch.equal(idx[:, sparse], given[:, sparse])  # sparse rows pass through
    assert not torch.equal(idx[:, ~sparse], given[:, ~sparse])  # retrieval rows refreshed


def test_sparse_with_every_position_equals_full_attention() -> None:
    q, k, v = _qkv(2)
    every = torch.arange(T).expand(B, HQ, T)
    out, _ = hybrid_decode_attention(q, k, v, retrieval=[True] + [False] * 5, indices=every, topk=T)
    _close(out, _attend(q, k, v))


def test_publish_flags_limit_which_rows_change() -> None:
    q, k, v = _qkv(3)
    given = torch.zeros(B, HQ, 4, dtype=torch.long)
    publish = [True, False, False, False, False, False]
    _, idx = hybrid_decode_attention(
        q,
        k,
        v,
        retrieval=[True, True, False, False, False, False],
        indices=given,
        topk=4,
        publish=publish,
    )
    assert not torch.equal(idx[:, 0], given[:, 0])
    assert torch.equal(idx[:, 1:], given[:, 1:])


@pytest.mark.parametrize("layout", ["hf_view", "contiguous", "preallocated"], ids=lambda x: x)
def test_sparse_gather_is_the_same_for_every_cache_layout(layout: str) -> None:
    """The one-``index_select`` gather (strided row table) and the fallback agree."""
    q, k, v = _qkv(6)  # k, v: [B, T, HKV, D] views of [B, HKV, T, D]
    if layout == "contiguous":  # [B, T, HKV, D] contiguous: rows not evenly spaced per head
        k, v = k.contiguous(), v.contiguous()
    elif layout == "preallocated":  # a length view of a larger [B, HKV, cap, D] buffer
        kb = torch.zeros(B, HKV, T + 9, D, dtype=k.dtype)
        vb = torch.zeros_like(kb)
        kb[:, :, :T], vb[:, :, :T] = k.transpose(1, 2), v.transpose(1, 2)
        k, v = kb[:, :, :T].transpose(1, 2), vb[:, :, :T].transpose(1, 2)
    g = torch.Generator().manual_seed(7)
    given = torch.stack([torch.randperm(T, generator=g)[:5] for _ in range(B * HQ)]).view(B, HQ, 5)
    retrieval = [True, False, False, False, True, False]
    out, _ = hybrid_decode_attention(q, k, v, retrieval=retrieval, indices=given, topk=5)
    keep = torch.zeros(B, HQ, T, dtype=torch.bool).scatter_(-1, given, True)
    sparse = ~torch.tensor(retrieval)
    _close(out[:, sparse], _attend(q, k, v, keep)[:, sparse])
    _close(out[:, ~sparse], _attend(q, k, v)[:, ~sparse])


def test_in_place_indices_equal_the_copying_path() -> None:
    q, k, v = _qkv(8)
    retrieval = [True, False, True, False, False, True]
    plan = head_plan(retrieval, None, HQ, HKV)
    given = torch.randint(0, T, (B, HQ, 6), generator=torch.Generator().manual_seed(1))
    out_a, idx_a = decode_step(plan, q, k, v, indices=given, topk=6)
    buf = given.clone()
    out_b, idx_b = decode_step(plan, q, k, v, indices=buf, topk=6, out_indices=buf)
    assert idx_b is buf
    assert torch.equal(out_a, out_b)
    assert torch.equal(idx_a.sort(-1).values, idx_b.sort(-1).values)
    assert torch.equal(given[:, 1], buf[:, 1])  # sparse rows untouched


@pytest.mark.parametrize(
    ("t", "block", "k"), [(1000, 16, 7), (1037, 8, 32), (517, 4, 60), (64, 16, 5)]
)
def test_block_topk_equals_a_full_topk(t: int, block: int, k: int) -> None:
    g = torch.Generator().manual_seed(t)
    s = torch.randn(2, 3, t, generator=g, dtype=torch.float64)
    s[0, 0, -3:] = 50.0 + torch.arange(3.0)  # winners in a partial tail block
    s[1, 2, :block] = 40.0 + torch.arange(float(block))  # one block, many winners
    got = block_topk_indices(s, k, block).sort(-1).values
    want = torch.topk(s, k, dim=-1).indices.sort(-1).values
    assert torch.equal(got, want)
    assert got.max() < t


def test_padding_positions_are_never_attended() -> None:
    q, k, v = _qkv(4)
    valid = torch.ones(B, T, dtype=torch.bool)
    valid[0, :10] = False  # left padding of the first row
    out, idx = hybrid_decode_attention(
        q, k, v, retrieval=[True] * HQ, indices=None, topk=8, valid=valid
    )
    keep = valid[:, None, :].expand(B, HQ, T)
    _close(out, _attend(q, k, v, keep))
    assert (idx[0] >= 10).all()


def test_bad_input_raises_clear_errors() -> None:
    q, k, v = _qkv()
    full = [True] * HQ
    with pytest.raises(ValueError, match="topk must be an integer in"):
        hybrid_decode_attention(q, k, v, retrieval=full, indices=None, topk=T + 1)
    with pytest.raises(ValueError, match="sparse heads need indices"):
        hybrid_decode_attention(q, k, v, retrieval=[True] + [False] * 5, indices=None, topk=4)
    with pytest.raises(ValueError, match="indices must be"):
        hybrid_decode_attention(
            q, k, v, retrieval=[True] + [False] * 5, indices=torch.zeros(B, HQ, 3).long(), topk=4
        )
    with pytest.raises(ValueError, match="one entry per query head"):
        hybrid_decode_attention(q, k, v, retrieval=[True] * 5, indices=None, topk=4)
    with pytest.raises(ValueError, match="expected q"):
        hybrid_decode_attention(q[:, :, None], k, v, retrieval=full, indices=None, topk=4)
    with pytest.raises(ValueError, match="does not fit"):
        hybrid_decode_attention(q[:, :5], k, v, retrieval=full[:5], indices=None, topk=4)
    with pytest.raises(ValueError, match="publish may only flag retrieval heads"):
        hybrid_decode_attention(
            q,
            k,
            v,
            retrieval=[True] + [False] * 5,
            indices=torch.zeros(B, HQ, 4).long(),
            topk=4,
            publish=[True] * HQ,
        )
    with pytest.raises(ValueError, match="backend must be one of"):
        hybrid_decode_attention(q, k, v, retrieval=full, indices=None, topk=4, backend="cuda")
    with pytest.raises(ValueError, match="topk must be an integer >= 1"):
        LycheeConfig(topk=0)


def test_publish_plan_tracks_the_last_reader_per_head() -> None:
    r = [[True, True], [False, True], [True, False], [False, False]]
    assert _publish_plan(r, [True] * 4) == [
        [True, False],
        [False, True],
        [True, False],
        [False, False],
    ]
    # a non-hybrid (sliding) layer in between neither reads nor refreshes
    assert _publish_plan([[True], [True], [False]], [True, False, True]) == [
        [True],
        [False],
        [False],
    ]


def test_role_map_roundtrip_and_validation(tmp_path) -> None:
    fp = {
        "model_type": "llama",
        "name": "tiny",
        "num_layers": 2,
        "num_heads": 3,
        "num_kv_heads": 1,
        "head_dim": 8,
    }
    rm = RoleMap(((True, True, True), (False, True, False)), fp, {"note": "x"})
    path = rm.save(tmp_path / "roles.json")
    back = RoleMap.load(path)
    assert back == rm
    assert back.fingerprint == fp
    assert back.meta == {"note": "x"}
    assert back.num_retrieval == 4
    assert back.retrieval_fraction == pytest.approx(4 / 6)
    with pytest.raises(ValueError, match=r"retrieval\[0\] must be all True"):
        RoleMap(((True, False), (True, True)))
    with pytest.raises(ValueError, match="row 1 has 1 heads"):
        RoleMap(((True, True), (True,)))
    with pytest.raises(ValueError, match="fingerprint says"):
        RoleMap(((True,),), fp)
    with pytest.raises(ValueError, match="not a LycheeDecode role map"):
        RoleMap.from_dict({"format": "other"})
    bad = rm.to_dict()
    bad["retrieval"][1][0] = 2
    with pytest.raises(ValueError, match="0 or 1"):
        RoleMap.from_dict(bad)


def _prealloc(x: torch.Tensor, extra: int) -> torch.Tensor:
    """``x [B, T, HKV, D]`` as a length view of a larger ``[B, HKV, T + extra, D]`` buffer."""
    buf = torch.zeros(B, HKV, T + extra, D, dtype=x.dtype)
    buf[:, :, :T] = x.transpose(1, 2)
    return buf[:, :, :T].transpose(1, 2)


def test_one_plan_serves_caches_whose_strides_change() -> None:
    """A plan reused across steps keeps row offsets per cache geometry: a grown buffer
    (new row stride), a contiguous cache (fallback) and keys and values of different
    strides (one gather each) all give the reference."""
    q, k, v = _qkv(9)
    retrieval = [True, False, False, False, True, False]
    plan = head_plan(retrieval, [False] * HQ, HQ, HKV)
    g = torch.Generator().manual_seed(3)
    given = torch.stack([torch.randperm(T, generator=g)[:6] for _ in range(B * HQ)]).view(B, HQ, 6)
    keep = torch.zeros(B, HQ, T, dtype=torch.bool).scatter_(-1, given, True)
    sparse = ~torch.tensor(retrieval)
    want = _attend(q, k, v, keep)
    layouts = [
        (_prealloc(k, 9), _prealloc(v, 9)),
        (_prealloc(k, 9), _prealloc(v, 9)),  # same geometry: offsets reused
        (_prealloc(k, 30), _prealloc(v, 30)),  # the buffer grew: new row stride
        (k.contiguous(), v.contiguous()),  # rows of a head not evenly spaced: fallback
        (k.contiguous(), _prealloc(v, 4)),  # keys and values laid out differently
    ]
    for kc, vc in layouts:
        out, _ = decode_step(plan, q, kc, vc, indices=given, topk=6)
        _close(out[:, sparse], want[:, sparse])
        _close(out[:, ~sparse], _attend(q, k, v)[:, ~sparse])
    assert len(plan.memo) == 2  # one entry per geometry that had a shared row index


def test_published_subset_of_a_kv_group_is_the_exact_topk() -> None:
    """Groups whose heads are consecutive (sliced) or not (indexed), publishing all or
    some of their heads, publish exactly the top-k of their own logits."""
    q, k, v = _qkv(10)
    retrieval = [True, True, True, True, False, True]  # group 0: 0-2, group 1: 3 and 5
    publish = [True, False, True, False, False, True]
    given = torch.zeros(B, HQ, 5, dtype=torch.long)
    out, idx = hybrid_decode_attention(
        q, k, v, retrieval=retrieval, indices=given, topk=5, publish=publish
    )
    logits = torch.einsum("bhd,bthd->bht", q, k.repeat_interleave(3, dim=2))
    want = logits.topk(5, dim=-1).indices.sort(-1).values
    for h in range(HQ):
        if publish[h]:
            assert torch.equal(idx[:, h].sort(-1).values, want[:, h])
        else:
            assert torch.equal(idx[:, h], given[:, h])
    full = _attend(q, k, v)
    ret = torch.tensor(retrieval)
    _close(out[:, ret], full[:, ret])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_block_topk_with_masked_positions_and_low_precision(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(11)
    s = torch.randn(2, 3, 999, generator=g).to(dtype)
    s[0, 0, :200] = float("-inf")  # left padding
    got = block_topk_indices(s, 9, 16)
    want = torch.topk(s, 9, dim=-1).indices
    # equal selected values (half precision has ties, where either position is a top-k)
    assert torch.equal(s.gather(-1, got).sort(-1).values, s.gather(-1, want).sort(-1).values)
    assert (got[0, 0] >= 200).all()


def test_padding_bias_is_none_without_padding() -> None:
    assert padding_bias(None, torch.device("cpu")) is None
    assert padding_bias(torch.ones(2, 5, dtype=torch.bool), torch.device("cpu")) is None
    valid = torch.tensor([[False, True, True], [True, True, True]])
    bias = padding_bias(valid, torch.device("cpu"))
    assert bias is not None
    assert torch.equal(bias.isinf(), ~valid)
    assert float(bias[valid].abs().max()) == 0.0
