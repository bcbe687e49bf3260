"""Prompts of the two roles, repository context, and reading the models' replies.

A retriever is any callable ``query -> list of snippets`` (strings); the arena asks it
with the issue text. Without one, :func:`whole_file_context` includes whole small source
files (no ranking at all) up to a character budget.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Callable, Sequence

from lc_evals.arena.patch import extract_diff, make_diff
from lc_evals.types import Message

Retriever = Callable[[str], Sequence[str]]

SOURCE_SUFFIXES = (".py", ".c", ".h", ".cc", ".cpp", ".hpp", ".rs", ".go", ".toml", ".cfg", ".md")
_SKIP_DIRS = {
    ".git",
    ".venv",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    "node_modules",
    ".arena",
}

SUBMITTER_SYSTEM = (
    "You are a software engineer fixing an issue in a repository. Reply with one unified "
    "diff (like `git diff`) that fixes the issue, inside a ```diff block. Paths are "
    "relative to the repository root and start with a/ and b/. Edit only source files."
)
REVIEWER_SYSTEM = (
    "You are a code reviewer. Write tests that fail on the buggy code and pass once the "
    "issue is correctly fixed, so that a wrong fix is caught. Reply with one unified diff "
    "inside a ```diff block that adds a new test file (--- /dev/null, +++ b/tests/...). "
    "Use pytest."
)


def whole_file_context(
    repo: str | os.PathLike[str],
    *,
    max_file_chars: int = 4000,
    suffixes: Sequence[str] = SOURCE_SUFFIXES,
) -> Retriever:
    """A retriever that ignores the query and returns every small source file whole.

    Args:
        repo: repository directory.
        max_file_chars: files longer than this are left out.
        suffixes: file name endings to include.

    Returns:
        ``query -> ["### path\\n<content>", ...]`` in path order.
    """
    root = pathlib.Path(repo)
    snippets: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            p = pathlib.Path(dirpath) / name
            if not name.endswith(tuple(suffixes)) or p.is_symlink():
                continue
            try:
                text = p.read_text()
            except (OSError, UnicodeDecodeError):
                continue
            if len(text) <= max_file_chars:
                snippets.append(f"### {p.relative_to(root).as_posix()}\n{text}")

    def retrieve(query: str) -> list[str]:
        return list(snippets)

    return retrieve


def render_context(snippets: Sequence[str], max_chars: int) -> str:
    """Join snippets in order until ``max_chars`` would be exceeded."""
    parts: list[str] = []
    used = 0
    for s in snippets:
        if used + len(s) + 2 > max_chars:
            break
        parts.append(s)
        used += len(s) + 2
    return "\n\n".join(parts)


def submitter_messages(issue_text: str, context: str) -> list[Message]:
    """The submitter's conversation: the issue and the retrieved code."""
    user = f"Issue:\n{issue_text.strip()}\n\nRelevant code:\n{context}\n\nWrite the fix as a unified diff."
    return [{"role": "system", "content": SUBMITTER_SYSTEM}, {"role": "user", "content": user}]


def reviewer_messages(issue_text: str, context: str, patch: str) -> list[Message]:
    """The reviewer's conversation: the issue, the retrieved code and the submitter's patch."""
    shown = patch.strip() or "(the submitter produced no patch)"
    user = (
        f"Issue:\n{issue_text.strip()}\n\nRelevant code:\n{context}\n\n"
        f"Proposed patch:\n```diff\n{shown}\n```\n\nWrite tests for the issue as a unified diff."
    )
    return [{"role": "system", "content": REVIEWER_SYSTEM}, {"role": "user", "content": user}]


_CODE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def read_submission(reply: str) -> str:
    """The diff in a submitter's reply (``""`` if none)."""
    return extract_diff(reply)


def read_review(reply: str, default_path: str) -> str:
    """The test diff in a reviewer's reply.

    A reply without a diff but with a Python code block holding a ``def test`` is turned
    into a diff creating ``default_path``; ``""`` if there is neither.
    """
    diff = extract_diff(reply)
    if diff:
        return diff
    for match in _CODE.finditer(reply):
        code = match.group(1)
        if re.search(r"^\s*def test", code, re.MULTILINE):
            return make_diff(default_path, None, code if code.endswith("\n") else code + "\n")
    return ""
