"""Run a command on a throw-away copy of a repository, under limits, without network.

Every run gets a fresh workspace::

    <tmp>/lc-arena-XXXX/
        canary          random bytes, checksummed before and after the run
        run/            launcher config, the run's stdout/stderr, containment events
        repo/           the copy (the command's working directory)
            .arena/home   HOME
            .arena/tmp    TMPDIR

The command runs in a new session through a small launcher
(:mod:`lc_evals.arena._launcher`) that applies, layer by layer, what the system allows:
resource limits (CPU time, address space, file size, open files; process count for
non-root users), a new network namespace, Landlock write confinement to the copy, a
seccomp filter refusing non-AF_UNIX sockets; and an audit hook in every Python process
of the run that blocks and reports Python-level network use and writes outside the copy.
A supervisor in this process counts the run's processes (its session, its descendants,
and processes carrying its environment token), kills them all when there are more than
``max_processes`` or the wall-clock limit passes, and sweeps stragglers at the end.
After the run the canary file and the source repository are checksummed again.

Setting the environment variable ``LC_ARENA_KERNEL_LAYERS=0`` turns the kernel layers
(network namespace, Landlock, seccomp) off, to exercise the portable layers alone.

Each reason a run was stopped or an action refused is a :class:`ContainmentEvent` in the
:class:`RunResult`; ``RunResult.layers`` says which layers were in force, so a report
states what was guaranteed. See the docs page "lc-evals arena" for the limits of each
layer (for example: as root, the process cap is enforced by polling, not the kernel).

Examples:
    >>> import pathlib, sys, tempfile
    >>> repo = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (repo / "ok.py").write_text("print('hi')\\n")
    >>> result = run_sandboxed(repo, [sys.executable, "ok.py"])
    >>> result.ok, result.stdout.strip()
    (True, 'hi')
"""

from __future__ import annotations

import contextlib
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
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lc_evals.arena.patch import PatchError, apply_patch

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
        max_processes: most processes alive at once in the run (supervisor; also
            RLIMIT_NPROC for non-root users).
        file_size_bytes: largest file a process may write (RLIMIT_FSIZE); also caps the
            captured stdout/stderr.
        open_files: open file descriptors per process (RLIMIT_NOFILE).
        wall_seconds: wall-clock limit of the whole run.
        network: ``False`` (default) cuts the network off; ``True`` leaves it alone.
        poll_seconds: how often the supervisor counts processes.
    """

    cpu_seconds: int = 60
    memory_bytes: int = 2 * 1024**3
    max_processes: int = 64
    file_size_bytes: int = 64 * 1024**2
    open_files: int = 256
    wall_seconds: float = 120.0
    network: bool = False
    poll_seconds: float = 0.005

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "memory_bytes", "max_processes", "file_size_bytes"):
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
            ``"memory_limit"``, ``"file_size_limit"``, ``"wall_timeout"``,
            ``"leftover_processes"`` or ``"sandbox_error"``.
        action: ``"blocked"`` (refused, the run went on), ``"killed"`` (the run or a
            process was stopped) or ``"detected"`` (seen after the fact).
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
    """

    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0
    events: list[ContainmentEvent] = field(default_factory=list)
    layers: list[str] = field(default_factory=list)
    patch_error: str | None = None
    applied: list[str] = field(default_factory=list)

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
) -> RunResult:
    """Copy ``repo``, apply ``patches`` in order, run ``command`` in the copy, clean up.

    Args:
        repo: the repository directory (never modified; its tree is checksummed).
        command: argv of the command, run with the copy as working directory; the
            string ``"{python}"`` is replaced by the running interpreter.
        patches: unified diffs to apply to the copy first; the first rejected one stops
            the run (``RunResult.patch_error`` says why, ``returncode`` is ``None``).
        limits: resource limits (default :class:`SandboxLimits`).
        env: extra environment variables for the command.
        canaries: more files outside the copy to checksum before and after.
        ignore: names not copied (version control, caches).
        keep: keep the workspace (for debugging; its path is ``/tmp/lc-arena-*``).

    Returns:
        A :class:`RunResult` with the exit status, output tails and containment events.
    """
    limits = limits or SandboxLimits()
    src = pathlib.Path(repo).resolve()
    if not src.is_dir():
        raise FileNotFoundError(f"repository {src} is not a directory")
    if not command:
        raise ValueError("command must not be empty")
    ws = pathlib.Path(tempfile.mkdtemp(prefix="lc-arena-")).resolve()
    try:
        return _run(src, ws, list(command), patches, limits, env or {}, canaries, ignore)
    finally:
        if not keep:
            shutil.rmtree(ws, ignore_errors=True)


def _run(
    src: pathlib.Path,
    ws: pathlib.Path,
    command: list[str],
    patches: Sequence[str],
    limits: SandboxLimits,
    extra_env: Mapping[str, str],
    canaries: Sequence[str | os.PathLike[str]],
    ignore: Sequence[str],
) -> RunResult:
    copy, run_dir = ws / "repo", ws / "run"
    run_dir.mkdir()
    canary = ws / "canary"
    canary.write_bytes(secrets.token_bytes(64))
    watched = {canary: _file_digest(canary)}
    for c in canaries:
        p = pathlib.Path(c).resolve()
        watched[p] = _file_digest(p)
    src_digest = tree_digest(src, ignore)
    _copy_repo(src, copy, ignore)
    result = RunResult(returncode=None)
    for diff in patches:
        try:
            result.applied += [p for p in apply_patch(copy, diff) if p not in result.applied]
        except PatchError as exc:
            result.patch_error = str(exc)
            return result
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
        "limits": {
            "cpu_seconds": limits.cpu_seconds,
            "memory_bytes": limits.memory_bytes,
            "file_size_bytes": limits.file_size_bytes,
            "open_files": limits.open_files,
            "max_processes": limits.max_processes,
        },
    }
    cfg_path = run_dir / "launch.json"
    cfg_path.write_text(json.dumps(cfg))
    out_path, err_path = run_dir / "stdout", run_dir / "stderr"
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-I", str(_LAUNCHER), str(cfg_path)],
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
    result.layers = [*result.layers, "supervisor", "audit_hook", "canary"]
    if peak > limits.max_processes and stop is None:
        result.events.append(ContainmentEvent("process_limit", "detected", f"peak {peak}"))
    for path, digest in watched.items():
        if _file_digest(path) != digest:
            result.events.append(
                ContainmentEvent("write_outside", "detected", f"canary {path} changed")
            )
    if tree_digest(src, ignore) != src_digest:
        result.events.append(
            ContainmentEvent("write_outside", "detected", f"source repository {src} changed")
        )
    return result


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
    while True:
        rc = proc.poll()
        if rc is not None:
            return rc, peak, None
        count = _tree_size(proc.pid)
        peak = max(peak, count)
        if count > limits.max_processes:
            killed = _kill_all(proc.pid, token)
            proc.wait()
            return (
                proc.returncode,
                peak,
                ContainmentEvent(
                    "process_limit",
                    "killed",
                    f"{count} processes > max_processes={limits.max_processes}; killed {killed}",
                ),
            )
        if time.monotonic() > deadline:
            killed = _kill_all(proc.pid, token)
            proc.wait()
            return (
                proc.returncode,
                peak,
                ContainmentEvent(
                    "wall_timeout",
                    "killed",
                    f"ran past wall_seconds={limits.wall_seconds}; killed {killed} process(es)",
                ),
            )
        time.sleep(limits.poll_seconds)


def _python_events(path: pathlib.Path) -> list[ContainmentEvent]:
    events: list[ContainmentEvent] = []
    seen: set[tuple[str, str]] = set()
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return events
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
    return events
