"""Shared fixtures: tiny synthetic data so the suite stays fast on two cores."""

from __future__ import annotations

import numpy as np
import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture
def toy() -> tuple[np.ndarray, np.ndarray]:
    """Two classes that differ early in the series: ``[24, 1, 32]`` and labels."""
    rng = np.random.default_rng(0)
    x = rng.normal(scale=0.3, size=(24, 1, 32)).astype(np.float32)
    y = np.arange(24) % 2
    x[y == 1, 0, :8] += 1.5
    return x, y
