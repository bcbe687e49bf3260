"""The arena's sandbox: clean runs, limits, rejected patches, and what happens where
bubblewrap is missing (refusal, or an explicit unsafe run). The attacks are in
``test_arena_attacks.py``."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

from lc_evals.arena import sandbox
from lc_evals.arena.patch import make_diff
from lc_evals.arena.sandbox import (
    IsolationUnavailable,
    RunResult,
    SandboxLimits,
    isolation_status,
    run_sandboxed,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

SMALL = SandboxLimits(
    cpu_seconds=2,
    memory_bytes=512 * 1024**2,
    max_processes=16,
    file_size_bytes=1024**2,
    wall_seconds=20,
)


@pytest.fixture
def isolated() -> None:
    ok, why = isolation_status()
    if not ok:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI must run the sandbox tests, but: {why}", pytrace=False)
        pytest.skip(why)


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend bubblewrap is not installed."""
    monkeypatch.setattr(sandbox, "_probe", lambda: (None, "bubblewrap (bwrap) is not installed"))


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


def test_a_clean_run_passes_with_no_events(repo: pathlib.Path, isolated: None) -> None:
    code = "import os, tempfile\nopen('out.txt', 'w').write(os.environ['HOME'])\n"
    code += "tempfile.NamedTemporaryFile().close()\nprint('fine')\n"
    result = _evil(repo, code)
    assert result.ok, result.stderr
    assert result.stdout.strip() == "fine"
    assert result.events == []
    assert not (repo / "out.txt").exists()  # the copy changed, the source did not
    assert result.isolation == "bubblewrap"
    assert {"bubblewrap", "pidns", "netns", "cap_drop_all", "supervisor"} <= set(result.layers)


def test_the_work_copy_tmp_and_home_are_writable_and_private(
    repo: pathlib.Path, isolated: None
) -> None:
    code = (
        "import os, pathlib\n"
        "for p in ('here.txt', '/tmp/t.txt', os.environ['HOME'] + '/h.txt'):\n"
        "    pathlib.Path(p).write_text('x')\n"
        "print(os.getuid(), os.getgid(), os.getcwd() == os.environ['PWD'] if 'PWD' in os.environ else 1)\n"
        "print(sorted(os.environ))\n"
    )
    result = _evil(repo, code)
    assert result.ok, result.stderr
    uid_line, env_line = result.stdout.splitlines()[:2]
    assert uid_line.split()[:2] == ["65534", "65534"]
    assert "OPENAI_API_KEY" not in env_line
    assert not (repo / "here.txt").exists()


def test_without_bubblewrap_untrusted_code_is_refused(repo: pathlib.Path, no_bwrap: None) -> None:
    with pytest.raises(IsolationUnavailable, match="apt-get install bubblewrap") as info:
        run_sandboxed(repo, ["{python}", "-c", "print('ran')"])
    assert "--unsafe-no-isolation" in str(info.value)


def test_an_explicit_unsafe_run_says_so(repo: pathlib.Path, no_bwrap: None) -> None:
    with pytest.warns(UserWarning, match="WITHOUT isolation"):
        result = run_sandboxed(
            repo, ["{python}", "-c", "print('ran')"], unsafe_no_isolation=True, limits=SMALL
        )
    assert result.stdout.strip() == "ran"
    assert result.ok  # the note is not a failure ...
    assert result.isolation == "unsafe-no-isolation"  # ... but the result says it
    assert result.layers[0] == "UNSAFE-no-isolation"
    assert ("unsafe_no_isolation", "noted") in {(e.kind, e.action) for e in result.events}
    assert RunResult.from_dict(result.to_dict()) == result


def test_huge_file_hits_the_file_size_limit(repo: pathlib.Path, isolated: None) -> None:
    code = "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (8 * 1024 ** 2))\n"
    result = _evil(repo, code)
    assert "file_size_limit" in _kinds(result)
    assert not result.ok


def test_rejected_patch_never_runs(repo: pathlib.Path, isolated: None) -> None:
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
    with pytest.raises(ValueError, match="disk_bytes"):
        SandboxLimits(disk_bytes=0)


def test_an_import_path_under_tmp_stays_visible_read_only(
    repo: pathlib.Path, isolated: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A virtual environment under /tmp (a clone there, a nox session) must still import
    inside the sandbox's fresh /tmp; a sibling directory that is not on the path is not
    seen, and the bound one cannot be written."""
    import shutil
    import tempfile

    lib = pathlib.Path(tempfile.mkdtemp(prefix="arena-lib-", dir="/tmp"))
    other = pathlib.Path(tempfile.mkdtemp(prefix="arena-other-", dir="/tmp"))
    try:
        (lib / "tmp_lib_probe.py").write_text("VALUE = 42\n")
        (other / "secret.txt").write_text("hidden")
        monkeypatch.setattr(sys, "path", [*sys.path, str(lib)])
        code = (
            f"import sys, os; sys.path.append({str(lib)!r})\n"
            "import tmp_lib_probe\n"
            "print(tmp_lib_probe.VALUE)\n"
            f"print(os.path.exists({str(other / 'secret.txt')!r}))\n"
            "try:\n"
            f"    open({str(lib / 'w.txt')!r}, 'w')\n"
            "    print('wrote')\n"
            "except OSError:\n"
            "    print('read-only')\n"
        )
        result = _evil(repo, code)
        assert result.ok, result.stderr
        assert result.stdout.split() == ["42", "False", "read-only"]
        assert not (lib / "w.txt").exists()
    finally:
        shutil.rmtree(lib, ignore_errors=True)
        shutil.rmtree(other, ignore_errors=True)
