"""Reading user documents: plain text, Markdown, and PDF (with the ``pdf`` extra).

Example:
    >>> import pathlib, tempfile
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "note.md"
    >>> _ = p.write_text("# Title\\nHello.", encoding="utf-8")
    >>> read_document(p)
    '# Title\\nHello.'
"""

from __future__ import annotations

import os
import pathlib

from lc_agents.errors import InputError

__all__ = ["read_document"]


def read_document(path: str | os.PathLike[str]) -> str:
    """Return the text of a ``.txt``/``.md``/any UTF-8 file, or of a ``.pdf``.

    Raises:
        InputError: missing or unreadable file, not UTF-8 text, a PDF without
            ``pypdf`` installed, or a document with no text.
    """
    p = pathlib.Path(path)
    if not p.exists():
        raise InputError(f"no such file: {p}")
    if not p.is_file():
        raise InputError(f"not a file: {p}")
    if p.suffix.lower() == ".pdf":
        text = _read_pdf(p)
    else:
        try:
            raw = p.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read {p}: {exc}") from exc
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{p} is not UTF-8 text (byte {exc.start}: {raw[exc.start : exc.start + 1]!r}); "
                "convert it to UTF-8, e.g. `iconv -f latin1 -t utf-8`"
            ) from exc
        if "\x00" in text:
            raise InputError(f"{p} looks like a binary file, not text")
    if not text.strip():
        raise InputError(f"{p} is empty (no text to read)")
    return text


def _read_pdf(p: pathlib.Path) -> str:
    try:
        from pypdf import PdfReader
        from pypdf.errors import PdfReadError
    except ImportError as exc:
        raise InputError("reading PDF needs the pdf extra: pip install 'lc-agents[pdf]'") from exc
    try:
        reader = PdfReader(str(p))
        return "\n\n".join((page.extract_text() or "") for page in reader.pages)
    except (PdfReadError, OSError, ValueError) as exc:
        raise InputError(f"cannot read PDF {p}: {exc}") from exc
