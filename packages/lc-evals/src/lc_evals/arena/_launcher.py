"""Sandbox launcher: confine the command and run it.

Standard library only (it must not import lc_evals: it runs under the limits), started
as ``python -I -S _launcher.py MODE CONFIG-JSON`` by :mod:`lc_evals.arena.sandbox`.
Linux only; on other systems only the resource limits apply.

Modes:
  inside      the launcher is the first process bubblewrap starts in the sandbox (PID 2
              of its PID namespace). It copies the read-only patched repository into the
              size-limited tmpfs that is the work copy, reports the layers in force on
              its report pipe, forks the command (which applies the per-process layers
              below and ``exec``s), waits for it with a wall-clock limit, then counts and
              kills every process left in the namespace and reports the exit status and
              that count. It makes itself non-dumpable, so the command (same uid) can
              neither ptrace it nor open its descriptors through ``/proc``.
  host        no isolation (only with an explicit unsafe opt-in): the per-process layers
              are applied to this process, which then ``exec``s the command.

Per-process layers, in order:
  rlimits     CPU seconds, address space, file size, core dumps, open files, process
              count (RLIMIT_NPROC; the kernel ignores it when the uid outside the user
              namespace is root, so the supervisor enforces the cap as well)
  netns       (host mode only) a new, empty network namespace
  landlock    writes allowed only beneath the writable roots (Landlock LSM); from ABI 4
              also no TCP bind/connect, from ABI 6 no signals to processes outside
  seccomp     socket(2) for any family but AF_UNIX fails with EACCES, io_uring_setup(2),
              keyctl(2), add_key(2) and request_key(2) too (x86_64 and aarch64)
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import resource
import shutil
import signal
import sys
import time

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_DUMPABLE = 4
_SECCOMP_MODE_FILTER = 2
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000

_ARCH = {
    # machine: (AUDIT_ARCH, __NR_socket, __NR_landlock_create_ruleset,
    #           refused: io_uring_setup, add_key, request_key, keyctl)
    "x86_64": (0xC000003E, 41, 444, (425, 248, 249, 250)),
    "aarch64": (0xC00000B7, 198, 444, (425, 217, 218, 219)),
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
    if cfg.get("nproc_total") is not None and hasattr(resource, "RLIMIT_NPROC"):
        # inside a fresh user namespace the count starts at the sandbox's own processes
        total = int(cfg["nproc_total"])
        resource.setrlimit(resource.RLIMIT_NPROC, (total, total))
        done.append("max_processes")
        return done
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


def _seccomp(libc: ctypes.CDLL, arch: int, nr_socket: int, refused: tuple[int, ...]) -> bool:
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    deny = 0x00050000 | 13  # SECCOMP_RET_ERRNO | EACCES
    allow = 0x7FFF0000
    n = len(refused)
    # layout: 0 arch, 1 arch check, 2 nr, 3 x32, 4..4+n-1 refused, socket, family,
    # AF_UNIX check, deny, allow
    deny_at = 4 + n + 3
    prog = [(ld_abs, 0, 0, 4), (jeq, 0, deny_at - 2, arch), (ld_abs, 0, 0, 0)]
    prog.append((jge, deny_at - 4, 0, 0x40000000))  # x32 numbers -> deny
    for k, nr in enumerate(refused):
        prog.append((jeq, deny_at - (5 + k), 0, nr))
    prog.append((jeq, 0, 3, nr_socket))  # not socket -> allow
    prog.append((ld_abs, 0, 0, 16))  # A = low word of args[0] (family)
    prog.append((jeq, 1, 0, 1))  # AF_UNIX -> allow
    prog.append((ret, 0, 0, deny))
    prog.append((ret, 0, 0, allow))
    assert len(prog) == deny_at + 2
    arr = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), arr)
    return libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0


def confine(cfg: dict) -> list[str]:
    """Apply every available layer to this process; return the names of those applied."""
    layers = ["rlimits:" + ",".join(_set_rlimits(cfg.get("limits", {})))]
    if not sys.platform.startswith("linux"):
        return layers
    libc = _libc()
    kernel = cfg.get("kernel_layers", True)
    if not cfg.get("inside"):
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        if cfg.get("network") is False and kernel:
            ns = _netns(libc)
            if ns:
                layers.append(ns)
    arch = _ARCH.get(platform.machine())
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or arch is None:
        return layers
    if kernel:
        layers += _landlock(libc, arch[2], cfg.get("writable", []), cfg.get("writable_files", []))
    if cfg.get("network") is False and kernel and _seccomp(libc, arch[0], arch[1], arch[3]):
        layers.append("seccomp")
    return layers


def _exec(cfg: dict, *, forked: bool = False) -> None:
    """Replace this process with the command; exit with 127 if it cannot run (at once,
    with ``os._exit``, in a ``forked`` child)."""
    cmd = cfg["command"]
    try:
        os.execvpe(cmd[0], cmd, cfg["env"])
    except OSError as exc:
        sys.stderr.write(f"sandbox: cannot run {cmd[0]!r}: {exc}\n")
        if forked:
            os._exit(127)
        sys.exit(127)


def _host(cfg: dict) -> None:
    """No isolation: confine this process as far as it goes and ``exec`` the command."""
    try:
        layers = confine(cfg)
    except Exception as exc:  # a layer failing must not run the command unconfined
        _write(cfg["layers_path"], json.dumps({"error": repr(exc)}))
        sys.exit(125)
    _write(cfg["layers_path"], json.dumps({"layers": layers}))
    os.chdir(cfg["cwd"])
    _exec(cfg)


def _others() -> list[int]:
    """Every process of this PID namespace but its init (1) and this one."""
    me = os.getpid()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, me):
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != b"Z":
                pids.append(int(name))
    return pids


def _kill_rest() -> None:
    for _ in range(200):
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)  # every process of the namespace we may signal
        while True:  # reap what was our child
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not _others():
            return
        time.sleep(0.005)


def _inside(cfg: dict) -> None:
    """First process in the bubblewrap sandbox: stage the copy, run, wait, sweep."""
    report_fd = int(cfg["report_fd"])
    os.set_inheritable(report_fd, False)

    def report(**data: object) -> None:
        os.write(report_fd, (json.dumps(data) + "\n").encode())

    libc = _libc()
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # no ptrace or /proc/<pid>/fd from the command
    work = cfg["cwd"]
    try:
        for name in os.listdir(cfg["stage"]):
            src, dst = os.path.join(cfg["stage"], name), os.path.join(work, name)
            if os.path.isdir(src) and not os.path.islink(src):
                shutil.copytree(src, dst, symlinks=True)
            else:
                shutil.copy2(src, dst, follow_symlinks=False)
        for d in cfg.get("make_dirs", []):
            os.makedirs(d, exist_ok=True)
    except OSError as exc:
        report(error=f"cannot stage the work copy (is disk_bytes large enough?): {exc}")
        sys.exit(125)
    r, w = os.pipe()  # the child's confinement result
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            layers = confine(cfg)
            os.chdir(work)
        except Exception as exc:  # a layer failing must not run the command unconfined
            os.write(w, json.dumps({"error": repr(exc)}).encode())
            os._exit(125)
        os.write(w, json.dumps({"layers": layers}).encode())
        os.close(w)
        keep = {int(cfg["events_fd"])} if cfg.get("events_fd") is not None else set()
        for fd in os.listdir("/proc/self/fd"):
            if int(fd) > 2 and int(fd) not in keep:
                with contextlib.suppress(OSError):
                    os.close(int(fd))
        _exec(cfg, forked=True)
    os.close(w)
    if cfg.get("events_fd") is not None:
        os.close(int(cfg["events_fd"]))
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    try:
        report(**json.loads(b"".join(chunks) or b"{}"))
    except ValueError:
        report(error="the command's confinement reported nothing")
    deadline = time.monotonic() + float(cfg["wall_seconds"])
    status = None
    while status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
        elif time.monotonic() > deadline:
            _kill_rest()
            report(wall_timeout=True)
            status = -1
        else:
            time.sleep(0.01)
    code = -signal.SIGKILL if status == -1 else os.waitstatus_to_exitcode(status)
    left = _others()
    _kill_rest()
    report(status=code, leftovers=len(left))
    sys.exit(code if code >= 0 else 128 - code)


def main() -> None:
    mode = sys.argv[1]
    if mode == "inside":
        _inside(json.loads(sys.argv[2]))
        return
    with open(sys.argv[2]) as f:
        _host(json.load(f))


if __name__ == "__main__":
    main()
