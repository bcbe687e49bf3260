"""Episodes with subtask annotations in a LeRobot-style on-disk layout (parquet + jsonl).

Layout (the LeRobot v2.1 dataset layout, images stored inline)::

    root/
      meta/info.json          fps, features (dtype, shape), counts, data_path pattern
      meta/tasks.jsonl        {"task_index", "task"} per task
      meta/subtasks.json      {task: [ordered subtask names]}  (the stage vocabulary)
      meta/episodes.jsonl     {"episode_index", "tasks", "length", "subtask_names",
                               "subtask_start_frames", "subtask_end_frames", ...extra}
      data/chunk-000/episode_000000.parquet
                              one row per frame: the features plus "timestamp",
                              "frame_index", "episode_index", "index", "task_index"

Subtask spans are half-open frame ranges ``[start, end)``. LeRobot stores camera frames
as mp4 videos; here ``observation.image`` is an inline ``uint8`` array per frame (its
shape in ``info.json``), which keeps the format dependency-free for small images.

Example:
    >>> import numpy as np, tempfile
    >>> from lc_robotics_reward.labels import SubtaskSpan
    >>> ep = Episode(0, "stack", {"action": np.zeros((4, 2), np.float32)},
    ...              [SubtaskSpan("a", 0, 1), SubtaskSpan("b", 1, 4)])
    >>> ds = RobotDataset([ep], fps=10, subtasks={"stack": ["a", "b"]})
    >>> root = tempfile.mkdtemp()
    >>> ds.write(root)
    >>> RobotDataset.read(root).episodes[0].subtasks[1]
    SubtaskSpan(name='b', start=1, end=4)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lc_robotics_reward.errors import AnnotationError, DatasetFormatError
from lc_robotics_reward.labels import SubtaskSpan, temporal_proportions, validate_spans

CODEBASE_VERSION = "v2.1"
CHUNK_SIZE = 1000
DATA_PATH = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
_RESERVED = ("timestamp", "frame_index", "episode_index", "index", "task_index")


@dataclass
class Episode:
    """One episode: its task text, per-frame arrays and subtask annotations.

    Attributes:
        index: episode index in the dataset.
        task: the natural-language task instruction.
        frames: feature name -> array ``[T, ...]`` (every array has the same ``T``).
        subtasks: consecutive annotated spans covering ``0..T-1``.
        meta: extra JSON-serialisable metadata stored in ``episodes.jsonl``.
    """

    index: int
    task: str
    frames: dict[str, np.ndarray]
    subtasks: list[SubtaskSpan]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def length(self) -> int:
        if not self.frames:
            raise DatasetFormatError(f"episode {self.index} has no frame arrays")
        return int(next(iter(self.frames.values())).shape[0])


class RobotDataset:
    """A list of annotated episodes, the task -> subtask vocabulary and the frame rate.

    Construction validates every episode (matching frame counts, known task, annotations
    that tile the episode) and raises naming the episode.
    """

    def __init__(
        self,
        episodes: Sequence[Episode],
        fps: float,
        subtasks: Mapping[str, Sequence[str]],
    ) -> None:
        if fps <= 0:
            raise ValueError(f"fps={fps}; allowed: > 0")
        self.episodes = list(episodes)
        self.fps = float(fps)
        self.subtasks = {task: list(names) for task, names in subtasks.items()}
        if not self.episodes:
            raise DatasetFormatError("a dataset needs at least one episode")
        keys = set(self.episodes[0].frames)
        for ep in self.episodes:
            if set(ep.frames) != keys:
                raise DatasetFormatError(
                    f"episode {ep.index}: features {sorted(ep.frames)} differ from {sorted(keys)}"
                )
            bad = [k for k in ep.frames if k in _RESERVED]
            if bad:
                raise DatasetFormatError(f"episode {ep.index}: reserved feature names {bad}")
            lengths = {k: v.shape[0] for k, v in ep.frames.items()}
            if len(set(lengths.values())) != 1:
                raise DatasetFormatError(f"episode {ep.index}: frame counts differ: {lengths}")
            if ep.task not in self.subtasks:
                raise AnnotationError(
                    f"episode {ep.index}: unknown task {ep.task!r}; known: {list(self.subtasks)}"
                )
            validate_spans(ep.subtasks, ep.length, self.subtasks[ep.task], episode=ep.index)

    @property
    def tasks(self) -> list[str]:
        return list(self.subtasks)

    def temporal_proportions(self, task: str) -> np.ndarray:
        """``alpha [K]`` of ``task`` over this dataset's episodes of that task."""
        if task not in self.subtasks:
            raise AnnotationError(f"unknown task {task!r}; known: {list(self.subtasks)}")
        eps = [(ep.subtasks, ep.length) for ep in self.episodes if ep.task == task]
        if not eps:
            raise AnnotationError(f"no episode of task {task!r}")
        return temporal_proportions(eps, self.subtasks[task])

    # ------------------------------------------------------------------ writing
    def write(self, root: str | Path) -> None:
        """Write the dataset under ``root`` (created; existing files are overwritten)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        root = Path(root)
        (root / "meta").mkdir(parents=True, exist_ok=True)
        task_index = {task: i for i, task in enumerate(self.subtasks)}
        first = self.episodes[0]
        features = {
            name: {"dtype": str(arr.dtype), "shape": list(arr.shape[1:])}
            for name, arr in first.frames.items()
        }
        total = 0
        episode_rows = []
        for ep in self.episodes:
            n = ep.length
            columns: dict[str, pa.Array] = {}
            for name, arr in ep.frames.items():
                columns[name] = _to_arrow(np.ascontiguousarray(arr))
            columns["timestamp"] = pa.array(np.arange(n, dtype=np.float32) / self.fps)
            columns["frame_index"] = pa.array(np.arange(n, dtype=np.int64))
            columns["episode_index"] = pa.array(np.full(n, ep.index, dtype=np.int64))
            columns["index"] = pa.array(np.arange(total, total + n, dtype=np.int64))
            columns["task_index"] = pa.array(np.full(n, task_index[ep.task], dtype=np.int64))
            path = root / DATA_PATH.format(
                episode_chunk=ep.index // CHUNK_SIZE, episode_index=ep.index
            )
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table(columns), path)
            total += n
            episode_rows.append(
                {
                    "episode_index": ep.index,
                    "tasks": [ep.task],
                    "length": n,
                    "subtask_names": [s.name for s in ep.subtasks],
                    "subtask_start_frames": [s.start for s in ep.subtasks],
                    "subtask_end_frames": [s.end for s in ep.subtasks],
                    **ep.meta,
                }
            )
        info = {
            "codebase_version": CODEBASE_VERSION,
            "fps": self.fps,
            "total_episodes": len(self.episodes),
            "total_frames": total,
            "total_tasks": len(self.subtasks),
            "chunks_size": CHUNK_SIZE,
            "data_path": DATA_PATH,
            "features": features,
        }
        (root / "meta" / "info.json").write_text(json.dumps(info, indent=2))
        (root / "meta" / "subtasks.json").write_text(json.dumps(self.subtasks, indent=2))
        _write_jsonl(
            root / "meta" / "tasks.jsonl",
            [{"task_index": i, "task": t} for t, i in task_index.items()],
        )
        _write_jsonl(root / "meta" / "episodes.jsonl", episode_rows)

    # ------------------------------------------------------------------ reading
    @classmethod
    def read(cls, root: str | Path) -> RobotDataset:
        """Read a dataset written by :meth:`write` (or laid out the same way)."""
        import pyarrow.parquet as pq

        root = Path(root)
        try:
            info = json.loads((root / "meta" / "info.json").read_text())
            subtasks = json.loads((root / "meta" / "subtasks.json").read_text())
            tasks = {
                row["task_index"]: row["task"] for row in _read_jsonl(root / "meta" / "tasks.jsonl")
            }
            rows = _read_jsonl(root / "meta" / "episodes.jsonl")
        except (OSError, json.JSONDecodeError, KeyError) as exc:
            raise DatasetFormatError(f"{root}: missing or malformed metadata ({exc})") from exc
        features = info["features"]
        episodes = []
        for row in rows:
            idx = int(row["episode_index"])
            path = root / info["data_path"].format(
                episode_chunk=idx // info["chunks_size"], episode_index=idx
            )
            if not path.exists():
                raise DatasetFormatError(f"episode {idx}: data file {path} is missing")
            table = pq.read_table(path)
            frames = {}
            for name, spec in features.items():
                if name not in table.column_names:
                    raise DatasetFormatError(f"episode {idx}: column {name!r} is missing")
                frames[name] = _from_arrow(table.column(name), spec, len(table))
            task_ids = set(table.column("task_index").to_pylist())
            if len(task_ids) != 1 or next(iter(task_ids)) not in tasks:
                raise DatasetFormatError(f"episode {idx}: bad task_index values {sorted(task_ids)}")
            names = row["subtask_names"]
            starts = row["subtask_start_frames"]
            ends = row["subtask_end_frames"]
            if not len(names) == len(starts) == len(ends):
                raise AnnotationError(
                    f"episode {idx}: subtask name/start/end lists differ in length"
                )
            spans = [
                SubtaskSpan(n, int(s), int(e)) for n, s, e in zip(names, starts, ends, strict=True)
            ]
            reserved = {
                "episode_index",
                "tasks",
                "length",
                "subtask_names",
                "subtask_start_frames",
                "subtask_end_frames",
            }
            meta = {k: v for k, v in row.items() if k not in reserved}
            episodes.append(Episode(idx, tasks[next(iter(task_ids))], frames, spans, meta))
        return cls(episodes, fps=float(info["fps"]), subtasks=subtasks)


def _to_arrow(arr: np.ndarray) -> Any:
    import pyarrow as pa

    if arr.ndim == 1:
        return pa.array(arr)
    width = int(np.prod(arr.shape[1:]))
    return pa.FixedSizeListArray.from_arrays(pa.array(arr.reshape(-1)), width)


def _from_arrow(column: Any, spec: Mapping[str, Any], n: int) -> np.ndarray:
    dtype = np.dtype(spec["dtype"])
    shape = tuple(spec["shape"])
    if not shape:
        return column.to_numpy().astype(dtype)
    flat = np.concatenate([chunk.values.to_numpy(zero_copy_only=False) for chunk in column.chunks])
    return flat.astype(dtype).reshape((n, *shape))


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
