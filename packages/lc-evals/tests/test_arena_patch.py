"""Unified-diff parsing and application: round trips, offsets, and every rejection."""

from __future__ import annotations

import os
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_evals.arena.patch import PatchError, apply_patch, extract_diff, make_diff, parse_patch


def _repo(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    root = tmp_path / "repo"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_modify_create_delete(tmp_path: pathlib.Path) -> None:
    root = _repo(tmp_path, {"a.py": "x = 1\ny = 2\n", "old.txt": "bye\n"})
    diff = (
        make_diff("a.py", "x = 1\ny = 2\n", "x = 1\ny = 3\n")
        + make_diff("pkg/new.py", None, "z = 0\n")
        + make_diff("old.txt", "bye\n", None)
    )
    assert apply_patch(root, diff) == ["a.py", "pkg/new.py", "old.txt"]
    assert (root / "a.py").read_text() == "x = 1\ny = 3\n"
    assert (root / "pkg/new.py").read_text() == "z = 0\n"
    assert not (root / "old.txt").exists()


def test_hunk_found_at_an_offset(tmp_path: pathlib.Path) -> None:
    body = "".join(f"line {i}\n" for i in range(20))
    root = _repo(tmp_path, {"f.txt": "extra\nextra\n" + body})
    diff = make_diff("f.txt", body, body.replace("line 10\n", "LINE TEN\n"))
    apply_patch(root, diff)
    assert "LINE TEN\n" in (root / "f.txt").read_text()
    assert (root / "f.txt").read_text().startswith("extra\nextra\nline 0\n")


@settings(max_examples=40)
@given(
    old=st.lists(st.sampled_from(["a", "b", "c", "", "def f():", "  return 1"]), max_size=12),
    new=st.lists(st.sampled_from(["a", "b", "x", "", "  return 2"]), max_size=12),
)
def test_make_then_apply_round_trip(tmp_path_factory: pytest.TempPathFactory, old, new) -> None:
    root = tmp_path_factory.mktemp("rt")
    old_text = "".join(s + "\n" for s in old)
    new_text = "".join(s + "\n" for s in new)
    (root / "f.txt").write_text(old_text)
    diff = make_diff("f.txt", old_text, new_text)
    if not diff:  # identical texts
        assert old_text == new_text
        return
    apply_patch(root, diff)
    assert (root / "f.txt").read_text() == new_text


@pytest.mark.parametrize(
    ("diff", "kind"),
    [
        ("just some words\n", "empty"),
        ("--- a/x.py\n@@ -1 +1 @@\n-a\n+b\n", "malformed"),
        ("--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a\n+b\n", "malformed"),
        ("--- a/x.py\n+++ b/x.py\n@@ nonsense @@\n", "malformed"),
        ("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n*a\n+b\n", "malformed"),
        ("--- /dev/null\n+++ b/../escape.py\n@@ -0,0 +1 @@\n+x\n", "path"),
        ("--- /dev/null\n+++ /etc/evil\n@@ -0,0 +1 @@\n+x\n", "path"),
        ("--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+x\n", "path"),
        ("diff --git a/i.png b/i.png\nGIT binary patch\nliteral 3\nabc\n", "binary"),
        ("Binary files a/i.png and b/i.png differ\n", "binary"),
        ("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-not there\n+b\n", "mismatch"),
        ("--- a/missing.py\n+++ b/missing.py\n@@ -1 +1 @@\n-a\n+b\n", "missing"),
        ("--- /dev/null\n+++ b/x.py\n@@ -0,0 +1 @@\n+dup\n", "exists"),
    ],
)
def test_rejections_name_the_reason_and_write_nothing(
    tmp_path: pathlib.Path, diff: str, kind: str
) -> None:
    root = _repo(tmp_path, {"x.py": "a\n"})
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    with pytest.raises(PatchError) as info:
        apply_patch(root, diff)
    assert info.value.kind == kind
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == before
    assert (root / "x.py").read_text() == "a\n"
    assert not (tmp_path / "escape.py").exists()


def test_symlink_pointing_outside_is_refused(tmp_path: pathlib.Path) -> None:
    root = _repo(tmp_path, {"x.py": "a\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "link")
    diff = "--- /dev/null\n+++ b/link/evil.py\n@@ -0,0 +1 @@\n+x\n"
    with pytest.raises(PatchError) as info:
        apply_patch(root, diff)
    assert info.value.kind == "path"
    assert list(outside.iterdir()) == []


def test_all_or_nothing_when_a_later_file_fails(tmp_path: pathlib.Path) -> None:
    root = _repo(tmp_path, {"x.py": "a\n"})
    diff = make_diff("x.py", "a\n", "b\n") + make_diff("y.py", "zzz\n", "q\n")
    with pytest.raises(PatchError):
        apply_patch(root, diff)
    assert (root / "x.py").read_text() == "a\n"


def test_extract_diff_from_a_chatty_reply() -> None:
    diff = make_diff("x.py", "a\n", "b\n")
    reply = f"Here is the fix:\n```diff\n{diff}```\nHope it helps."
    assert extract_diff(reply) == diff
    assert extract_diff("Sure!\n" + diff) == diff
    assert extract_diff("no diff here") == ""
    assert [p.path for p in parse_patch(extract_diff(reply))] == ["x.py"]
