"""Reading a repository: which files are source code the retriever can use, and why not.

:func:`scan_repository` walks a directory (without following symbolic links, skipping
hidden and build/cache directories) and sorts every file into one bucket:

* ``indexed``: a Python, C++, Rust or Go file that decodes as UTF-8;
* ``unsupported``: another language or a non-code file (by file name suffix);
* ``binary``: a supported suffix but NUL bytes or invalid UTF-8;
* ``unreadable``: the operating system refused to read it;
* ``too_large``: bigger than ``max_file_bytes`` (generated or vendored code, usually);
* ``empty``: nothing but whitespace.

The :class:`ScanReport` keeps the counts and a few example paths per bucket.

Examples:
    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (root / "a.py").write_text("def f():\\n    return 1\\n")
    >>> _ = (root / "notes.md").write_text("# notes")
    >>> files, report = scan_repository(root)
    >>> [f.path for f in files], report.counts
    (['a.py'], {'indexed': 1, 'unsupported': 1})
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass, field

from lc_agents.code.chunking import language_for_path

__all__ = ["DEFAULT_EXCLUDE_DIRS", "ScanReport", "SourceFile", "scan_repository"]

DEFAULT_EXCLUDE_DIRS = frozenset(
    {
        "node_modules",
        "__pycache__",
        "site-packages",
        "venv",
        "build",
        "dist",
        "target",
        "vendor",
        "third_party",
    }
)
SKIP_REASONS = ("unsupported", "binary", "unreadable", "too_large", "empty")


@dataclass(frozen=True)
class SourceFile:
    """A readable source file of a supported language.

    Attributes:
        path: path relative to the repository root, ``/`` separators.
        language: chunker language (``"python"``, ``"cpp"``, ``"rust"``, ``"go"``).
        text: the decoded content.
    """

    path: str
    language: str
    text: str


@dataclass
class ScanReport:
    """What :func:`scan_repository` found.

    Attributes:
        root: the repository directory.
        counts: number of files per bucket (``indexed`` and the skip reasons).
        examples: up to ``max_examples`` paths per skip reason.
    """

    root: str
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    max_examples: int = 5

    def note(self, bucket: str, path: str) -> None:
        """Count ``path`` in ``bucket``."""
        self.counts[bucket] = self.counts.get(bucket, 0) + 1
        if bucket != "indexed":
            ex = self.examples.setdefault(bucket, [])
            if len(ex) < self.max_examples:
                ex.append(path)

    @property
    def indexed(self) -> int:
        """Number of files usable for retrieval."""
        return self.counts.get("indexed", 0)

    @property
    def skipped(self) -> dict[str, int]:
        """Counts of skipped files per reason (reasons with none left out)."""
        return {r: self.counts[r] for r in SKIP_REASONS if self.counts.get(r)}

    def summary(self) -> str:
        """One line: ``12 files indexed; skipped: 3 unsupported, 1 binary``."""
        skipped = ", ".join(f"{n} {r}" for r, n in self.skipped.items()) or "none"
        return f"{self.indexed} files indexed; skipped: {skipped}"


def _classify(path: pathlib.Path, max_file_bytes: int) -> tuple[str, str]:
    """(bucket, text) of one file with a supported suffix."""
    try:
        size = path.stat().st_size
        if size > max_file_bytes:
            return "too_large", ""
        raw = path.read_bytes()
    except OSError:
        return "unreadable", ""
    if b"\x00" in raw[:8192]:
        return "binary", ""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "binary", ""
    if not text.strip():
        return "empty", ""
    return "indexed", text.lstrip("\ufeff")


def scan_repository(
    root: str | os.PathLike[str],
    *,
    max_file_bytes: int = 1_000_000,
    exclude_dirs: frozenset[str] | set[str] = DEFAULT_EXCLUDE_DIRS,
    max_examples: int = 5,
) -> tuple[list[SourceFile], ScanReport]:
    """Read every supported source file under ``root``.

    Args:
        root: repository directory.
        max_file_bytes: larger files are skipped as ``too_large``.
        exclude_dirs: directory names not descended into (hidden directories, whose name
            starts with ``.``, are always skipped).
        max_examples: example paths kept per skip reason.

    Returns:
        The files (sorted by path) and the :class:`ScanReport`.

    Raises:
        FileNotFoundError: ``root`` is not a directory.
    """
    base = pathlib.Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"repository directory not found: {root}")
    report = ScanReport(root=str(base), max_examples=max_examples)
    files: list[SourceFile] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in exclude_dirs)
        for name in sorted(filenames):
            p = pathlib.Path(dirpath) / name
            rel = p.relative_to(base).as_posix()
            if p.is_symlink() or not p.is_file():
                continue
            language = language_for_path(name)
            if language is None:
                report.note("unsupported", rel)
                continue
            bucket, text = _classify(p, max_file_bytes)
            report.note(bucket, rel)
            if bucket == "indexed":
                files.append(SourceFile(rel, language, text))
    files.sort(key=lambda f: f.path)
    return files, report
