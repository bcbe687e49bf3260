"""Sandbox launcher: confine this process, then ``exec`` the command.

Run as ``python _launcher.py CONFIG.json`` by :mod:`lc_evals.arena.sandbox` in a new
session. Standard library only (it must not import lc_evals: it runs under the limits).
Each confinement layer is tried in turn; which ones took effect is written to the
``layers`` file named in the config before the ``exec``. Linux only; on other systems
only the resource limits apply.

Layers, in order:
  rlimits     CPU seconds, address space, file size, core dumps, open files; the process
              count (RLIMIT_NPROC) only for a non-root user (the kernel ignores it for root)
  netns       a new, empty network namespace (only loopback, down): directly with
              CAP_SYS_ADMIN, else inside a new user namespace mapping the caller's ids
  landlock    writes allowed only beneath the writable roots (Landlock LSM); from ABI 4
              also no TCP bind/connect, from ABI 6 no signals to processes outside
  seccomp     socket(2) for any family but AF_UNIX fails with EACCES, io_uring_setup(2)
              too (x86_64 and aarch64)
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import sys

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_PR_SET_CHILD_SUBREAPER = 36
_SECCOMP_MODE_FILTER = 2
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000

_ARCH = {
    # machine: (AUDIT_ARCH, __NR_socket, __NR_io_uring_setup, __NR_landlock_create_ruleset)
    "x86_64": (0xC000003E, 41, 425, 444),
    "aarch64": (0xC00000B7, 198, 425, 444),
}


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _set_rlimits(cfg: dict) -> list[str]:
    done = []
    pairs = {
        "cpu_seconds": resource.RLIMIT_CPU,
        "memory_bytes": resource.RLIMIT_AS,
        "file_size_bytes": resource.RLIMIT_FSIZE,
        "open_files": resource.RLIMIT_NOFILE,
    }
    for key, res in pairs.items():
        value = cfg.get(key)
        if value is None:
            continue
        soft = int(value)
        hard = soft + 1 if key == "cpu_seconds" else soft  # SIGXCPU first, SIGKILL 1 s later
        _, old_hard = resource.getrlimit(res)
        if old_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, old_hard), min(hard, old_hard)
        resource.setrlimit(res, (soft, hard))
        done.append(key)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    nproc = cfg.get("max_processes")
    if nproc is not None and os.geteuid() != 0 and hasattr(resource, "RLIMIT_NPROC"):
        # RLIMIT_NPROC counts every process of the real uid, so leave room for the ones
        # that already run, and allow ``max_processes`` more.
        uid = os.getuid()
        existing = 0
        for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
            if name.isdigit():
                try:
                    if os.stat(f"/proc/{name}").st_uid == uid:
                        existing += 1
                except OSError:
                    pass
        limit = existing + int(nproc) + 4  # the supervisor reports past nproc
        _, old_hard = resource.getrlimit(resource.RLIMIT_NPROC)
        if old_hard != resource.RLIM_INFINITY:
            limit = min(limit, old_hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (limit, limit))
        done.append("max_processes")
    return done


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _netns(libc: ctypes.CDLL) -> str | None:
    if libc.unshare(_CLONE_NEWNET) == 0:
        return "netns"
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) != 0:
        return None
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError:
        return None
    return "netns+userns"


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _landlock(
    libc: ctypes.CDLL, nr_create: int, writable: list[str], files: list[str]
) -> list[str]:
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(nr_create, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return []
    write_file, truncate, refer = 1 << 1, 1 << 14, 1 << 13
    dir_rights = sum(1 << b for b in (4, 5, 6, 7, 8, 9, 10, 11, 12))  # remove/make *
    file_rights = write_file | (truncate if abi >= 3 else 0)
    handled = file_rights | dir_rights | (refer if abi >= 2 else 0)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    layers = ["landlock_fs"]
    if abi >= 4:
        attr.handled_access_net = (1 << 0) | (1 << 1)  # BIND_TCP | CONNECT_TCP, no rule
        size = 16
        layers.append("landlock_net")
    if abi >= 6:
        attr.scoped = (1 << 0) | (1 << 1)  # abstract unix sockets, signals
        size = 24
        layers.append("landlock_scope")
    fd = libc.syscall(nr_create + 0, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        return []
    try:
        for path, rights in [(p, handled) for p in writable] + [(p, file_rights) for p in files]:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = _PathBeneath(rights, pfd)
                if libc.syscall(nr_create + 1, fd, 1, ctypes.byref(rule), ctypes.c_uint32(0)):
                    return []
            finally:
                os.close(pfd)
        if libc.syscall(nr_create + 2, fd, ctypes.c_uint32(0)) != 0:
            return []
    finally:
        os.close(fd)
    return layers


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def _seccomp(libc: ctypes.CDLL, arch: int, nr_socket: int, nr_uring: int) -> bool:
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    deny = 0x00050000 | 13  # SECCOMP_RET_ERRNO | EACCES
    allow = 0x7FFF0000
    prog = [
        (ld_abs, 0, 0, 4),  # 0: A = arch
        (jeq, 0, 6, arch),  # 1: other ABIs (i386, x32 entry) -> deny
        (ld_abs, 0, 0, 0),  # 2: A = syscall number
        (jge, 4, 0, 0x40000000),  # 3: x32 numbers -> deny
        (jeq, 3, 0, nr_uring),  # 4: io_uring_setup -> deny
        (jeq, 0, 3, nr_socket),  # 5: not socket -> allow
        (ld_abs, 0, 0, 16),  # 6: A = low word of args[0] (family)
        (jeq, 1, 0, 1),  # 7: AF_UNIX -> allow
        (ret, 0, 0, deny),  # 8
        (ret, 0, 0, allow),  # 9
    ]
    arr = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), arr)
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0


def confine(cfg: dict) -> list[str]:
    """Apply every available layer to this process; return the names of those applied."""
    layers = ["rlimits:" + ",".join(_set_rlimits(cfg.get("limits", {})))]
    if not sys.platform.startswith("linux"):
        return layers
    libc = _libc()
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    kernel = cfg.get("kernel_layers", True)
    if cfg.get("network") is False and kernel:
        ns = _netns(libc)
        if ns:
            layers.append(ns)
    arch = _ARCH.get(platform.machine())
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or arch is None:
        return layers
    if kernel:
        layers += _landlock(libc, arch[3], cfg.get("writable", []), cfg.get("writable_files", []))
    if cfg.get("network") is False and kernel and _seccomp(libc, arch[0], arch[1], arch[2]):
        layers.append("seccomp_socket")
    return layers


def main() -> None:
    with open(sys.argv[1]) as f:
        cfg = json.load(f)
    try:
        layers = confine(cfg)
    except Exception as exc:  # a layer failing must not run the command unconfined
        _write(cfg["layers_path"], json.dumps({"error": repr(exc)}))
        sys.exit(125)
    _write(cfg["layers_path"], json.dumps({"layers": layers}))
    os.chdir(cfg["cwd"])
    cmd = cfg["command"]
    try:
        os.execvpe(cmd[0], cmd, cfg["env"])
    except OSError as exc:
        sys.stderr.write(f"sandbox: cannot run {cmd[0]!r}: {exc}\n")
        sys.exit(127)


if __name__ == "__main__":
    main()
