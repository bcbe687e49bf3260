"""Incremental compressed keys for decoding with a KV cache."""

from __future__ import annotations

import torch

from lc_attention.dssa.config import DSSAConfig
from lc_attention.dssa.selection import compress_keys, num_compressed_keys, summary_span


class CompressedKeyCache:
    """Keeps the compressed keys of one layer and extends them as the KV cache grows.

    The compressed keys are [compress_keys][lc_attention.dssa.selection.compress_keys]:
    mean-pooled keys, their means and variances (``block_score="meanvar"``) or
    per-block key bounds (``"bound"``).

    On each call only the compressed keys whose span became complete since the last
    call are computed (a decode step adds at most one every ``stride`` tokens). The
    cache checks that it still describes the same sequence: batch, heads, dtype and
    device must agree, the key length must not shrink (a new prompt), the config must
    compress keys the same way (``block_score``, span and stride), and the first and
    last cached compressed keys, recomputed from the given keys, must agree to 1e-4.
    One cache serves one decoder layer (``layer_idx``, bound at first use).
    On CPU that value check is read on the host (free there) and a mismatch triggers a
    recomputation; on other devices nothing is read back (no synchronisation): the
    extended and the recomputed keys are both formed and the check picks one of them on
    the device, so a GPU pays a full mean-pooling per call but never waits.

    Args:
        host_check: read the value check on the host (default ``None``: on CPU only).

    Example:
        >>> import torch
        >>> cfg = DSSAConfig.small(); cache = CompressedKeyCache()
        >>> k = torch.randn(1, 100, 2, 8)
        >>> torch.equal(cache.update(k, cfg), compress_keys(k, cfg))
        True
    """

    def __init__(self, host_check: bool | None = None) -> None:
        self.host_check = host_check
        self.k_cmp: torch.Tensor | None = None
        self.kv_len = 0
        self.full_recomputes = 0  # recomputations decided on the host
        self.layer_idx: int | None = None
        """The decoder layer this cache serves (bound by the first call of
        [dssa_attention][lc_attention.dssa.attention.dssa_attention] that names one)."""
        self._summary: tuple[object, ...] | None = None

    def reset(self) -> None:
        """Forget the cached keys (the layer binding stays)."""
        self.k_cmp, self.kv_len, self._summary = None, 0, None

    def bind_layer(self, layer_idx: int | None) -> None:
        """Tie the cache to decoder layer ``layer_idx`` (``None``: unknown, no check).

        Raises:
            ValueError: the cache already serves another layer (each layer needs its
                own cache: shared, every call would recompute the other layer's keys).
        """
        if layer_idx is None:
            return
        if self.layer_idx is None:
            self.layer_idx = layer_idx
        elif self.layer_idx != layer_idx:
            raise ValueError(
                f"this CompressedKeyCache belongs to layer {self.layer_idx}, got "
                f"layer_idx={layer_idx}; give every layer its own cache"
            )

    @staticmethod
    def _summary_of(config: DSSAConfig) -> tuple[object, ...]:
        """The config fields the compressed keys depend on."""
        return (config.block_score, *summary_span(config))

    def _compatible(self, key: torch.Tensor, config: DSSAConfig) -> bool:
        kc = self.k_cmp
        if kc is None or key.shape[1] < self.kv_len or kc.shape[1] == 0:
            return False
        if self._summary != self._summary_of(config):
            return False  # compressed under another config
        if kc.shape[0] != key.shape[0] or kc.shape[2] != key.shape[2]:
            return False
        if kc.shape[3] != key.shape[3] * (1 if config.block_score == "mean" else 2):
            return False
        return kc.dtype == key.dtype and kc.device == key.device

    def _same_values(self, key: torch.Tensor, config: DSSAConfig) -> torch.Tensor:
        """0-dim bool on the key's device: the first and last cached keys still hold."""
        kc = self.k_cmp
        assert kc is not None
        ks, st = summary_span(config)
        last = kc.shape[1] - 1
        first_now = compress_keys(key[:, :ks], config)[:, 0]
        last_now = compress_keys(key[:, last * st : last * st + ks], config)[:, 0]
        return (
            torch.isclose(first_now, kc[:, 0], rtol=1e-4, atol=1e-5).all()
            & torch.isclose(last_now, kc[:, last], rtol=1e-4, atol=1e-5).all()
        )

    def _extended(self, key: torch.Tensor, config: DSSAConfig, want: int) -> torch.Tensor:
        kc = self.k_cmp
        assert kc is not None
        have = kc.shape[1]
        if want <= have:
            return kc
        new = compress_keys(key[:, have * summary_span(config)[1] :], config)[:, : want - have]
        return torch.cat([kc, new], 1)

    def update(self, key: torch.Tensor, config: DSSAConfig) -> torch.Tensor:
        """Compressed keys of ``key [B, S, H_kv, D]``: ``[B, C, H_kv, D]``."""
        s = key.shape[1]
        want = num_compressed_keys(s, config)
        if not self._compatible(key, config):
            self.k_cmp = compress_keys(key, config)
            self.full_recomputes += 1
        elif self.host_check or (self.host_check is None and key.device.type == "cpu"):
            if bool(self._same_values(key, config)):
                self.k_cmp = self._extended(key, config, want)
            else:
                self.k_cmp = compress_keys(key, config)
                self.full_recomputes += 1
        else:
            same = self._same_values(key, config)
            ext = self._extended(key, config, want)
            self.k_cmp = torch.where(same, ext, compress_keys(key, config))
        self.kv_len = s
        self._summary = self._summary_of(config)
        return self.k_cmp
