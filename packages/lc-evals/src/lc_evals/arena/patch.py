"""Parse and apply unified diffs inside a repository copy, with clear errors.

Only text patches are supported. A patch is rejected before anything is written when it
is malformed, touches a path outside the repository (absolute paths, ``..``, symlinks
pointing out), carries binary content, or does not match the files it edits; so a patch
is applied completely or not at all.

Examples:
    >>> diff = '''--- a/hello.txt
    ... +++ b/hello.txt
    ... @@ -1 +1 @@
    ... -hello
    ... +hello, world
    ... '''
    >>> [p.path for p in parse_patch(diff)]
    ['hello.txt']
"""

from __future__ import annotations

import os
import pathlib
import re
import sys
from dataclasses import dataclass, field

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DIFF_FENCE = re.compile(r"```(?:diff|patch|udiff)?[ \t]*\n(.*?)```", re.DOTALL)


class PatchError(ValueError):
    """A patch that cannot be applied; ``kind`` says why.

    Attributes:
        kind: one of ``"malformed"``, ``"empty"``, ``"path"`` (escapes the repository or
            is otherwise not allowed), ``"binary"``, ``"mismatch"`` (context or removed
            lines not found), ``"exists"`` (creating a file that exists), ``"missing"``
            (editing or deleting a file that does not exist), ``"protected"`` (a
            submitter touching tests or test configuration, see
            :func:`check_submission`).
        path: the file concerned, if any.
    """

    def __init__(self, kind: str, message: str, path: str | None = None) -> None:
        self.kind = kind
        self.path = path
        super().__init__(f"{kind}: {message}")


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` block: ``lines`` keep their ``' '``/``'-'``/``'+'`` prefix."""

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    lines: tuple[str, ...]

    @property
    def before(self) -> list[str]:
        """The lines the hunk expects in the original (context and removed)."""
        return [ln[1:] for ln in self.lines if ln[0] in " -"]

    @property
    def after(self) -> list[str]:
        """The lines the hunk leaves (context and added)."""
        return [ln[1:] for ln in self.lines if ln[0] in " +"]


@dataclass(frozen=True)
class FilePatch:
    """The hunks of one file. ``old_path``/``new_path`` are ``None`` for ``/dev/null``."""

    old_path: str | None
    new_path: str | None
    hunks: tuple[Hunk, ...] = field(default_factory=tuple)

    @property
    def path(self) -> str:
        """The file this patch produces (or deletes)."""
        return self.new_path or self.old_path or ""

    @property
    def is_new(self) -> bool:
        return self.old_path is None

    @property
    def is_delete(self) -> bool:
        return self.new_path is None


def extract_diff(text: str) -> str:
    """The unified diff in a model reply: the first fenced ``diff`` block, else the text
    from the first ``--- `` header line; ``""`` if there is none."""
    for match in _DIFF_FENCE.finditer(text):
        body = match.group(1)
        if re.search(r"^--- ", body, re.MULTILINE) and re.search(r"^@@ ", body, re.MULTILINE):
            return body
    start = re.search(r"^(diff --git |--- )", text, re.MULTILINE)
    if start is None:
        return ""
    body = text[start.start() :].split("\n```", 1)[0]
    return body if body.endswith("\n") else body + "\n"


def _strip_prefix(raw: str) -> str | None:
    path = raw.split("\t", 1)[0].strip()
    if path.startswith('"') and path.endswith('"') and len(path) >= 2:
        path = path[1:-1]
    if path == "/dev/null":
        return None
    if path.startswith(("a/", "b/")):
        path = path[2:]
    return path


def check_path(path: str) -> str:
    """Normalise a repository-relative path; ``PatchError("path")`` if it could escape.

    >>> check_path("pkg/./mod.py")
    'pkg/mod.py'
    """
    if not path or "\x00" in path:
        raise PatchError("path", f"empty or NUL-containing path {path!r}", path)
    if path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", path):
        raise PatchError("path", f"absolute path {path!r} is outside the repository", path)
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise PatchError("path", f"path {path!r} climbs out of the repository with '..'", path)
    if parts and parts[0] == ".git":
        raise PatchError("path", f"path {path!r} edits the repository's .git directory", path)
    if not parts:
        raise PatchError("path", f"path {path!r} names the repository root", path)
    return "/".join(parts)


def parse_patch(text: str) -> list[FilePatch]:
    """Parse a unified diff (``diff -u`` or ``git diff`` output) into file patches.

    Raises:
        PatchError: ``"empty"`` if there is no file header, ``"binary"`` for binary
            content, ``"malformed"`` for a header or hunk that does not parse or whose
            line counts disagree with its ``@@`` header, ``"path"`` for a bad path.
    """
    if "GIT binary patch" in text or re.search(r"^Binary files .* differ$", text, re.MULTILINE):
        raise PatchError("binary", "binary patches are not supported")
    if "\x00" in text:
        raise PatchError("binary", "the patch contains NUL bytes")
    lines = text.splitlines()
    files: list[FilePatch] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("--- "):
            if line.startswith("@@"):
                raise PatchError("malformed", f"line {i + 1}: hunk before any '--- ' file header")
            i += 1
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
            raise PatchError("malformed", f"line {i + 1}: '--- ' header without a '+++ ' line")
        old = _strip_prefix(lines[i][4:])
        new = _strip_prefix(lines[i + 1][4:])
        if old is None and new is None:
            raise PatchError("malformed", f"line {i + 1}: both sides are /dev/null")
        old = check_path(old) if old is not None else None
        new = check_path(new) if new is not None else None
        i += 2
        hunks: list[Hunk] = []
        while i < len(lines) and lines[i].startswith("@@"):
            m = _HUNK.match(lines[i])
            if m is None:
                raise PatchError("malformed", f"line {i + 1}: bad hunk header {lines[i]!r}")
            o_start, o_len = int(m.group(1)), int(m.group(2) or "1")
            n_start, n_len = int(m.group(3)), int(m.group(4) or "1")
            i += 1
            body: list[str] = []
            seen_old = seen_new = 0
            while i < len(lines) and (seen_old < o_len or seen_new < n_len):
                ln = lines[i]
                if ln.startswith("\\"):  # "\ No newline at end of file"
                    i += 1
                    continue
                if ln == "":
                    ln = " "  # some tools drop the space of an empty context line
                tag = ln[0]
                if tag not in " -+":
                    raise PatchError(
                        "malformed", f"line {i + 1}: hunk line must start with ' ', '-' or '+'"
                    )
                seen_old += tag in " -"
                seen_new += tag in " +"
                body.append(ln)
                i += 1
            while i < len(lines) and lines[i].startswith("\\"):
                i += 1
            if seen_old != o_len or seen_new != n_len:
                raise PatchError(
                    "malformed",
                    f"hunk at line {n_start} of {new or old}: header says -{o_len} +{n_len} "
                    f"lines, body has -{seen_old} +{seen_new}",
                    new or old,
                )
            hunks.append(Hunk(o_start, o_len, n_start, n_len, tuple(body)))
        if not hunks:
            raise PatchError("malformed", f"file {new or old}: header without hunks", new or old)
        files.append(FilePatch(old, new, tuple(hunks)))
    if not files:
        raise PatchError("empty", "no '--- '/'+++ ' file header found")
    return files


def _inside(root: pathlib.Path, rel: str) -> pathlib.Path:
    """``root/rel``, refusing paths whose existing parts resolve outside ``root``."""
    target = root / rel
    resolved = target.resolve()
    if resolved != root and root not in resolved.parents:
        raise PatchError("path", f"{rel!r} resolves outside the repository (symlink?)", rel)
    return target


def _apply_hunks(original: list[str], hunks: tuple[Hunk, ...], path: str) -> list[str]:
    out: list[str] = []
    pos = 0  # next unconsumed line of original
    for h in hunks:
        before = h.before
        want = max(h.old_start - 1, 0) if h.old_len else h.old_start
        found = -1
        # exact position first, then the nearest offset (like patch(1) without fuzz)
        for delta in range(0, len(original) + 1):
            for cand in (want + delta, want - delta) if delta else (want,):
                fits = pos <= cand <= len(original) - len(before)
                if fits and original[cand : cand + len(before)] == before:
                    found = cand
                    break
            if found >= 0:
                break
        if found < 0:
            raise PatchError(
                "mismatch",
                f"{path}: hunk @@ -{h.old_start},{h.old_len} @@ does not match the file",
                path,
            )
        out.extend(original[pos:found])
        out.extend(h.after)
        pos = found + len(before)
    out.extend(original[pos:])
    return out


def apply_patch(root: str | os.PathLike[str], text: str) -> list[str]:
    """Apply the unified diff ``text`` to the directory ``root``, all or nothing.

    Args:
        root: the repository copy to modify.
        text: the diff (paths relative to ``root``; ``a/``/``b/`` prefixes are stripped).

    Returns:
        The repository-relative paths written or deleted, in patch order.

    Raises:
        PatchError: the patch is rejected (nothing has been written).
    """
    base = pathlib.Path(root).resolve()
    patches = parse_patch(text)
    results: list[tuple[pathlib.Path, str | None]] = []  # (target, new content or None)
    planned: dict[pathlib.Path, str | None] = {}
    for fp in patches:
        src = _inside(base, fp.old_path) if fp.old_path else None
        dst = _inside(base, fp.new_path) if fp.new_path else None
        if src is not None:
            if src in planned:
                content = planned[src]
                if content is None:
                    raise PatchError("missing", f"{fp.old_path} was deleted earlier", fp.old_path)
            elif src.is_file():
                raw = src.read_bytes()
                if b"\x00" in raw:
                    raise PatchError("binary", f"{fp.old_path} is a binary file", fp.old_path)
                content = raw.decode("utf-8", errors="surrogateescape")
            else:
                raise PatchError("missing", f"{fp.old_path} does not exist", fp.old_path)
            original = content.splitlines()
            trailing_nl = content.endswith("\n") or content == ""
        else:
            if dst is not None and (dst.exists() or (dst in planned and planned[dst] is not None)):
                raise PatchError("exists", f"{fp.new_path} already exists", fp.new_path)
            original, trailing_nl = [], True
        new_lines = _apply_hunks(original, fp.hunks, fp.path)
        if dst is None:
            if new_lines:
                raise PatchError("mismatch", f"{fp.old_path}: deletion leaves lines", fp.old_path)
            assert src is not None
            planned[src] = None
            results.append((src, None))
            continue
        text_out = "\n".join(new_lines) + ("\n" if new_lines and trailing_nl else "")
        if src is not None and src != dst:
            planned[src] = None
            results.append((src, None))
        planned[dst] = text_out
        results.append((dst, text_out))
    written: list[str] = []
    for target, content in results:
        rel = target.relative_to(base).as_posix()
        if content is None:
            if target.exists():
                target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                target.unlink()
            target.write_bytes(content.encode("utf-8", errors="surrogateescape"))
        if rel not in written:
            written.append(rel)
    return written


def make_diff(path: str, old: str | None, new: str | None, context: int = 3) -> str:
    """A unified diff turning ``old`` into ``new`` for ``path`` (``None`` = no file).

    >>> print(make_diff("x.py", "a = 1\\n", "a = 2\\n"), end="")
    --- a/x.py
    +++ b/x.py
    @@ -1 +1 @@
    -a = 1
    +a = 2
    """
    import difflib

    old_lines = (old or "").splitlines(keepends=True)
    new_lines = (new or "").splitlines(keepends=True)
    diff = difflib.unified_diff(
        old_lines,
        new_lines,
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile="/dev/null" if new is None else f"b/{path}",
        n=context,
    )
    out = []
    for line in diff:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


#: File names that configure how tests are collected and run, or what Python imports at
#: start-up; a submitter's patch may not add, change or delete them anywhere.
TEST_CONFIG_NAMES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        ".pytest.ini",
        "tox.ini",
        "setup.cfg",
        "setup.py",
        "pyproject.toml",
        "noxfile.py",
        "sitecustomize.py",
        "usercustomize.py",
        ".coveragerc",
        "Makefile",
        "GNUmakefile",
        "unittest.cfg",
        "nose.cfg",
        ".noserc",
    }
)
_TEST_DIRS = frozenset({"tests", "test"})
#: Modules a new top-level file must not shadow: the test runner and its plugins.
_RUNNER_MODULES = frozenset(
    {"pytest", "_pytest", "pluggy", "py", "iniconfig", "hypothesis", "unittest", "nose", "tox"}
)


def is_test_file(path: str) -> bool:
    """Whether ``path`` is a test file: ``test_*.py``, ``*_test.py``, or anything under a
    ``tests``/``test`` directory.

    >>> is_test_file("tests/helpers.py"), is_test_file("pkg/test_x.py"), is_test_file("pkg/x.py")
    (True, True, False)
    """
    parts = path.split("/")
    name = parts[-1]
    return (
        (name.startswith("test_") and name.endswith(".py"))
        or name.endswith("_test.py")
        or any(p in _TEST_DIRS for p in parts[:-1])
    )


def _shadows(top: str) -> str | None:
    import importlib.util

    name = top[:-3] if top.endswith(".py") else top
    if not name.isidentifier():
        return None
    if name in _RUNNER_MODULES or name in sys.stdlib_module_names:
        return name
    try:
        return name if importlib.util.find_spec(name) is not None else None
    except (ImportError, ValueError):
        return None


def protected_reason(
    path: str,
    *,
    repo: str | os.PathLike[str] | None = None,
    extra: frozenset[str] | set[str] = frozenset(),
) -> str | None:
    """Why a submitter may not touch ``path`` (repository-relative), or ``None``.

    Refused: test files (:func:`is_test_file`), files that configure how tests run
    (:data:`TEST_CONFIG_NAMES`), ``.pth`` files, bytecode, paths named in ``extra`` (the
    files of the test commands), and a new top-level module that would shadow the test
    runner, the standard library or an installed module (checked when ``repo`` is given).

    >>> protected_reason("conftest.py")
    'conftest.py changes how tests run'
    >>> protected_reason("mathx/core.py") is None
    True
    """
    parts = path.split("/")
    name = parts[-1]
    if name in TEST_CONFIG_NAMES:
        return f"{path} changes how tests run"
    if name.endswith((".pth", ".pyc", ".pyo", ".egg-link")) or "__pycache__" in parts:
        return f"{path} is loaded at interpreter start-up or as bytecode"
    if is_test_file(path):
        return f"{path} is a test file"
    if path in extra:
        return f"{path} is part of the test command"
    if repo is not None and not (pathlib.Path(repo) / parts[0]).exists():
        shadowed = _shadows(parts[0])
        if shadowed is not None:
            return f"{path} adds a top-level module that shadows {shadowed!r}"
    return None


def check_submission(
    text: str,
    *,
    repo: str | os.PathLike[str] | None = None,
    extra: frozenset[str] | set[str] = frozenset(),
) -> None:
    """Refuse a submitter's patch that touches what decides whether tests pass.

    Raises:
        PatchError: ``kind="protected"`` naming the first such path (renames and
            deletions count for both their old and new path); ``"malformed"``/``"empty"``
            as :func:`parse_patch`.

    >>> check_submission(make_diff("conftest.py", None, "import pytest\\n"))
    Traceback (most recent call last):
    ...
    lc_evals.arena.patch.PatchError: protected: conftest.py changes how tests run
    """
    for fp in parse_patch(text):
        for path in dict.fromkeys(p for p in (fp.old_path, fp.new_path) if p):
            reason = protected_reason(path, repo=repo, extra=extra)
            if reason is not None:
                raise PatchError("protected", reason, path)


def check_review(text: str) -> None:
    """Refuse a reviewer's patch that writes anything but test files (``conftest.py``
    and test configuration included).

    Raises:
        PatchError: ``kind="protected"`` naming the first such path.
    """
    for fp in parse_patch(text):
        for path in dict.fromkeys(p for p in (fp.old_path, fp.new_path) if p):
            if not is_test_file(path) or path.split("/")[-1] in TEST_CONFIG_NAMES:
                raise PatchError(
                    "protected", f"{path}: the reviewer may only write test files", path
                )
