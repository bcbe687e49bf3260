"""Run Triton kernels on the CPU through Triton's interpreter when no GPU is present.

``TRITON_INTERPRET`` must be set before ``triton`` is first imported, so this happens at
conftest import time, before any test module imports lc_kernels.
"""

from __future__ import annotations

import os
import shutil
import sys

# the tests import their shared helpers (lck_helpers.py) from this folder
sys.path.insert(0, os.path.dirname(__file__))


def _has_cuda_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None or os.path.exists("/dev/nvidia0")


if not _has_cuda_gpu():
    os.environ.setdefault("TRITON_INTERPRET", "1")


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def device() -> str:
    """``cuda`` when a GPU is present (compiled kernels), else ``cpu`` (Triton interpreter)."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
