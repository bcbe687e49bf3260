"""Run a command on a throw-away copy of a repository, isolated by bubblewrap.

Every run gets a fresh workspace on the evaluator's side::

    <tmp>/lc-arena-XXXX/        (mode 0700)
        canary          random bytes, checksummed before and after the run
        src/            the copy with the patches applied (bound read-only inside)

and runs inside a bubblewrap (``bwrap``) sandbox with new user, PID, mount, network,
IPC, UTS and cgroup namespaces, uid/gid 65534 and every capability dropped. The
sandbox sees a read-only system (``/usr``, a few files of ``/etc``, the Python
installation and its import path), a fresh ``/proc`` of its own PID namespace, a
minimal ``/dev``, and three size-limited tmpfs mounts it may write: the work copy
(``<tmp>/lc-arena-XXXX/repo``, filled from ``src/`` by the launcher), ``/tmp`` and
``/dev/shm``. Nothing else of the host is mounted: no home directories, no sockets, no
other process. The environment is built from scratch (no variable of the evaluator is
passed on). The first process inside (:mod:`lc_evals.arena._launcher`) sets the
resource limits (CPU time, address space, file size, open files, process count; where
the host allows, a pids cgroup of the run caps its tasks too), adds
Landlock and seccomp where the kernel has them, runs the command, and at its end kills
every process left in the namespace. The evaluator enforces the wall-clock limit and
the process cap from outside, killing the namespace's init (which kills the whole
namespace), and reads the command's output, the launcher's report and the audit-hook
events through pipes: no record of the run lies on a path the command can write.

Without a usable ``bwrap`` :func:`run_sandboxed` raises :class:`IsolationUnavailable`
naming what to install, unless ``unsafe_no_isolation=True``; such runs carry
``isolation="unsafe-no-isolation"`` and an ``unsafe_no_isolation`` event.

Each reason a run was stopped or an action refused is a :class:`ContainmentEvent` in the
:class:`RunResult`; ``RunResult.layers`` says which layers were in force.
The docs page "lc-evals arena" lists the attacks the test suite makes and what stops each.

Examples:
    >>> import pathlib, sys, tempfile
    >>> repo = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (repo / "ok.py").write_text("print('hi')\\n")
    >>> result = run_sandboxed(repo, [sys.executable, "ok.py"])  # doctest: +SKIP
    >>> result.ok, result.stdout.strip()  # doctest: +SKIP
    (True, 'hi')
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import pathlib
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lc_evals.arena.patch import PatchError, apply_patch
from lc_evals.arena.pids_cgroup import PidsCgroup

_HERE = pathlib.Path(__file__).resolve().parent
_LAUNCHER = _HERE / "_launcher.py"
_SITE = _HERE / "_site"
DEFAULT_IGNORE = (".git", "__pycache__", ".pytest_cache", ".venv", ".mypy_cache", ".arena")
_TAIL = 8000


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one sandboxed run.

    Attributes:
        cpu_seconds: CPU time per process (RLIMIT_CPU; SIGXCPU, then SIGKILL 1 s later).
        memory_bytes: address space per process (RLIMIT_AS).
        max_processes: most processes alive at once in the run (supervisor; also a
            kernel cap on tasks, threads included: a pids cgroup where the host allows
            one, RLIMIT_NPROC otherwise, which the kernel ignores when the host uid is
            root).
        file_size_bytes: largest file a process may write (RLIMIT_FSIZE).
        open_files: open file descriptors per process (RLIMIT_NOFILE).
        wall_seconds: wall-clock limit of the whole run.
        disk_bytes: size of each writable filesystem of the sandbox (the work copy,
            ``/tmp`` and ``/dev/shm`` are tmpfs mounts of this size; memory-backed, so
            only what is written is used). The work copy must fit in it.
        network: ``False`` (default) gives the sandbox an empty network namespace;
            ``True`` shares the host's network (and so its loopback services).
        poll_seconds: how often the supervisor counts processes.
    """

    cpu_seconds: int = 60
    memory_bytes: int = 2 * 1024**3
    max_processes: int = 64
    file_size_bytes: int = 64 * 1024**2
    open_files: int = 256
    wall_seconds: float = 120.0
    disk_bytes: int = 512 * 1024**2
    network: bool = False
    poll_seconds: float = 0.005

    def __post_init__(self) -> None:
        for name in (
            "cpu_seconds",
            "memory_bytes",
            "max_processes",
            "file_size_bytes",
            "disk_bytes",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"SandboxLimits.{name} must be a positive int, got {value!r}")
        if self.open_files < 16:
            raise ValueError(f"SandboxLimits.open_files must be >= 16, got {self.open_files!r}")
        if not self.wall_seconds > 0:
            raise ValueError(f"SandboxLimits.wall_seconds must be > 0, got {self.wall_seconds!r}")
        if not 0 < self.poll_seconds <= 1:
            raise ValueError(
                f"SandboxLimits.poll_seconds must be in (0, 1], got {self.poll_seconds!r}"
            )


@dataclass(frozen=True)
class ContainmentEvent:
    """Something the sandbox refused, stopped or detected.

    Attributes:
        kind: ``"write_outside"``, ``"network"``, ``"process_limit"``, ``"cpu_limit"``,
            ``"memory_limit"``, ``"file_size_limit"``, ``"disk_limit"``,
            ``"wall_timeout"``, ``"leftover_processes"``, ``"sandbox_error"`` or
            ``"unsafe_no_isolation"``.
        action: ``"blocked"`` (refused, the run went on), ``"killed"`` (the run or a
            process was stopped), ``"detected"`` (seen after the fact) or ``"noted"``
            (a fact about the run, such as running without isolation).
        detail: human-readable facts (path, count, signal ...).
    """

    kind: str
    action: str
    detail: str


@dataclass
class RunResult:
    """Outcome of one sandboxed command.

    Attributes:
        returncode: the command's exit status (negative: killed by that signal);
            ``None`` if it never ran (patch rejected).
        stdout: the last 8000 characters of the standard output.
        stderr: the last 8000 characters of the standard error.
        duration_s: wall-clock seconds.
        events: containment events, in the order found.
        layers: confinement layers that were in force.
        patch_error: why a patch was rejected (then the command did not run).
        applied: repository-relative paths the patches wrote.
        isolation: ``"bubblewrap"``, or ``"unsafe-no-isolation"`` when the run was
            explicitly allowed without isolation (``""``: the command did not run).
    """

    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    events: list[ContainmentEvent] = field(default_factory=list)
    layers: list[str] = field(default_factory=list)
    patch_error: str | None = None
    applied: list[str] = field(default_factory=list)
    isolation: str = ""

    @property
    def ok(self) -> bool:
        """The command ran and exited 0, and nothing was stopped or breached."""
        fatal = {"killed", "detected"}
        return self.returncode == 0 and not any(e.action in fatal for e in self.events)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        fields = {k: v for k, v in data.items() if k != "ok"}
        fields["events"] = [ContainmentEvent(**e) for e in data.get("events", [])]
        return cls(**fields)


def tree_digest(root: pathlib.Path, ignore: Iterable[str] = ()) -> str:
    """Digest of a directory tree's paths, sizes, modes and file contents."""
    skip = set(ignore)
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in skip)
        for name in sorted(filenames):
            p = pathlib.Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            try:
                st = p.lstat()
                h.update(f"{rel}\0{st.st_size}\0{st.st_mode}\0".encode())
                if p.is_file() and not p.is_symlink():
                    h.update(hashlib.sha256(p.read_bytes()).digest())
            except OSError:
                h.update(f"{rel}\0unreadable".encode())
    return h.hexdigest()


def _file_digest(path: pathlib.Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, session id) of every process, from /proc."""
    table: dict[int, tuple[int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        rest = data[data.rfind(b")") + 2 :].split()
        if len(rest) < 4 or rest[0] == b"Z":  # zombies hold no resources but a pid
            continue
        table[int(name)] = (int(rest[1]), int(rest[3]))
    return table


def _has_token(pid: int, token: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return token in f.read()
    except OSError:
        return False


def _members(root: int, token: bytes | None) -> set[int]:
    """Live processes of the run: same session, descendants of ``root``, or the token."""
    table = _proc_table()
    members = {pid for pid, (_, sid) in table.items() if sid == root}
    if root in table:
        members.add(root)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    stack = list(members)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in members:
                members.add(child)
                stack.append(child)
    if token is not None:
        me = os.getpid()
        members |= {p for p in table if p not in members and p != me and _has_token(p, token)}
    return members


def _kill_all(root: int, token: bytes | None) -> int:
    """SIGKILL every process of the run until none is left; return how many there were."""
    seen: set[int] = set()
    members = _members(root, token)
    for _ in range(200):
        seen |= members
        with contextlib.suppress(OSError):
            os.killpg(root, signal.SIGKILL)
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)
        members = _members(root, token)
        if not members:
            break
    return len(seen)


def _tail(path: pathlib.Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4 * _TAIL))
            return f.read().decode("utf-8", errors="replace")[-_TAIL:]
    except OSError:
        return ""


def _copy_repo(src: pathlib.Path, dst: pathlib.Path, ignore: Sequence[str]) -> None:
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(*ignore))


class IsolationUnavailable(RuntimeError):
    """No isolation mechanism can run here; the message names what to install."""


INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    "bubblewrap; Arch: pacman -S bubblewrap) on Linux with user namespaces enabled"
)
_UNSAFE_HINT = (
    "or, to run untrusted code WITHOUT isolation on a machine you can afford to lose, "
    "pass unsafe_no_isolation=True (command line: --unsafe-no-isolation)"
)
SANDBOX_UID = 65534
_ETC = (
    "passwd",
    "group",
    "hosts",
    "nsswitch.conf",
    "host.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "alternatives",
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "mime.types",
    "os-release",
    "debian_version",
)


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[str | None, str]:
    """(path of a working ``bwrap``, why not) for this machine; cached."""
    if not sys.platform.startswith("linux"):
        return None, f"bubblewrap sandboxing needs Linux, this is {sys.platform}"
    path = shutil.which("bwrap")
    if path is None:
        return None, "bubblewrap (bwrap) is not installed"
    argv = [path, "--unshare-all", "--unshare-user", "--disable-userns", "--uid", "65534"]
    argv += ["--gid", "65534", "--cap-drop", "ALL", "--die-with-parent", "--ro-bind", "/", "/"]
    argv += ["--proc", "/proc", "--", "true"]
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{path} cannot run: {exc}"
    if proc.returncode != 0:
        why = proc.stderr.decode(errors="replace").strip()
        return None, f"{path} cannot create the sandbox namespaces: {why}"
    return path, ""


def isolation_status() -> tuple[bool, str]:
    """``(True, "bubblewrap at <path>")`` when runs can be isolated, else ``(False, why)``."""
    path, why = _probe()
    return (True, f"bubblewrap at {path}") if path else (False, why)


def require_isolation() -> str:
    """The ``bwrap`` path; :class:`IsolationUnavailable` naming what to install if none works."""
    path, why = _probe()
    if path is None:
        raise IsolationUnavailable(
            f"refusing to run untrusted code without isolation: {why}. "
            f"To fix: {INSTALL_HINT}; {_UNSAFE_HINT}."
        )
    return path


def run_sandboxed(
    repo: str | os.PathLike[str],
    command: Sequence[str],
    *,
    patches: Sequence[str] = (),
    limits: SandboxLimits | None = None,
    env: Mapping[str, str] | None = None,
    canaries: Sequence[str | os.PathLike[str]] = (),
    ignore: Sequence[str] = DEFAULT_IGNORE,
    keep: bool = False,
    unsafe_no_isolation: bool = False,
) -> RunResult:
    """Copy ``repo``, apply ``patches`` in order, run ``command`` in the copy, clean up.

    Args:
        repo: the repository directory (never modified; its tree is checksummed).
        command: argv of the command, run with the copy as working directory; the
            string ``"{python}"`` is replaced by the running interpreter.
        patches: unified diffs to apply to the copy first; the first rejected one stops
            the run (``RunResult.patch_error`` says why, ``returncode`` is ``None``).
        limits: resource limits (default :class:`SandboxLimits`).
        env: extra environment variables for the command (the only variables besides
            ``PATH``, ``HOME``, ``TMPDIR``, ``LANG`` and the sandbox's own).
        canaries: more files outside the copy to checksum before and after.
        ignore: names not copied (version control, caches).
        keep: keep the workspace (for debugging; its path is ``/tmp/lc-arena-*``).
        unsafe_no_isolation: run even where bubblewrap is unavailable, with only the
            per-process layers (rlimits, Landlock, seccomp, audit hook). Never for
            untrusted code on a machine that matters.

    Returns:
        A :class:`RunResult` with the exit status, output tails and containment events.

    Raises:
        IsolationUnavailable: bubblewrap cannot run here and ``unsafe_no_isolation`` is
            false.
    """
    limits = limits or SandboxLimits()
    src = pathlib.Path(repo).resolve()
    if not src.is_dir():
        raise FileNotFoundError(f"repository {src} is not a directory")
    if not command:
        raise ValueError("command must not be empty")
    bwrap = None if unsafe_no_isolation else require_isolation()
    ws = pathlib.Path(tempfile.mkdtemp(prefix="lc-arena-")).resolve()
    try:
        job = _Job(src, ws, list(command), patches, limits, env or {}, canaries, ignore)
        if bwrap is None:
            warnings.warn(
                "lc-evals arena: running untrusted code WITHOUT isolation "
                "(unsafe_no_isolation=True)",
                stacklevel=2,
            )
            return _run_unsafe(job)
        return _run_bwrap(bwrap, job)
    finally:
        if not keep:
            shutil.rmtree(ws, ignore_errors=True)


@dataclass(frozen=True)
class _Job:
    """One run's inputs: the source repository, the workspace and the run's settings."""

    src: pathlib.Path
    ws: pathlib.Path
    command: list[str]
    patches: Sequence[str]
    limits: SandboxLimits
    extra_env: Mapping[str, str]
    canaries: Sequence[str | os.PathLike[str]]
    ignore: Sequence[str]


@dataclass
class _Watch:
    """What a run must not change: the canaries' and the source repository's digests."""

    job: _Job
    canaries: dict[pathlib.Path, str]
    src_digest: str

    @classmethod
    def start(cls, job: _Job, copy: pathlib.Path) -> tuple[_Watch, RunResult, bool]:
        """Watch the canaries and the source, then copy and patch the source to ``copy``;
        ``False`` if a patch is rejected (``result.patch_error`` says why)."""
        watch = cls(job, _watch(job.ws, job.canaries), tree_digest(job.src, job.ignore))
        result = RunResult(returncode=None)
        return watch, result, _prepare(job.src, copy, job.patches, job.ignore, result)

    def finish(self, result: RunResult, peak: int, stop: ContainmentEvent | None) -> RunResult:
        """The last events of a run: a process peak over the cap, a changed canary or
        source."""
        if peak > self.job.limits.max_processes and stop is None:
            result.events.append(ContainmentEvent("process_limit", "detected", f"peak {peak}"))
        _check_watched(result, self.canaries, self.job.src, self.src_digest, self.job.ignore)
        return result


def _rlimits(limits: SandboxLimits) -> dict[str, Any]:
    """The per-process resource limits the launcher sets."""
    return {
        "cpu_seconds": limits.cpu_seconds,
        "memory_bytes": limits.memory_bytes,
        "file_size_bytes": limits.file_size_bytes,
        "open_files": limits.open_files,
    }


def _prepare(
    src: pathlib.Path,
    copy: pathlib.Path,
    patches: Sequence[str],
    ignore: Sequence[str],
    result: RunResult,
) -> bool:
    """Copy and patch; ``False`` (with ``result.patch_error`` set) if a patch is rejected."""
    _copy_repo(src, copy, ignore)
    for diff in patches:
        try:
            result.applied += [p for p in apply_patch(copy, diff) if p not in result.applied]
        except PatchError as exc:
            result.patch_error = str(exc)
            return False
    return True


def _watch(ws: pathlib.Path, canaries: Sequence[str | os.PathLike[str]]) -> dict[pathlib.Path, str]:
    canary = ws / "canary"
    canary.write_bytes(secrets.token_bytes(64))
    watched = {canary: _file_digest(canary)}
    for c in canaries:
        p = pathlib.Path(c).resolve()
        watched[p] = _file_digest(p)
    return watched


def _check_watched(
    result: RunResult,
    watched: Mapping[pathlib.Path, str],
    src: pathlib.Path,
    src_digest: str,
    ignore: Sequence[str],
) -> None:
    for path, digest in watched.items():
        if _file_digest(path) != digest:
            result.events.append(
                ContainmentEvent("write_outside", "detected", f"canary {path} changed")
            )
    if tree_digest(src, ignore) != src_digest:
        result.events.append(
            ContainmentEvent("write_outside", "detected", f"source repository {src} changed")
        )


def _inside_env(
    work: str, extra_env: Mapping[str, str], site: str, events_fd: int | None
) -> dict[str, str]:
    home = f"{work}/.arena/home"
    env = {
        "PATH": os.pathsep.join(
            dict.fromkeys([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"])
        ),
        "HOME": home,
        "TMPDIR": "/tmp",
        "XDG_CACHE_HOME": f"{home}/.cache",
        "XDG_CONFIG_HOME": f"{home}/.config",
        "XDG_DATA_HOME": f"{home}/.local/share",
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "LC_ARENA_WRITABLE": json.dumps([work, "/tmp", "/dev/shm"]),
        "LC_ARENA_WRITABLE_FILES": json.dumps(["/dev/null"]),
        **extra_env,
    }
    if events_fd is not None:
        env["LC_ARENA_EVENTS_FD"] = str(events_fd)
    python_path = [site]
    if "PYTHONPATH" in extra_env:
        python_path.append(extra_env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(python_path)
    return env


def _readonly_paths(exclude: Sequence[pathlib.Path]) -> list[str]:
    """Host paths the sandbox sees read-only besides ``/usr`` and part of ``/etc``: the
    Python installation, its import path and this package (never ``/``, a home
    directory itself, the temporary directory itself or anything under ``exclude``).
    Paths under ``/tmp`` (a virtual environment there) are bound over the sandbox's
    fresh ``/tmp`` (see :func:`_bwrap_argv`)."""
    tmp = os.path.realpath(tempfile.gettempdir())
    homes = {"/root", "/home", os.path.realpath(os.path.expanduser("~"))}
    cands = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    cands += [os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))]
    cands += [p for p in sys.path if p] + [str(_HERE)]
    paths: set[str] = set()
    for c in cands:
        for p in {os.path.abspath(c), os.path.realpath(c)}:
            if not os.path.exists(p) or p == "/" or p in homes or os.path.dirname(p) == "/home":
                continue
            if p == tmp:
                continue
            if any(p == str(e) or p.startswith(str(e) + "/") for e in exclude):
                continue
            paths.add(p)
    out: list[str] = []
    for p in sorted(paths, key=lambda q: (q.count("/"), q)):
        if p == "/usr" or p.startswith("/usr/"):
            continue
        if not any(p.startswith(q + "/") for q in out):
            out.append(p)
    return out


def _bwrap_argv(
    bwrap: str, limits: SandboxLimits, stage: str, work: str, info_fd: int
) -> list[str]:
    argv = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns"]
    if limits.network:
        argv.append("--share-net")
    argv += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--cap-drop", "ALL"]
    argv += ["--die-with-parent", "--new-session", "--hostname", "arena"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        top = f"/{name}"
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for name in _ETC:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    host = _readonly_paths([pathlib.Path(stage).parent])
    under_tmp = [p for p in host if p.startswith("/tmp/")]
    for path in host:
        if path not in under_tmp:
            argv += ["--ro-bind", path, path]
    size = str(limits.disk_bytes)
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm"]
    argv += ["--remount-ro", "/dev", "--size", size, "--tmpfs", "/tmp"]
    for path in under_tmp:  # bound over the fresh /tmp, so a venv there stays visible
        argv += ["--ro-bind", path, path]
    argv += ["--ro-bind", stage, stage, "--size", size, "--tmpfs", work]
    argv += ["--remount-ro", "/", "--chdir", work, "--info-fd", str(info_fd)]
    return argv


class _Reader(threading.Thread):
    """Drain one pipe, keeping its last ``keep`` bytes (and every line, if ``lines``)."""

    def __init__(self, fd: int, keep: int = 4 * _TAIL, lines: int = 0) -> None:
        super().__init__(daemon=True)
        self.fd, self.keep, self.max_lines = fd, keep, lines
        self.data = b""
        self.lines: list[bytes] = []
        self.dropped = 0
        self.start()

    def run(self) -> None:
        pending = b""
        with contextlib.suppress(OSError):
            while chunk := os.read(self.fd, 65536):
                self.data = (self.data + chunk)[-self.keep :]
                if self.max_lines:
                    pending += chunk
                    *done, pending = pending.split(b"\n")
                    for line in done:
                        if len(self.lines) < self.max_lines:
                            self.lines.append(line)
                        else:
                            self.dropped += 1
                    pending = pending[-65536:]
        os.close(self.fd)

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")[-_TAIL:]


def _run_bwrap(bwrap: str, job: _Job) -> RunResult:
    command, limits, extra_env = job.command, job.limits, job.extra_env
    stage, work = job.ws / "src", job.ws / "repo"
    watch, result, ready = _Watch.start(job, stage)
    if not ready:
        return result
    result.isolation = "bubblewrap"
    info_r, info_w = os.pipe()
    report_r, report_w = os.pipe()
    events_r, events_w = os.pipe()
    kernel = os.environ.get("LC_ARENA_KERNEL_LAYERS", "1") != "0"
    cfg = {
        "command": [sys.executable if part == "{python}" else part for part in command],
        "env": _inside_env(str(work), extra_env, str(_SITE), events_w),
        "cwd": str(work),
        "stage": str(stage),
        "make_dirs": [f"{work}/.arena/home"],
        "inside": True,
        "report_fd": report_w,
        "events_fd": events_w,
        "wall_seconds": limits.wall_seconds + 5,  # the evaluator's limit comes first
        "network": limits.network,
        "writable": [str(work), "/tmp", "/dev/shm"],
        "writable_files": ["/dev/null"],
        "kernel_layers": kernel,
        "limits": {
            **_rlimits(limits),
            # the namespace's init and the launcher, one over the cap so the
            # supervisor sees the cap passed and stops the run
            "nproc_total": limits.max_processes + 3,
        },
    }
    argv = _bwrap_argv(bwrap, limits, str(stage), str(work), info_w)
    argv += ["--", sys.executable, "-I", "-S", str(_LAUNCHER), "inside", json.dumps(cfg)]
    # bubblewrap outside, the namespace's init and the launcher, then one task over the
    # cap so the supervisor sees it passed; threads count too
    cgroup = PidsCgroup.create(limits.max_processes + 4)
    if cgroup is not None:
        argv = cgroup.wrap(argv)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
            pass_fds=(info_w, report_w, events_w),
            start_new_session=True,
        )
    except BaseException:
        if cgroup is not None:
            cgroup.remove(timeout=0)
        raise
    finally:
        for fd in (info_w, report_w, events_w):
            os.close(fd)
    assert proc.stdout is not None
    assert proc.stderr is not None
    out = _Reader(os.dup(proc.stdout.fileno()))
    err = _Reader(os.dup(proc.stderr.fileno()))
    proc.stdout.close()
    proc.stderr.close()
    info = _Reader(info_r, keep=65536)
    report = _Reader(report_r, keep=65536, lines=64)
    events = _Reader(events_r, keep=1024, lines=1000)
    init: int | None = None
    stop: ContainmentEvent | None = None
    peak = 0
    deadline = start + limits.wall_seconds
    while proc.poll() is None:
        if init is None:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                # the first object is bubblewrap's, written before the command starts
                first, _ = json.JSONDecoder().raw_decode(info.data.decode())
                init = int(first["child-pid"])
        if init is not None:
            count = max(_tree_size(init) - 2, 0)  # the namespace's init and the launcher
            peak = max(peak, count)
            if count > limits.max_processes:
                stop = ContainmentEvent(
                    "process_limit",
                    "killed",
                    f"{count} processes > max_processes={limits.max_processes}; "
                    "killed the PID namespace",
                )
        if stop is None and time.monotonic() > deadline:
            stop = ContainmentEvent(
                "wall_timeout",
                "killed",
                f"ran past wall_seconds={limits.wall_seconds}; killed the PID namespace",
            )
        if stop is not None:
            _kill_namespace(proc, init)
            break
        time.sleep(limits.poll_seconds)
    proc.wait()
    _kill_namespace(proc, init)  # nothing of the run outlives it
    if cgroup is not None:
        cgroup.remove()
    result.duration_s = round(time.monotonic() - start, 3)
    for reader in (out, err, report, events, info):
        reader.join(timeout=5)
    result.stdout, result.stderr = out.text(), err.text()
    reports = [_json(line) for line in report.lines]
    status = next((r for r in reports if "status" in r), None)
    layers = next((r["layers"] for r in reports if "layers" in r), None)
    errors = [str(r["error"]) for r in reports if "error" in r]
    if stop is not None:
        result.events.append(stop)
        result.returncode = status["status"] if status else -signal.SIGKILL
    elif status is not None:
        result.returncode = int(status["status"])
        if status.get("leftovers"):
            result.events.append(
                ContainmentEvent(
                    "leftover_processes",
                    "killed",
                    f"{status['leftovers']} process(es) outlived the command",
                )
            )
    else:
        result.returncode = proc.returncode
        why = "; ".join(errors) or err.text().strip()[-500:] or "no report from the launcher"
        result.events.append(ContainmentEvent("sandbox_error", "detected", why))
    if any(r.get("wall_timeout") for r in reports) and stop is None:
        result.events.append(
            ContainmentEvent("wall_timeout", "killed", "the launcher's wall-clock limit")
        )
    if layers is None and not any(e.kind == "sandbox_error" for e in result.events):
        result.events.append(
            ContainmentEvent(
                "sandbox_error", "detected", "; ".join(errors) or "the launcher reported no layers"
            )
        )
    namespaces = ["userns", "pidns", "mountns", "ipcns", "utsns"]
    if not limits.network:
        namespaces.append("netns")
    result.layers = ["bubblewrap", *namespaces, "cap_drop_all", "readonly_system"]
    if cgroup is not None:
        result.layers.append("pids_cgroup")
    result.layers += [*(layers or []), "supervisor", "audit_hook", "canary"]
    result.events += _python_events_from(events.lines)
    result.events += _signal_events(result, limits)
    return watch.finish(result, peak, stop)


def _json(line: bytes) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _kill_namespace(proc: subprocess.Popen[bytes], init: int | None) -> None:
    """SIGKILL the PID namespace's init (the kernel then kills every process in it) and
    bubblewrap itself."""
    if init is not None:
        with contextlib.suppress(OSError):
            os.kill(init, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def _run_unsafe(job: _Job) -> RunResult:
    command, limits, extra_env = job.command, job.limits, job.extra_env
    copy, run_dir = job.ws / "repo", job.ws / "run"
    run_dir.mkdir()
    watch, result, ready = _Watch.start(job, copy)
    if not ready:
        return result
    result.isolation = "unsafe-no-isolation"
    home, tmp = copy / ".arena" / "home", copy / ".arena" / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    events_path = run_dir / "events.jsonl"
    token = secrets.token_hex(16)
    writable = [str(copy), str(run_dir)]
    python_path = [str(_SITE)]
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(tmp),
        "TEMP": str(tmp),
        "TMP": str(tmp),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "LC_ARENA_TOKEN": token,
        "LC_ARENA_EVENTS": str(events_path),
        "LC_ARENA_WRITABLE": json.dumps(writable),
        "LC_ARENA_WRITABLE_FILES": json.dumps(["/dev/null"]),
        **extra_env,
    }
    if "PYTHONPATH" in extra_env:
        python_path.append(extra_env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(python_path)
    argv = [sys.executable if part == "{python}" else part for part in command]
    cfg = {
        "command": argv,
        "env": env,
        "cwd": str(copy),
        "layers_path": str(run_dir / "layers.json"),
        "network": limits.network,
        "writable": writable,
        "writable_files": ["/dev/null"],
        "kernel_layers": os.environ.get("LC_ARENA_KERNEL_LAYERS", "1") != "0",
        "limits": {**_rlimits(limits), "max_processes": limits.max_processes},
    }
    cfg_path = run_dir / "launch.json"
    cfg_path.write_text(json.dumps(cfg))
    out_path, err_path = run_dir / "stdout", run_dir / "stderr"
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-I", str(_LAUNCHER), "host", str(cfg_path)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=str(copy),
            env={"PATH": env["PATH"], "LANG": "C.UTF-8"},
            start_new_session=True,
        )
        result.returncode, peak, stop = _supervise(proc, limits, token.encode())
    result.duration_s = round(time.monotonic() - start, 3)
    result.stdout, result.stderr = _tail(out_path), _tail(err_path)
    result.events.append(
        ContainmentEvent(
            "unsafe_no_isolation",
            "noted",
            "ran WITHOUT isolation (unsafe_no_isolation=True): only per-process layers",
        )
    )
    if stop is not None:
        result.events.append(stop)
    leftovers = _kill_all(proc.pid, token.encode())
    if leftovers and stop is None:
        result.events.append(
            ContainmentEvent(
                "leftover_processes", "killed", f"{leftovers} process(es) outlived the command"
            )
        )
    result.events += _python_events(events_path)
    result.events += _signal_events(result, limits)
    try:
        result.layers = json.loads((run_dir / "layers.json").read_text()).get("layers", [])
    except (OSError, ValueError):
        result.events.append(
            ContainmentEvent("sandbox_error", "detected", "the launcher reported no layers")
        )
    result.layers = ["UNSAFE-no-isolation", *result.layers, "supervisor", "audit_hook", "canary"]
    return watch.finish(result, peak, stop)


def _tree_size(root: int) -> int:
    """Live processes under ``root`` (itself included), from ``/proc/*/task/*/children``.

    The launcher makes the command a child subreaper, so orphans of the run re-parent to
    it and stay in this tree while it lives. Cheap (proportional to the tree, not to the
    machine); falls back to a full ``/proc`` scan where ``children`` files are missing.
    """
    if not os.path.exists(f"/proc/{root}/task/{root}/children"):
        return len(_members(root, None))
    seen = {root}
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                    kids = f.read().split()
            except OSError:
                continue
            for k in kids:
                child = int(k)
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
    return len(seen)


def _supervise(
    proc: subprocess.Popen[bytes], limits: SandboxLimits, token: bytes
) -> tuple[int | None, int, ContainmentEvent | None]:
    """Wait for ``proc``, enforcing the process cap and the wall-clock limit."""
    deadline = time.monotonic() + limits.wall_seconds
    peak = 1

    def kill(kind: str, why: str) -> tuple[int | None, int, ContainmentEvent]:
        """Kill the run; ``why`` says how many processes died in its ``{killed}``."""
        killed = _kill_all(proc.pid, token)
        proc.wait()
        return proc.returncode, peak, ContainmentEvent(kind, "killed", why.format(killed=killed))

    while True:
        rc = proc.poll()
        if rc is not None:
            return rc, peak, None
        count = _tree_size(proc.pid)
        peak = max(peak, count)
        if count > limits.max_processes:
            return kill(
                "process_limit",
                f"{count} processes > max_processes={limits.max_processes}; killed {{killed}}",
            )
        if time.monotonic() > deadline:
            return kill(
                "wall_timeout",
                f"ran past wall_seconds={limits.wall_seconds}; killed {{killed}} process(es)",
            )
        time.sleep(limits.poll_seconds)


def _python_events(path: pathlib.Path) -> list[ContainmentEvent]:
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return []
    return _python_events_from(lines)


def _python_events_from(lines: Iterable[bytes]) -> list[ContainmentEvent]:
    """The audit hook's events (advisory: written by code inside the sandbox)."""
    events: list[ContainmentEvent] = []
    seen: set[tuple[str, str]] = set()
    for line in lines:
        try:
            data = json.loads(line)
            key = (str(data["kind"]), str(data["detail"]))
        except (ValueError, KeyError, TypeError):
            continue
        if key not in seen:
            seen.add(key)
            events.append(ContainmentEvent(key[0], "blocked", key[1]))
    return events


def _signal_events(result: RunResult, limits: SandboxLimits) -> list[ContainmentEvent]:
    """Limits hit by the command's own process, read from its exit status and output."""
    events: list[ContainmentEvent] = []
    rc = result.returncode
    if any(e.action == "killed" for e in result.events):
        return events
    output = result.stdout + result.stderr
    if rc == -signal.SIGXCPU or (rc == -signal.SIGKILL and result.duration_s >= limits.cpu_seconds):
        events.append(
            ContainmentEvent("cpu_limit", "killed", f"cpu_seconds={limits.cpu_seconds} reached")
        )
    elif "SIGXCPU" in output or "signal 24" in output:
        events.append(
            ContainmentEvent("cpu_limit", "killed", "a child process hit the CPU-time limit")
        )
    if rc == -signal.SIGXFSZ or "File too large" in output:
        events.append(
            ContainmentEvent(
                "file_size_limit", "killed", f"file_size_bytes={limits.file_size_bytes} reached"
            )
        )
    if "MemoryError" in output or "Cannot allocate memory" in output:
        events.append(
            ContainmentEvent(
                "memory_limit",
                "blocked",
                f"an allocation over memory_bytes={limits.memory_bytes} failed",
            )
        )
    if "No space left on device" in output:
        events.append(
            ContainmentEvent(
                "disk_limit",
                "blocked",
                f"a writable filesystem is full (disk_bytes={limits.disk_bytes})",
            )
        )
    return events
