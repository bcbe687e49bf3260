"""Run Triton kernels on the CPU through Triton's interpreter when no GPU is present.

``TRITON_INTERPRET`` must be set before ``triton`` is first imported, so this happens at
conftest import time, before any test module imports lc_kernels.
"""

from __future__ import annotations

import os
import shutil

if shutil.which("nvidia-smi") is None and not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
