"""Atomic JSON checkpoints of a MemAgent run, so a long run resumes where it stopped."""

from __future__ import annotations

import json
import os
import pathlib
import tempfile
from dataclasses import asdict, dataclass, field
from typing import Any

from lc_agents.errors import CheckpointError

__all__ = ["Checkpoint", "MemoryStep", "atomic_write_json"]

CHECKPOINT_VERSION = 1


@dataclass(frozen=True)
class MemoryStep:
    """The memory after reading one chunk.

    Attributes:
        chunk_index: 0-based index of the chunk just read.
        chunk_tokens: number of tokens in that chunk.
        memory: the memory text after the update.
        kept: ``True`` when the model chose to keep the previous memory unchanged.
        seconds: wall time of the update (s).
    """

    chunk_index: int
    chunk_tokens: int
    memory: str
    kept: bool
    seconds: float


@dataclass
class Checkpoint:
    """State of a run after its last finished chunk.

    Attributes:
        fingerprint: hash of (document, question, config); resuming checks it.
        n_chunks: chunks in the document.
        memory: memory after ``len(trace)`` chunks.
        trace: one :class:`MemoryStep` per finished chunk.
    """

    fingerprint: str
    n_chunks: int
    memory: str
    trace: list[MemoryStep] = field(default_factory=list)

    @property
    def next_chunk(self) -> int:
        """Index of the first chunk not yet read."""
        return len(self.trace)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the checkpoint atomically (temp file in the same folder, then rename)."""
        data = {
            "version": CHECKPOINT_VERSION,
            "fingerprint": self.fingerprint,
            "n_chunks": self.n_chunks,
            "memory": self.memory,
            "trace": [asdict(s) for s in self.trace],
        }
        atomic_write_json(path, data)

    @classmethod
    def load(cls, path: str | os.PathLike[str], fingerprint: str) -> Checkpoint | None:
        """Read a checkpoint; ``None`` if the file does not exist.

        Raises:
            CheckpointError: unreadable file, or it belongs to another document, question
                or configuration.
        """
        p = pathlib.Path(path)
        if not p.exists():
            return None
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
            if data.get("version") != CHECKPOINT_VERSION:
                raise CheckpointError(
                    f"checkpoint {p} has version {data.get('version')!r}, "
                    f"expected {CHECKPOINT_VERSION}"
                )
            ckpt = cls(
                fingerprint=str(data["fingerprint"]),
                n_chunks=int(data["n_chunks"]),
                memory=str(data["memory"]),
                trace=[MemoryStep(**s) for s in data["trace"]],
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"cannot read checkpoint {p}: {exc}") from exc
        if ckpt.fingerprint != fingerprint:
            raise CheckpointError(
                f"checkpoint {p} belongs to a different document, question or configuration; "
                "delete it or choose another checkpoint path"
            )
        return ckpt


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write ``data`` as JSON to ``path`` so readers never see a partial file."""
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}-", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
