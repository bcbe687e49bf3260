"""A kernel cap on the number of tasks of one sandboxed run: a fresh pids cgroup.

``RLIMIT_NPROC`` is not enforced for processes whose real uid outside every user
namespace is root, so a fork bomb in a sandbox started by root is bounded only by the
machine's ``pid_max``: it can take every PID of the host before a supervisor that polls
gets the CPU to stop it. Where the host lets this process create cgroups (root with a
cgroup v1 ``pids`` hierarchy, or cgroup v2 with the ``pids`` controller), each run gets
its own cgroup whose ``pids.max`` the kernel enforces on every fork and thread.

Usage::

    cap = PidsCgroup.create(limit=68)          # None where the host allows no cgroup
    argv = cap.wrap(argv) if cap else argv     # the command joins it before it execs
    ...
    cap.remove()                               # once every task of the run is gone
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import secrets
import time

_V1 = pathlib.Path("/sys/fs/cgroup/pids")
_V2 = pathlib.Path("/sys/fs/cgroup")
_PARENT = "lc-arena"


def _parents() -> list[pathlib.Path]:
    """Hierarchies where a ``pids`` cgroup may be made, most specific first."""
    found = []
    if (_V1 / "tasks").exists():
        found.append(_V1)
    controllers = _V2 / "cgroup.controllers"
    with contextlib.suppress(OSError):
        if "pids" in controllers.read_text().split():
            found.append(_V2)
    return found


def _remove_stale(parent: pathlib.Path) -> None:
    """Remove the empty cgroups of runs whose evaluator process has exited."""
    for child in parent.glob("run-*"):
        owner = child.name.split("-")[1]
        if owner.isdigit() and not pathlib.Path(f"/proc/{owner}").exists():
            with contextlib.suppress(OSError):
                child.rmdir()


class PidsCgroup:
    """One run's pids cgroup; ``limit`` tasks (threads count) at most."""

    def __init__(self, path: pathlib.Path, limit: int) -> None:
        self.path, self.limit = path, limit

    @classmethod
    def create(cls, limit: int) -> PidsCgroup | None:
        """Make a cgroup capped at ``limit`` tasks, or return ``None`` where none can be
        made here (not root, no ``pids`` controller, a read-only cgroup filesystem)."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit!r}")
        for root in _parents():
            parent = root / _PARENT
            try:
                parent.mkdir(exist_ok=True)
                if root == _V2:  # the controller must reach lc-arena's children
                    for level in (root, parent):
                        (level / "cgroup.subtree_control").write_text("+pids")
                _remove_stale(parent)
                path = parent / f"run-{os.getpid()}-{secrets.token_hex(4)}"
                path.mkdir()
            except OSError:
                continue
            try:
                (path / "pids.max").write_text(str(limit))
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
            return cls(path, limit)
        return None

    @property
    def procs(self) -> pathlib.Path:
        """The file a process writes its PID to, to join."""
        return self.path / "cgroup.procs"

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run by a shell that first moves itself into this cgroup, so that the
        command and everything it forks are inside from their first instruction."""
        script = 'echo $$ > "$0" && exec "$@"'
        return ["/bin/sh", "-c", script, str(self.procs), *argv]

    def current(self) -> int:
        """Tasks now in the cgroup (0 once it is gone)."""
        try:
            return int((self.path / "pids.current").read_text())
        except (OSError, ValueError):
            return 0

    def remove(self, timeout: float = 5.0) -> bool:
        """Remove the cgroup once its tasks have exited; ``False`` if some still run
        after ``timeout`` seconds (the empty cgroup is then left for a later call)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
