"""Malicious patches are contained and reported by the arena's sandbox.

Each test applies a patch that adds a hostile script to a repository copy and runs it
with small limits. The assertions hold whichever confinement layers the machine allows
(the kernel layers are checked additionally where ``RunResult.layers`` says they ran).
"""

from __future__ import annotations

import os
import pathlib
import socket
import sys
import time

import pytest

from lc_evals.arena.patch import make_diff
from lc_evals.arena.sandbox import RunResult, SandboxLimits, run_sandboxed

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

SMALL = SandboxLimits(
    cpu_seconds=2,
    memory_bytes=512 * 1024**2,
    max_processes=16,
    file_size_bytes=1024**2,
    wall_seconds=20,
)


@pytest.fixture(params=["kernel", "portable"])
def layers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run with every layer the machine allows, then with the portable layers only."""
    monkeypatch.setenv("LC_ARENA_KERNEL_LAYERS", "1" if request.param == "kernel" else "0")
    return str(request.param)


@pytest.fixture
def repo(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "README.md").write_text("a tiny repository\n")
    return root


def _evil(repo: pathlib.Path, code: str, limits: SandboxLimits = SMALL, **kw) -> RunResult:
    patch = make_diff("evil.py", None, code)
    return run_sandboxed(repo, ["{python}", "evil.py"], patches=[patch], limits=limits, **kw)


def _kinds(result: RunResult) -> set[str]:
    return {e.kind for e in result.events}


def test_a_clean_run_passes_with_no_events(repo: pathlib.Path) -> None:
    code = "import os, tempfile\nopen('out.txt', 'w').write(os.environ['HOME'])\n"
    code += "tempfile.NamedTemporaryFile().close()\nprint('fine')\n"
    result = _evil(repo, code)
    assert result.ok, result.stderr
    assert result.stdout.strip() == "fine"
    assert result.events == []
    assert not (repo / "out.txt").exists()  # the copy changed, the source did not
    assert "supervisor" in result.layers
    assert "audit_hook" in result.layers


def test_writing_outside_the_copy_is_blocked_and_reported(
    repo: pathlib.Path, layers: str, tmp_path: pathlib.Path
) -> None:
    target = tmp_path / "outside.txt"
    target.write_text("original\n")
    code = (
        "import os, pathlib\n"
        f"target = {str(target)!r}\n"
        "try:\n"
        "    open(target, 'w').write('pwned')\n"
        "except PermissionError as exc:\n"
        "    print('python write refused:', exc)\n"
        "try:\n"
        "    open(os.path.join('..', 'canary'), 'a').write('x')\n"
        "except PermissionError as exc:\n"
        "    print('relative write refused')\n"
        "os.system(f'echo shell >> {target}')\n"  # not Python: kernel layer or canary
    )
    result = _evil(repo, code, canaries=[target])
    assert "python write refused" in result.stdout
    assert "relative write refused" in result.stdout
    blocked = [e for e in result.events if e.kind == "write_outside" and e.action == "blocked"]
    assert any(str(target) in e.detail for e in blocked)
    if "landlock_fs" in result.layers:
        assert target.read_text() == "original\n"
        assert not any(e.action == "detected" for e in result.events)
    else:  # no kernel confinement (portable layers, or an older kernel): the shell's write happens and is detected
        assert any(e.kind == "write_outside" and e.action == "detected" for e in result.events)
        assert result.ok is False


def test_opening_a_socket_is_blocked_and_reported(repo: pathlib.Path, layers: str) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    code = (
        "import ctypes, socket\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'leak')\n"
        "    print('python connected')\n"
        "except OSError as exc:\n"
        "    print('python refused:', exc)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "fd = libc.socket(2, 1, 0)\n"  # AF_INET, SOCK_STREAM, past the audit hook
        "print('raw fd', fd)\n"
    )
    try:
        result = _evil(repo, code)
        with pytest.raises(TimeoutError):
            server.accept()  # nothing ever reached the listener
    finally:
        server.close()
    assert "python refused" in result.stdout
    assert "python connected" not in result.stdout
    assert "network" in _kinds(result)
    if "seccomp_socket" in result.layers:
        assert "raw fd -1" in result.stdout  # the kernel refuses the socket itself
    if layers == "portable":
        assert not {"seccomp_socket", "netns", "landlock_net"} & set(result.layers)


def test_fork_bomb_is_killed_and_reported(repo: pathlib.Path, layers: str) -> None:
    code = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    start = time.monotonic()
    result = _evil(repo, code)
    assert time.monotonic() - start < 15
    assert result.returncode != 0
    assert "process_limit" in _kinds(result)
    time.sleep(0.2)
    survivors = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
            state = pathlib.Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if b"evil.py" in cmd and state != b"Z":
            survivors.append(pid)
    assert survivors == []


def test_infinite_loop_hits_the_cpu_limit(repo: pathlib.Path) -> None:
    limits = SandboxLimits(cpu_seconds=1, wall_seconds=20, memory_bytes=512 * 1024**2)
    result = _evil(repo, "while True:\n    pass\n", limits)
    assert result.returncode is not None
    assert result.returncode < 0
    assert "cpu_limit" in _kinds(result)
    assert not result.ok


def test_sleeping_forever_hits_the_wall_clock_limit(repo: pathlib.Path) -> None:
    limits = SandboxLimits(cpu_seconds=5, wall_seconds=1.5, memory_bytes=512 * 1024**2)
    start = time.monotonic()
    result = _evil(repo, "import time\nwhile True:\n    time.sleep(1)\n", limits)
    assert time.monotonic() - start < 10
    assert "wall_timeout" in _kinds(result)
    assert not result.ok


def test_memory_hog_is_refused_and_reported(repo: pathlib.Path) -> None:
    limits = SandboxLimits(memory_bytes=256 * 1024**2, cpu_seconds=5, wall_seconds=20)
    result = _evil(repo, "blob = bytearray(1024 ** 3)\nprint('allocated')\n", limits)
    assert "allocated" not in result.stdout
    assert result.returncode != 0
    assert "memory_limit" in _kinds(result)


def test_huge_file_hits_the_file_size_limit(repo: pathlib.Path) -> None:
    code = "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (8 * 1024 ** 2))\n"
    result = _evil(repo, code)
    assert "file_size_limit" in _kinds(result)
    assert not result.ok


def test_rejected_patch_never_runs(repo: pathlib.Path) -> None:
    escape = "--- /dev/null\n+++ b/../../escape.py\n@@ -0,0 +1 @@\n+print('ran')\n"
    result = run_sandboxed(repo, ["{python}", "-c", "print('ran')"], patches=[escape])
    assert result.returncode is None
    assert not result.ok
    assert result.patch_error is not None
    assert result.patch_error.startswith("path")


def test_limits_validate() -> None:
    with pytest.raises(ValueError, match="max_processes"):
        SandboxLimits(max_processes=0)
    with pytest.raises(ValueError, match="wall_seconds"):
        SandboxLimits(wall_seconds=0)
