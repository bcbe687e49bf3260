"""Result records and JSON Lines input/output for suites and results."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lc_evals.errors import ResultsFileError, ResultsFileWarning
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
        item_hash: fingerprint of the item the result answers
            (:func:`~lc_evals.fingerprint.item_fingerprint`); empty if unknown.
        run_hash: fingerprint of the system and settings that produced it
            (:func:`~lc_evals.fingerprint.run_fingerprint`); empty if unknown.
    """

    id: str
    task: str
    prediction: str
    score: float
    scorer: str
    answers: tuple[str, ...]
    latency_s: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)
    item_hash: str = ""
    run_hash: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "id": self.id,
            "task": self.task,
            "prediction": self.prediction,
            "score": self.score,
            "scorer": self.scorer,
            "answers": list(self.answers),
            "latency_s": self.latency_s,
            "metadata": self.metadata,
        }
        if self.item_hash or self.run_hash:
            out["fingerprint"] = {"item": self.item_hash, "run": self.run_hash}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        missing = {"id", "task", "prediction", "score"} - data.keys()
        if missing:
            raise ValueError(f"result is missing field(s) {sorted(missing)}")
        score = data["score"]
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise ValueError(f"score must be a number, got {score!r}")
        fingerprint = data.get("fingerprint") or {}
        if not isinstance(fingerprint, dict):
            raise ValueError(f"fingerprint must be an object, got {fingerprint!r}")
        return cls(
            id=str(data["id"]),
            task=str(data["task"]),
            prediction=str(data["prediction"]),
            score=float(score),
            scorer=str(data.get("scorer", "")),
            answers=tuple(data.get("answers", ())),
            latency_s=float(data.get("latency_s", 0.0)),
            metadata=dict(data.get("metadata", {})),
            item_hash=str(fingerprint.get("item", "")),
            run_hash=str(fingerprint.get("run", "")),
        )


def read_jsonl(
    path: str | Path, *, torn_tail: Literal["raise", "skip"] = "raise"
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of a JSON Lines file.

    Args:
        path: the file.
        torn_tail: what to do with a last line that has no newline and is not a
            complete JSON object (a writer killed mid-line): ``"raise"``, or ``"skip"``
            it with a :class:`~lc_evals.errors.ResultsFileWarning`. A complete object
            that only lacks its newline is always read.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ResultsFileError: a line is not valid JSON, not a JSON object, or (with
            ``torn_tail="raise"``) is the truncated last line of an interrupted writer.
    """
    if torn_tail not in ("raise", "skip"):
        raise ValueError(f"torn_tail must be 'raise' or 'skip', got {torn_tail!r}")
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file: {p}")
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if not line.endswith("\n") and not _complete_object(line):
                if torn_tail == "skip":
                    warnings.warn(
                        f"{p}, line {lineno}: skipped a truncated last line "
                        f"({len(line)} characters, no newline) left by an interrupted writer",
                        ResultsFileWarning,
                        stacklevel=3,
                    )
                    return
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


def _complete_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def repair_torn_tail(path: str | Path) -> bool:
    """Make an appendable file of one whose writer was killed mid-line.

    A last line without its newline is cut off (with a
    :class:`~lc_evals.errors.ResultsFileWarning` naming it) unless it is a complete
    JSON object, which only gets its newline back. Everything before it is kept.
    Returns whether the file was changed.
    """
    p = Path(path)
    with p.open("rb+") as fh:
        data = fh.read()
        if not data or data.endswith(b"\n"):
            return False
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        if _complete_object(tail.decode("utf-8", errors="replace")):
            fh.write(b"\n")
            return True
        lineno = data.count(b"\n") + 1
        fh.truncate(cut)
    warnings.warn(
        f"{p}, line {lineno}: dropped a truncated last line ({len(tail)} bytes, no newline) "
        "left by an interrupted writer; the run goes on from the lines before it",
        ResultsFileWarning,
        stacklevel=2,
    )
    return True


def load_results(
    path: str | Path, *, torn_tail: Literal["raise", "skip"] = "raise"
) -> list[Result]:
    """Read a results file; every bad or duplicated line raises :class:`ResultsFileError`.

    ``torn_tail="skip"`` skips (with a warning) a truncated last line, as
    :func:`read_jsonl` does.
    """
    out: list[Result] = []
    seen: dict[str, int] = {}
    for lineno, data in read_jsonl(path, torn_tail=torn_tail):
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
