"""Shared helpers of lc-train's tests: two-rank ``torchrun`` launches on CPU (gloo).

The test side calls the ``torchrun`` fixture (or :func:`run_torchrun`); a worker script
run under ``torchrun`` ends with :func:`end_process_group` (its directory is on
``sys.path`` there, so ``from conftest import end_process_group`` works).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable

import pytest


def free_port() -> int:
    """A TCP port on the loopback interface that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_torchrun(
    *args: str, nproc: int = 2, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m torch.distributed.run --nproc_per_node nproc ARGS`` on loopback
    (one thread per rank) and assert that every rank exited with status 0."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        *args,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


@pytest.fixture(scope="session")
def torchrun() -> Callable[..., subprocess.CompletedProcess[str]]:
    """:func:`run_torchrun`, for tests that launch a worker under ``torchrun``."""
    return run_torchrun


def end_process_group() -> None:
    """End a ``torchrun`` worker: wait for every rank, destroy the process group and
    leave without running interpreter teardown. A rank that exits normally while gloo's
    threads are still being torn down can abort ("terminate called without an active
    exception", status -6) after its work is done and saved; ``os._exit`` skips that."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
