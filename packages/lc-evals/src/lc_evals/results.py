"""Result records and JSON Lines input/output for suites and results."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lc_evals.errors import ResultsFileError
from lc_evals.types import TaskItem


@dataclass(frozen=True)
class Result:
    """The outcome of one item.

    Attributes:
        id: the item's id.
        task: the item's task.
        prediction: the system's reply.
        score: the scorer's value in ``[0, 1]``.
        scorer: name of the scorer used.
        answers: the reference answers.
        latency_s: wall-clock seconds the system took (seconds).
        metadata: the item's metadata (target length, depth, ...).
    """

    id: str
    task: str
    prediction: str
    score: float
    scorer: str
    answers: tuple[str, ...]
    latency_s: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "prediction": self.prediction,
            "score": self.score,
            "scorer": self.scorer,
            "answers": list(self.answers),
            "latency_s": self.latency_s,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        missing = {"id", "task", "prediction", "score"} - data.keys()
        if missing:
            raise ValueError(f"result is missing field(s) {sorted(missing)}")
        score = data["score"]
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise ValueError(f"score must be a number, got {score!r}")
        return cls(
            id=str(data["id"]),
            task=str(data["task"]),
            prediction=str(data["prediction"]),
            score=float(score),
            scorer=str(data.get("scorer", "")),
            answers=tuple(data.get("answers", ())),
            latency_s=float(data.get("latency_s", 0.0)),
            metadata=dict(data.get("metadata", {})),
        )


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of a JSON Lines file.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ResultsFileError: a line is not valid JSON, not a JSON object, or is the
            truncated last line of an interrupted writer (no final newline).
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file: {p}")
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if not line.endswith("\n"):
                raise ResultsFileError(
                    str(p), lineno, "truncated last line (no newline); the writer was interrupted"
                )
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ResultsFileError(str(p), lineno, f"not valid JSON ({exc.msg})") from None
            if not isinstance(data, dict):
                raise ResultsFileError(
                    str(p), lineno, f"expected a JSON object, got {type(data).__name__}"
                )
            yield lineno, data


def load_results(path: str | Path) -> list[Result]:
    """Read a results file; every bad or duplicated line raises :class:`ResultsFileError`."""
    out: list[Result] = []
    seen: dict[str, int] = {}
    for lineno, data in read_jsonl(path):
        try:
            result = Result.from_dict(data)
        except (ValueError, TypeError) as exc:
            raise ResultsFileError(str(path), lineno, str(exc)) from None
        if result.id in seen:
            raise ResultsFileError(
                str(path),
                lineno,
                f"duplicate result for item {result.id!r} (first at line {seen[result.id]})",
            )
        seen[result.id] = lineno
        out.append(result)
    return out


def load_suite(path: str | Path) -> list[TaskItem]:
    """Read a suite written by :func:`write_suite` (``lc-evals generate``)."""
    items: list[TaskItem] = []
    seen: set[str] = set()
    for lineno, data in read_jsonl(path):
        try:
            item = TaskItem.from_dict(data)
        except (ValueError, TypeError) as exc:
            raise ResultsFileError(str(path), lineno, str(exc)) from None
        if item.id in seen:
            raise ResultsFileError(str(path), lineno, f"duplicate item id {item.id!r}")
        seen.add(item.id)
        items.append(item)
    return items


def write_suite(items: Iterable[TaskItem], path: str | Path) -> Path:
    """Write ``items`` as JSON Lines (one :meth:`TaskItem.to_dict` per line)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as fh:
        for item in items:
            fh.write(json.dumps(item.to_dict(), ensure_ascii=False) + "\n")
    return p
