"""An arena task: a repository, an issue, its gold patch and the repository's test command."""

from __future__ import annotations

import json
import os
import pathlib
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lc_evals.arena.patch import parse_patch

DEFAULT_TEST_COMMAND = ("{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider")
DEFAULT_REVIEW_COMMAND = (
    "{python}",
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    "--noconftest",
    "{tests}",
)


def _argv(value: str | Sequence[str], name: str) -> tuple[str, ...]:
    argv = tuple(shlex.split(value)) if isinstance(value, str) else tuple(str(v) for v in value)
    if not argv:
        raise ValueError(f"Issue.{name} must be a non-empty command, got {value!r}")
    return argv


@dataclass(frozen=True)
class Issue:
    """One arena task.

    Attributes:
        id: stable identifier (part of every battle id).
        repo: the repository directory at the buggy commit.
        description: the issue text shown to both models.
        gold_patch: the reference fix (unified diff).
        test_command: the repository's CI check (argv; ``"{python}"`` is the running
            interpreter); it must pass with the gold patch.
        review_command: how the reviewer's tests are run (argv); ``"{tests}"`` is
            replaced by the test files the reviewer's diff writes.
        review_test_path: where a reviewer's bare code block (no diff) is written.
        env: extra environment variables of every run (e.g.
            ``{"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}`` for a faster, more hermetic pytest).
        metadata: free-form facts (source, language ...).

    Examples:
        >>> gold = "--- a/m.py\\n+++ b/m.py\\n@@ -1 +1 @@\\n-x = 1\\n+x = 2\\n"
        >>> Issue("demo-1", "/tmp", "x must be 2", gold).test_command[1:3]
        ('-m', 'pytest')
    """

    id: str
    repo: str
    description: str
    gold_patch: str
    test_command: tuple[str, ...] = DEFAULT_TEST_COMMAND
    review_command: tuple[str, ...] = DEFAULT_REVIEW_COMMAND
    review_test_path: str = "tests/test_arena_review.py"
    env: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.id or any(c in self.id for c in "\n\t"):
            raise ValueError(f"Issue.id must be a non-empty single-line string, got {self.id!r}")
        if not self.description.strip():
            raise ValueError(f"Issue.description of {self.id!r} must not be empty")
        parse_patch(self.gold_patch)  # raises PatchError with the reason
        object.__setattr__(self, "test_command", _argv(self.test_command, "test_command"))
        object.__setattr__(self, "review_command", _argv(self.review_command, "review_command"))
        if "{tests}" not in self.review_command:
            raise ValueError(
                f"Issue.review_command must contain the placeholder '{{tests}}', "
                f"got {self.review_command!r}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "repo": self.repo,
            "description": self.description,
            "gold_patch": self.gold_patch,
            "test_command": list(self.test_command),
            "review_command": list(self.review_command),
            "review_test_path": self.review_test_path,
            "env": dict(self.env),
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, base: str | os.PathLike[str] = ".") -> Issue:
        """Build from a mapping; ``gold_patch_file`` and a relative ``repo`` are read
        relative to ``base``. Raises ``ValueError`` naming a missing field."""
        root = pathlib.Path(base)
        data = dict(data)
        if "gold_patch" not in data and "gold_patch_file" in data:
            data["gold_patch"] = (root / data.pop("gold_patch_file")).read_text()
        data.pop("gold_patch_file", None)
        missing = {"id", "repo", "description", "gold_patch"} - data.keys()
        if missing:
            raise ValueError(f"issue is missing field(s) {sorted(missing)}")
        data["repo"] = str((root / data["repo"]).resolve())
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known
        if unknown:
            raise ValueError(
                f"issue has unknown field(s) {sorted(unknown)}; allowed {sorted(known)}"
            )
        return cls(**data)


def load_issue(
    path: str | os.PathLike[str], *, repo: str | os.PathLike[str] | None = None
) -> Issue:
    """Read an issue JSON file (fields of :class:`Issue`; ``gold_patch_file`` may name a
    diff beside it). ``repo`` overrides the file's ``repo`` field."""
    p = pathlib.Path(path)
    try:
        data = json.loads(p.read_text())
    except ValueError as exc:
        raise ValueError(f"{p}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{p}: expected a JSON object, got {type(data).__name__}")
    if repo is not None:
        data["repo"] = str(pathlib.Path(repo).resolve())
    return Issue.from_dict(data, base=p.parent)
