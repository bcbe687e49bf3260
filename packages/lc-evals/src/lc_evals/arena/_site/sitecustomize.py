"""Audit hook loaded into every sandboxed Python process (via ``PYTHONPATH``).

Advisory only: the isolation is bubblewrap's (namespaces, read-only system, no
capabilities); this hook turns what Python code tries into readable events. It blocks, and records as a containment event, Python-level network use (creating a
non-AF_UNIX socket, connect, bind, sendto, DNS lookups) and writes, deletions, renames
or permission changes outside the writable roots. Python code only: a C extension or
another program that calls the kernel directly is not seen here (the kernel layers of
the launcher cover those where the system allows them). Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

_ROOTS = tuple(json.loads(os.environ.get("LC_ARENA_WRITABLE", "[]")))
_FILES = frozenset(json.loads(os.environ.get("LC_ARENA_WRITABLE_FILES", "[]")))
_EVENTS = os.environ.get("LC_ARENA_EVENTS", "")
_EVENTS_FD = int(os.environ["LC_ARENA_EVENTS_FD"]) if "LC_ARENA_EVENTS_FD" in os.environ else None
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {
    "os.remove": 0,
    "os.rmdir": 0,
    "os.mkdir": 0,
    "os.rename": (0, 1),
    "os.link": (0, 1),
    "os.symlink": 1,
    "os.truncate": 0,
    "os.chmod": 0,
    "os.chown": 0,
    "os.utime": 0,
    "shutil.rmtree": 0,
    "shutil.copyfile": 1,
    "shutil.move": (0, 1),
}
_NET_EVENTS = {"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg"}
_busy = False


def _log(kind: str, detail: str) -> None:
    line = json.dumps({"kind": kind, "action": "blocked", "detail": detail, "pid": os.getpid()})
    if _EVENTS_FD is not None:
        # a pipe to the evaluator: nothing in the sandbox can take back what it says;
        # a child process that did not inherit it writes nothing
        with contextlib.suppress(OSError):
            os.write(_EVENTS_FD, (line + "\n").encode())
        return
    if not _EVENTS:
        return
    fd = os.open(_EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _outside(path: object) -> str | None:
    if isinstance(path, int) or path is None:
        return None
    try:
        p = os.fsdecode(path)  # type: ignore[arg-type]
    except TypeError:
        return None
    real = os.path.realpath(p)
    if real in _FILES:
        return None
    for root in _ROOTS:
        if real == root or real.startswith(root.rstrip("/") + "/"):
            return None
    return real


def _deny(kind: str, detail: str) -> None:
    global _busy
    _busy = True
    try:
        _log(kind, detail)
    finally:
        _busy = False
    raise PermissionError(13, f"sandbox: {detail}")


def _hook(event: str, args: tuple) -> None:
    if _busy:
        return
    if event == "open":
        path, mode, flags = args
        writing = bool(flags and flags & _WRITE_FLAGS) or (
            isinstance(mode, str) and any(c in mode for c in "wax+")
        )
        if writing:
            real = _outside(path)
            if real is not None:
                _deny("write_outside", f"open {real!r} for writing")
    elif event in _PATH_EVENTS:
        where = _PATH_EVENTS[event]
        for i in where if isinstance(where, tuple) else (where,):
            if i < len(args):
                real = _outside(args[i])
                if real is not None:
                    _deny("write_outside", f"{event} {real!r}")
    elif event == "socket.__new__":
        family = args[1] if len(args) > 1 else None
        if family != getattr(__import__("socket"), "AF_UNIX", 1):
            _deny("network", f"socket(family={family})")
    elif event in _NET_EVENTS:
        _deny("network", f"{event} {args[1:2]!r}")
    elif event == "socket.getaddrinfo":
        _deny("network", f"getaddrinfo {args[0:2]!r}")


if _ROOTS:
    sys.addaudithook(_hook)
