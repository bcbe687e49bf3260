"""The per-run pids cgroup: the kernel refuses the task past its limit."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from lc_evals.arena.pids_cgroup import PidsCgroup


@pytest.fixture
def cgroup() -> Iterator[PidsCgroup]:
    made = PidsCgroup.create(limit=6)
    if made is None:
        pytest.skip("this host lets this process create no pids cgroup")
    yield made
    assert made.remove()
    assert not made.path.exists()


FORKER = """
import os, signal, sys, time
children = []
for _ in range(20):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children.append(pid)
print(len(children))
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
"""


def test_forks_past_the_limit_fail_and_nothing_is_left(cgroup: PidsCgroup) -> None:
    out = subprocess.run(
        cgroup.wrap([sys.executable, "-I", "-S", "-c", FORKER]),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert int(out.stdout) == 5  # the forking process is the sixth task
    assert cgroup.current() == 0


def test_the_wrapped_command_runs_inside(cgroup: PidsCgroup) -> None:
    out = subprocess.run(
        cgroup.wrap(["/bin/sh", "-c", "cat /proc/$$/cgroup"]),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert cgroup.path.name in out.stdout


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="limit must be >= 1"):
        PidsCgroup.create(0)
