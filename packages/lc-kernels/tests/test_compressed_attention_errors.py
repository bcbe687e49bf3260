"""Bad input to the compression-branch ops raises a clear error naming the argument."""

from __future__ import annotations

import pytest
import torch

from lc_kernels import compressed_attention, mean_pool_compress


def _ok(b=1, t=40):
    q = torch.randn(b, t, 4, 8)
    k = torch.randn(b, t, 2, 8)
    kc = mean_pool_compress(k, 8, 4)
    return q, kc, kc.clone()


def test_valid_input_runs():
    q, kc, vc = _ok()
    assert compressed_attention(q, kc, vc, 8, 4).shape == q.shape


@pytest.mark.parametrize(
    ("mutate", "exc", "match"),
    [
        (lambda q, kc, vc: (q, kc, torch.cat([vc, vc])), ValueError, r"v_cmp .*batch"),
        (lambda q, kc, vc: (q, kc, vc[:, :-1]), ValueError, "v_cmp"),
        (lambda q, kc, vc: (q, kc, vc[:, :, :1]), ValueError, "v_cmp"),
        (lambda q, kc, vc: (q, kc, vc[..., :4]), ValueError, "v_cmp"),
        (lambda q, kc, vc: (q, kc, vc[0]), ValueError, "v_cmp"),
        (lambda q, kc, vc: (q, kc, vc.double()), TypeError, "v_cmp"),
        (lambda q, kc, vc: (q, kc, vc.to("meta")), ValueError, "v_cmp"),
        (lambda q, kc, vc: (q, kc, vc.numpy()), TypeError, "v_cmp"),
        (lambda q, kc, vc: (q, torch.cat([kc, kc]), torch.cat([vc, vc])), ValueError, "batch"),
    ],
)
def test_bad_v_cmp_raises(mutate, exc, match):
    with pytest.raises(exc, match=match):
        compressed_attention(*mutate(*_ok()), 8, 4)


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((torch.randn(1, 40, 2, 8), 0, 4), ValueError, "kernel_size"),
        ((torch.randn(1, 40, 2, 8), -2, 4), ValueError, "kernel_size"),
        ((torch.randn(1, 40, 2, 8), 8.0, 4), ValueError, "kernel_size"),
        ((torch.randn(1, 40, 2, 8), 8, 0), ValueError, "stride"),
        ((torch.randn(1, 40, 2, 8), True, 4), ValueError, "kernel_size"),
        ((torch.randn(40, 2, 8), 8, 4), ValueError, r"x must have shape \[batch, seq"),
        ((torch.randint(0, 5, (1, 40, 2, 8)), 8, 4), TypeError, "x has dtype"),
        (([1.0, 2.0], 8, 4), TypeError, "x must be a torch.Tensor"),
    ],
)
def test_mean_pool_compress_rejects_bad_arguments(args, exc, match):
    with pytest.raises(exc, match=match):
        mean_pool_compress(*args)


def test_mean_pool_compress_short_input_still_gives_no_span():
    assert mean_pool_compress(torch.randn(1, 7, 2, 8), 8, 4).shape == (1, 0, 2, 8)
