"""Incremental compressed keys for decoding with a KV cache."""

from __future__ import annotations

import torch

from lc_attention.dssa.config import DSSAConfig
from lc_attention.dssa.selection import compress_keys, num_compressed_keys


class CompressedKeyCache:
    """Keeps the mean-pooled keys of one layer and extends them as the KV cache grows.

    On each call only the compressed keys whose span became complete since the last
    call are computed (a decode step adds at most one every ``stride`` tokens). The
    cache checks that it still describes the same sequence (batch, heads, dtype and
    the first and last cached compressed keys, recomputed from the given keys, must agree to
    1e-4); on any
    mismatch, or when the key length shrank (a new prompt), it recomputes from scratch.

    Example:
        >>> import torch
        >>> cfg = DSSAConfig.small(); cache = CompressedKeyCache()
        >>> k = torch.randn(1, 100, 2, 8)
        >>> torch.equal(cache.update(k, cfg), compress_keys(k, cfg))
        True
    """

    def __init__(self) -> None:
        self.k_cmp: torch.Tensor | None = None
        self.kv_len = 0
        self.full_recomputes = 0

    def reset(self) -> None:
        """Forget the cached keys."""
        self.k_cmp, self.kv_len = None, 0

    def _matches(self, key: torch.Tensor, config: DSSAConfig) -> bool:
        kc = self.k_cmp
        if kc is None or key.shape[1] < self.kv_len or kc.shape[1] == 0:
            return False
        if kc.shape[0] != key.shape[0] or kc.shape[2:] != key.shape[2:]:
            return False
        if kc.dtype != key.dtype or kc.device != key.device:
            return False
        ks, st = config.kernel_size, config.stride
        last = kc.shape[1] - 1
        first_now = compress_keys(key[:, :ks], config)[:, 0]
        last_now = compress_keys(key[:, last * st : last * st + ks], config)[:, 0]
        return torch.allclose(first_now, kc[:, 0], rtol=1e-4, atol=1e-5) and torch.allclose(
            last_now, kc[:, last], rtol=1e-4, atol=1e-5
        )

    def update(self, key: torch.Tensor, config: DSSAConfig) -> torch.Tensor:
        """Compressed keys of ``key [B, S, H_kv, D]``: ``[B, C, H_kv, D]``."""
        s = key.shape[1]
        want = num_compressed_keys(s, config)
        if not self._matches(key, config):
            self.k_cmp = compress_keys(key, config)
            self.full_recomputes += 1
        else:
            assert self.k_cmp is not None
            have = self.k_cmp.shape[1]
            if want > have:
                start = have * config.stride
                new = compress_keys(key[:, start:], config)[:, : want - have]
                self.k_cmp = torch.cat([self.k_cmp, new], 1)
        self.kv_len = s
        return self.k_cmp
