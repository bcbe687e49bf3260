"""Peak resident memory of this process (``lc_train.oomb.memory``), Linux only."""

from __future__ import annotations

import sys

import pytest
import torch

from lc_train.oomb.memory import reset_peak_rss, rss_mb

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_peak_counts_a_freed_allocation_until_reset() -> None:
    base = rss_mb()
    reset_peak_rss()
    assert rss_mb("VmHWM") - base < 16  # the reset dropped any earlier peak
    big = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
    held = rss_mb() - base
    del big
    assert held > 56
    assert rss_mb("VmHWM") - base > 56  # the peak remembers it after it is freed
    reset_peak_rss()
    assert rss_mb("VmHWM") - rss_mb() < 16


def test_unknown_field_is_refused() -> None:
    with pytest.raises(ValueError, match="VmRSS"):
        rss_mb("VmPeak")
