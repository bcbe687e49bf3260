"""Annotated episodes read from and written to LeRobot datasets (v2.1 and v3.0 layouts).

v2.1 layout::

    root/meta/info.json               codebase_version "v2.1", fps, features, path patterns
    root/meta/tasks.jsonl             {"task_index", "task"} per task
    root/meta/episodes.jsonl          {"episode_index", "tasks", "length", ...} per episode
    root/meta/episodes_stats.jsonl    per-episode feature statistics
    root/data/chunk-000/episode_000000.parquet
    root/videos/chunk-000/<camera>/episode_000000.mp4

v3.0 layout::

    root/meta/info.json               codebase_version "v3.0"
    root/meta/tasks.parquet           columns task, task_index
    root/meta/episodes/chunk-000/file-000.parquet
                                      one row per episode: episode_index, tasks, length,
                                      data/chunk_index, data/file_index, dataset_from_index,
                                      dataset_to_index, videos/<camera>/{chunk_index,
                                      file_index, from_timestamp, to_timestamp}, ...
    root/data/chunk-000/file-000.parquet        many episodes per file
    root/videos/<camera>/chunk-000/file-000.mp4 many episodes back to back

Conventions followed (those of LeRobot): every data file has the columns ``timestamp``,
``frame_index``, ``episode_index``, ``index`` and ``task_index``, all declared in
``info.json`` with shape ``[1]``; a feature of shape ``[1]`` is a scalar column (read
back as an array ``[T]``), any other shape a fixed-size list column; a feature of dtype
``video`` lives in mp4 files (decoded with PyAV, the ``video`` extra) and is read back
as ``uint8 [T, H, W, 3]``.

Subtask annotations are the episode metadata columns that LeRobot's SARM annotation
tool writes: ``sparse_subtask_names``, ``sparse_subtask_start_frames``,
``sparse_subtask_end_frames`` (and ``..._start_times``/``..._end_times`` in seconds;
``dense_`` for the dense scheme; unprefixed ``subtask_*`` as the legacy form of the
sparse one). End frames are **inclusive**. In memory a :class:`SubtaskSpan` is half-open
(``end`` exclusive), so the reader adds one and the writer subtracts one. Reading also
accepts what LeRobot's annotator produces from second-resolution timestamps and
resolves it as LeRobot's label lookup does: a frame claimed by two consecutive subtasks
(``end_k == start_{k+1}``) belongs to the earlier one; frames before the first subtask
join it, frames after the last one join the last, and frames in a gap between two
subtasks extend the earlier one (LeRobot holds tau at 1 there; here tau keeps growing
through the gap). Deeper overlaps, unknown names and empty subtasks raise
:class:`AnnotationError` naming the episode.

A task's ordered subtask list (its stages) is the order of
``meta/temporal_proportions_<scheme>.json`` (LeRobot's global subtask list) where that
file exists, else the order in which names first appear in the task's episodes. Episodes
of a task with no annotation at all get one subtask ``"task"`` (LeRobot's single-stage
mode). Datasets written by earlier versions of this package (``meta/subtasks.json``,
exclusive end frames in ``episodes.jsonl``) are still read.

Example:
    >>> import numpy as np, tempfile
    >>> from lc_robotics_reward.labels import SubtaskSpan
    >>> ep = Episode(0, "stack", {"action": np.zeros((4, 2), np.float32)},
    ...              [SubtaskSpan("a", 0, 1), SubtaskSpan("b", 1, 4)])
    >>> ds = RobotDataset([ep], fps=10, subtasks={"stack": ["a", "b"]})
    >>> root = tempfile.mkdtemp()
    >>> ds.write(root, version="v3.0")
    >>> RobotDataset.read(root).episodes[0].subtasks[1]
    SubtaskSpan(name='b', start=1, end=4)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lc_robotics_reward.errors import AnnotationError, DatasetFormatError
from lc_robotics_reward.labels import SubtaskSpan, temporal_proportions, validate_spans

VERSIONS = ("v2.1", "v3.0")
CODEBASE_VERSION = "v3.0"
CHUNK_SIZE = 1000
DATA_PATH_V21 = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
VIDEO_PATH_V21 = "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4"
DATA_PATH_V30 = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH_V30 = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH_V30 = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
DATA_PATH = DATA_PATH_V21  # the layout written by earlier versions of this package
SINGLE_STAGE = "task"
_RESERVED = ("timestamp", "frame_index", "episode_index", "index", "task_index")
_ANNOTATION_SUFFIXES = (
    "subtask_names",
    "subtask_start_times",
    "subtask_end_times",
    "subtask_start_frames",
    "subtask_end_frames",
)


@dataclass
class Episode:
    """One episode: its task text, per-frame arrays and subtask annotations.

    Attributes:
        index: episode index in the dataset.
        task: the natural-language task instruction.
        frames: feature name -> array ``[T, ...]`` (every array has the same ``T``;
            camera frames ``uint8 [T, H, W, 3]``).
        subtasks: consecutive annotated spans (half-open) covering ``0..T-1``.
        meta: extra JSON-serialisable metadata stored with the episode's metadata.
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
    that tile the episode, finite values in every floating-point feature) and raises
    naming the episode.
    """

    def __init__(
        self,
        episodes: Sequence[Episode],
        fps: float,
        subtasks: Mapping[str, Sequence[str]],
    ) -> None:
        if not fps > 0:
            raise ValueError(f"fps={fps}; allowed: > 0")
        self.episodes = list(episodes)
        self.fps = float(fps)
        self.subtasks = {task: list(names) for task, names in subtasks.items()}
        if not self.episodes:
            raise DatasetFormatError("a dataset needs at least one episode")
        keys = set(self.episodes[0].frames)
        indices = [ep.index for ep in self.episodes]
        if len(set(indices)) != len(indices):
            raise DatasetFormatError(f"episode indices repeat: {sorted(indices)}")
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
            for name, arr in ep.frames.items():
                check_finite(arr, f"episode {ep.index}: feature {name!r}")
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
    def write(
        self,
        root: str | Path,
        version: str = "v2.1",
        video_keys: Iterable[str] = (),
        codec: str | None = None,
        pix_fmt: str | None = None,
    ) -> None:
        """Write the dataset under ``root`` in LeRobot's ``version`` layout.

        Args:
            root: dataset folder (created; existing files are overwritten).
            version: ``"v2.1"`` (one parquet and one mp4 per episode) or ``"v3.0"``
                (episodes concatenated in one data file and one video per camera).
            video_keys: features (``uint8 [T, H, W, 3]``) stored as mp4 videos with dtype
                ``video`` (needs the ``video`` extra); other image-like arrays are
                stored inline as fixed-size lists, which LeRobot reads as plain arrays.
            codec: video encoder (default: that of :mod:`lc_robotics_reward.video`).
            pix_fmt: video pixel format (default: that of :mod:`lc_robotics_reward.video`).

        Subtask spans are written as LeRobot's ``sparse_subtask_*`` episode columns
        (inclusive end frames) and ``meta/temporal_proportions_sparse.json``.
        """
        if version not in VERSIONS:
            raise ValueError(f"version={version!r}; allowed: {VERSIONS}")
        video_keys = list(video_keys)
        first = self.episodes[0]
        for key in video_keys:
            arr = first.frames.get(key)
            if arr is None or arr.dtype != np.uint8 or arr.ndim != 4 or arr.shape[3] != 3:
                raise ValueError(
                    f"video key {key!r} must name a uint8 [T, H, W, 3] feature; "
                    f"features: {sorted(first.frames)}"
                )
        root = Path(root)
        (root / "meta").mkdir(parents=True, exist_ok=True)
        if version == "v2.1":
            self._write_v21(root, video_keys, codec, pix_fmt)
        else:
            self._write_v30(root, video_keys, codec, pix_fmt)
        vocabulary = list(dict.fromkeys(n for names in self.subtasks.values() for n in names))
        (root / "meta" / "temporal_proportions_sparse.json").write_text(
            json.dumps(self._global_proportions(vocabulary), indent=2)
        )

    def _features(self, video_keys: Sequence[str], video_info: Mapping[str, Any]) -> dict:
        features: dict[str, Any] = {}
        for name, arr in self.episodes[0].frames.items():
            if name in video_keys:
                features[name] = {
                    "dtype": "video",
                    "shape": list(arr.shape[1:]),
                    "names": ["height", "width", "channels"],
                    "info": video_info[name],
                }
            else:
                shape = list(arr.shape[1:]) or [1]
                features[name] = {"dtype": str(arr.dtype), "shape": shape, "names": None}
        features["timestamp"] = {"dtype": "float32", "shape": [1], "names": None}
        for name in ("frame_index", "episode_index", "index", "task_index"):
            features[name] = {"dtype": "int64", "shape": [1], "names": None}
        return features

    def _info(self, version: str, features: dict, video_keys: Sequence[str]) -> dict:
        total = sum(ep.length for ep in self.episodes)
        fps: float | int = int(self.fps) if float(self.fps).is_integer() else self.fps
        info: dict[str, Any] = {
            "codebase_version": version,
            "robot_type": None,
            "total_episodes": len(self.episodes),
            "total_frames": total,
            "total_tasks": len(self.subtasks),
            "chunks_size": CHUNK_SIZE,
            "fps": fps,
            "splits": {"train": f"0:{len(self.episodes)}"},
        }
        if version == "v2.1":
            info["total_videos"] = len(video_keys) * len(self.episodes)
            info["total_chunks"] = max(ep.index for ep in self.episodes) // CHUNK_SIZE + 1
            info["data_path"] = DATA_PATH_V21
            info["video_path"] = VIDEO_PATH_V21 if video_keys else None
        else:
            info["data_files_size_in_mb"] = 100
            info["video_files_size_in_mb"] = 200
            info["data_path"] = DATA_PATH_V30
            info["video_path"] = VIDEO_PATH_V30 if video_keys else None
        info["features"] = features
        return info

    def _frame_table(self, ep: Episode, offset: int, task_index: int, skip: Sequence[str]) -> Any:
        import pyarrow as pa

        n = ep.length
        columns: dict[str, Any] = {}
        for name, arr in ep.frames.items():
            if name not in skip:
                columns[name] = _to_arrow(np.ascontiguousarray(arr))
        columns["timestamp"] = pa.array(np.arange(n, dtype=np.float32) / np.float32(self.fps))
        columns["frame_index"] = pa.array(np.arange(n, dtype=np.int64))
        columns["episode_index"] = pa.array(np.full(n, ep.index, dtype=np.int64))
        columns["index"] = pa.array(np.arange(offset, offset + n, dtype=np.int64))
        columns["task_index"] = pa.array(np.full(n, task_index, dtype=np.int64))
        return pa.table(columns)

    def _annotation_columns(self, ep: Episode) -> dict[str, list]:
        return {
            "sparse_subtask_names": [s.name for s in ep.subtasks],
            "sparse_subtask_start_times": [s.start / self.fps for s in ep.subtasks],
            "sparse_subtask_end_times": [(s.end - 1) / self.fps for s in ep.subtasks],
            "sparse_subtask_start_frames": [s.start for s in ep.subtasks],
            "sparse_subtask_end_frames": [s.end - 1 for s in ep.subtasks],
        }

    def _write_v21(
        self, root: Path, video_keys: Sequence[str], codec: str | None, pix_fmt: str | None
    ) -> None:
        import pyarrow.parquet as pq

        task_index = {task: i for i, task in enumerate(self.subtasks)}
        video_info: dict[str, Any] = {}
        total = 0
        rows, stats_rows = [], []
        for ep in self.episodes:
            chunk = ep.index // CHUNK_SIZE
            path = root / DATA_PATH_V21.format(episode_chunk=chunk, episode_index=ep.index)
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(self._frame_table(ep, total, task_index[ep.task], video_keys), path)
            for key in video_keys:
                video = root / VIDEO_PATH_V21.format(
                    episode_chunk=chunk, video_key=key, episode_index=ep.index
                )
                video_info[key] = _encode(video, [ep.frames[key]], self.fps, codec, pix_fmt)
            total += ep.length
            rows.append(
                {
                    "episode_index": ep.index,
                    "tasks": [ep.task],
                    "length": ep.length,
                    **self._annotation_columns(ep),
                    **ep.meta,
                }
            )
            stats_rows.append(
                {
                    "episode_index": ep.index,
                    "stats": _episode_stats(ep.frames, video_keys, self.fps),
                }
            )
        info = self._info("v2.1", self._features(video_keys, video_info), video_keys)
        (root / "meta" / "info.json").write_text(json.dumps(info, indent=4))
        _write_jsonl(
            root / "meta" / "tasks.jsonl",
            [{"task_index": i, "task": t} for t, i in task_index.items()],
        )
        _write_jsonl(root / "meta" / "episodes.jsonl", rows)
        _write_jsonl(root / "meta" / "episodes_stats.jsonl", stats_rows)

    def _write_v30(
        self, root: Path, video_keys: Sequence[str], codec: str | None, pix_fmt: str | None
    ) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        task_index = {task: i for i, task in enumerate(self.subtasks)}
        first = self.episodes[0]
        tables, rows = [], []
        total = 0
        for ep in self.episodes:
            tables.append(self._frame_table(ep, total, task_index[ep.task], video_keys))
            row: dict[str, Any] = {
                "episode_index": ep.index,
                "tasks": [ep.task],
                "length": ep.length,
                "data/chunk_index": 0,
                "data/file_index": 0,
                "dataset_from_index": total,
                "dataset_to_index": total + ep.length,
            }
            for key in video_keys:
                row[f"videos/{key}/chunk_index"] = 0
                row[f"videos/{key}/file_index"] = 0
                row[f"videos/{key}/from_timestamp"] = total / self.fps
                row[f"videos/{key}/to_timestamp"] = (total + ep.length) / self.fps
            row["meta/episodes/chunk_index"] = 0
            row["meta/episodes/file_index"] = 0
            row.update(self._annotation_columns(ep))
            row.update(ep.meta)
            rows.append(row)
            total += ep.length
        path = root / DATA_PATH_V30.format(chunk_index=0, file_index=0)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.concat_tables(tables), path)
        video_info = {
            key: _encode(
                root / VIDEO_PATH_V30.format(video_key=key, chunk_index=0, file_index=0),
                [ep.frames[key] for ep in self.episodes],
                self.fps,
                codec,
                pix_fmt,
            )
            for key in video_keys
        }
        episodes_path = root / EPISODES_PATH_V30.format(chunk_index=0, file_index=0)
        episodes_path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), episodes_path)
        pq.write_table(
            pa.table(
                {
                    "task_index": pa.array(list(task_index.values()), pa.int64()),
                    "task": pa.array(list(task_index)),
                }
            ),
            root / "meta" / "tasks.parquet",
        )
        info = self._info("v3.0", self._features(video_keys, video_info), video_keys)
        (root / "meta" / "info.json").write_text(json.dumps(info, indent=4))
        every = {k: np.concatenate([e.frames[k] for e in self.episodes]) for k in first.frames}
        stats = _episode_stats(every, video_keys, self.fps)
        (root / "meta" / "stats.json").write_text(json.dumps(stats, indent=4))

    def _global_proportions(self, vocabulary: Sequence[str]) -> dict[str, float]:
        share: dict[str, list[float]] = {name: [] for name in vocabulary}
        for ep in self.episodes:
            per: dict[str, float] = {}
            for s in ep.subtasks:
                per[s.name] = per.get(s.name, 0.0) + (s.end - s.start) / ep.length
            for name, value in per.items():
                share[name].append(value)
        means = {name: float(np.mean(v)) if v else 0.0 for name, v in share.items()}
        total = sum(means.values()) or 1.0
        return {name: value / total for name, value in means.items()}

    # ------------------------------------------------------------------ reading
    @classmethod
    def read(
        cls,
        root: str | Path,
        annotations: str = "sparse",
        video_tolerance_s: float | None = None,
    ) -> RobotDataset:
        """Read a LeRobot dataset (v2.1 or v3.0 layout) with its subtask annotations.

        Args:
            root: the dataset folder.
            annotations: ``"sparse"`` or ``"dense"``: which of LeRobot's annotation
                schemes becomes :attr:`Episode.subtasks`.
            video_tolerance_s: how far a decoded video frame may lie from the frame's
                timestamp (default: half a frame interval).

        Raises:
            DatasetFormatError: missing or malformed metadata or files, or non-finite
                values, naming the episode and file.
            AnnotationError: annotations that cannot be turned into consecutive spans.
        """
        if annotations not in ("sparse", "dense"):
            raise ValueError(f"annotations={annotations!r}; allowed: 'sparse', 'dense'")
        root = Path(root)
        try:
            info = json.loads((root / "meta" / "info.json").read_text())
            features = info["features"]
            fps = float(info["fps"])
        except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise DatasetFormatError(f"{root}: missing or malformed metadata ({exc!r})") from exc
        version = str(info.get("codebase_version", "v2.1"))
        if version.startswith("v3"):
            raw = _read_v30(root, info, features, video_tolerance_s)
        elif version.startswith("v2"):
            raw = _read_v21(root, info, features, video_tolerance_s)
        else:
            raise DatasetFormatError(
                f"{root}: codebase_version {version!r} is not supported; allowed: v2.x, v3.x"
            )
        return _assemble(root, raw, fps, annotations)


# ---------------------------------------------------------------------- reading helpers
@dataclass
class _RawEpisode:
    index: int
    task: str
    frames: dict[str, np.ndarray]
    row: dict[str, Any]


def _read_v21(
    root: Path, info: Mapping[str, Any], features: Mapping[str, Any], tol: float | None
) -> list[_RawEpisode]:
    import pyarrow.parquet as pq

    try:
        tasks = {
            int(row["task_index"]): str(row["task"])
            for row in _read_jsonl(root / "meta" / "tasks.jsonl")
        }
        rows = _read_jsonl(root / "meta" / "episodes.jsonl")
        data_path = str(info["data_path"])
        chunks = int(info.get("chunks_size", CHUNK_SIZE))
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DatasetFormatError(f"{root}: missing or malformed metadata ({exc!r})") from exc
    video_path = info.get("video_path") or VIDEO_PATH_V21
    out = []
    for row in rows:
        idx = int(row["episode_index"])
        chunk = idx // chunks
        path = root / data_path.format(episode_chunk=chunk, episode_index=idx)
        if not path.exists():
            raise DatasetFormatError(f"episode {idx}: data file {path} is missing")
        table = pq.read_table(path)
        frames = _frames_from_table(table, features, idx, path)
        timestamps = _timestamps(table, idx, path)
        for key, spec in features.items():
            if spec.get("dtype") == "video":
                video = root / video_path.format(
                    episode_chunk=chunk, video_key=key, episode_index=idx
                )
                frames[key] = _decode(video, timestamps, tol, idx, key)
        task = _task_of(table, tasks, row, idx)
        out.append(_RawEpisode(idx, task, frames, row))
    return out


def _read_v30(
    root: Path, info: Mapping[str, Any], features: Mapping[str, Any], tol: float | None
) -> list[_RawEpisode]:
    import pyarrow.parquet as pq

    try:
        task_table = pq.read_table(root / "meta" / "tasks.parquet")
        names = task_table.column_names
        text_col = "task" if "task" in names else "__index_level_0__"
        tasks = dict(
            zip(
                task_table.column("task_index").to_pylist(),
                task_table.column(text_col).to_pylist(),
                strict=True,
            )
        )
        episode_files = sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
        if not episode_files:
            raise FileNotFoundError(f"{root / 'meta' / 'episodes'} holds no parquet file")
        rows = [r for f in episode_files for r in pq.read_table(f).to_pylist()]
        data_path = str(info["data_path"])
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise DatasetFormatError(f"{root}: missing or malformed metadata ({exc!r})") from exc
    video_path = info.get("video_path") or VIDEO_PATH_V30
    rows.sort(key=lambda r: int(r["episode_index"]))
    cache: dict[Path, Any] = {}
    out = []
    for row in rows:
        idx = int(row["episode_index"])
        try:
            path = root / data_path.format(
                chunk_index=int(row["data/chunk_index"]), file_index=int(row["data/file_index"])
            )
        except KeyError as exc:
            raise DatasetFormatError(f"episode {idx}: metadata lacks {exc}") from exc
        if path not in cache:
            if not path.exists():
                raise DatasetFormatError(f"episode {idx}: data file {path} is missing")
            cache[path] = pq.read_table(path)
        table = cache[path]
        ep_col = table.column("episode_index").to_numpy()
        rows_of_ep = np.nonzero(ep_col == idx)[0]
        if rows_of_ep.size == 0:
            raise DatasetFormatError(f"episode {idx}: no row in data file {path}")
        table = table.take(rows_of_ep)
        order = np.argsort(table.column("frame_index").to_numpy(), kind="stable")
        table = table.take(order)
        frames = _frames_from_table(table, features, idx, path)
        timestamps = _timestamps(table, idx, path)
        for key, spec in features.items():
            if spec.get("dtype") != "video":
                continue
            prefix = f"videos/{key}/"
            try:
                video = root / video_path.format(
                    video_key=key,
                    chunk_index=int(row[prefix + "chunk_index"]),
                    file_index=int(row[prefix + "file_index"]),
                )
                start = float(row[prefix + "from_timestamp"])
            except (KeyError, TypeError) as exc:
                raise DatasetFormatError(
                    f"episode {idx}: metadata of video {key!r} lacks {exc}"
                ) from exc
            frames[key] = _decode(video, start + timestamps, tol, idx, key)
        out.append(_RawEpisode(idx, _task_of(table, tasks, row, idx), frames, row))
    return out


def _timestamps(table: Any, idx: int, path: Path) -> np.ndarray:
    if "timestamp" not in table.column_names:
        raise DatasetFormatError(f"episode {idx}: column 'timestamp' is missing in {path}")
    ts = _flat(table.column("timestamp")).astype(np.float64)
    if not np.isfinite(ts).all():
        raise DatasetFormatError(f"episode {idx}: non-finite timestamps in {path}")
    return ts


def _task_of(table: Any, tasks: Mapping[int, str], row: Mapping[str, Any], idx: int) -> str:
    if "task_index" in table.column_names:
        ids = set(_flat(table.column("task_index")).astype(int).tolist())
        if len(ids) != 1 or next(iter(ids)) not in tasks:
            raise DatasetFormatError(f"episode {idx}: bad task_index values {sorted(ids)}")
        return tasks[next(iter(ids))]
    listed = row.get("tasks") or []
    if not listed:
        raise DatasetFormatError(f"episode {idx}: neither task_index nor tasks is given")
    return str(listed[0])


def _frames_from_table(
    table: Any, features: Mapping[str, Any], idx: int, path: Path
) -> dict[str, np.ndarray]:
    frames = {}
    for name, spec in features.items():
        if name in _RESERVED or spec.get("dtype") == "video":
            continue
        if spec.get("dtype") == "image":
            raise DatasetFormatError(
                f"episode {idx}: feature {name!r} has dtype 'image' (PNG frames), which this "
                "reader does not decode; store cameras as 'video' features"
            )
        if name not in table.column_names:
            raise DatasetFormatError(f"episode {idx}: column {name!r} is missing in {path}")
        frames[name] = _from_arrow(table.column(name), spec, len(table), f"episode {idx}")
    return frames


def _decode(
    video: Path, timestamps: np.ndarray, tol: float | None, idx: int, key: str
) -> np.ndarray:
    from lc_robotics_reward.video import decode_video

    try:
        return decode_video(video, timestamps, tol)
    except DatasetFormatError as exc:
        raise DatasetFormatError(f"episode {idx}: camera {key!r}: {exc}") from exc


def _assemble(root: Path, raw: list[_RawEpisode], fps: float, scheme: str) -> RobotDataset:
    legacy = root / "meta" / "subtasks.json"
    legacy_vocab: dict[str, list[str]] | None = None
    if legacy.exists():  # written by lc-robotics-reward < 0.5: exclusive end frames
        try:
            legacy_vocab = json.loads(legacy.read_text())
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(f"{legacy}: malformed ({exc})") from exc
    order: list[str] = []
    props = root / "meta" / f"temporal_proportions_{scheme}.json"
    if props.exists():
        try:
            order = list(json.loads(props.read_text()))
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(f"{props}: malformed ({exc})") from exc

    parsed: list[tuple[_RawEpisode, list[tuple[str, int, int]] | None]] = []
    for ep in raw:
        parsed.append((ep, _annotation_of(ep.row, scheme, ep.index, legacy_vocab is not None)))
    if legacy_vocab is not None:
        vocab = {task: list(names) for task, names in legacy_vocab.items()}
    else:
        vocab = {}
        for ep, ann in parsed:
            names = vocab.setdefault(ep.task, [])
            for name, _, _ in ann or []:
                if name not in names:
                    names.append(name)
        rank = {n: i for i, n in enumerate(order)}
        for task, names in vocab.items():
            seen = list(names)
            vocab[task] = sorted(seen, key=lambda n: (rank.get(n, len(rank)), seen.index(n)))
    episodes = []
    reserved = {"episode_index", "tasks", "length", "dataset_from_index", "dataset_to_index"}
    for ep, ann in parsed:
        length = next(iter(ep.frames.values())).shape[0] if ep.frames else int(ep.row["length"])
        if ann is None:
            annotated = [e.index for e, a in parsed if e.task == ep.task and a is not None]
            if annotated:
                raise AnnotationError(
                    f"episode {ep.index}: no {scheme} subtask annotation, while episodes "
                    f"{annotated[:5]} of the same task {ep.task!r} have one"
                )
            vocab[ep.task] = [SINGLE_STAGE]
            spans = [SubtaskSpan(SINGLE_STAGE, 0, length)]
        else:
            spans = _normalise_spans(ann, length, ep.index, exclusive=legacy_vocab is not None)
        meta = {
            k: v
            for k, v in ep.row.items()
            if k not in reserved
            and not k.startswith(("data/", "videos/", "meta/", "stats/"))
            and not any(k.endswith(s) for s in _ANNOTATION_SUFFIXES)
        }
        episodes.append(Episode(ep.index, ep.task, ep.frames, spans, meta))
    return RobotDataset(episodes, fps=fps, subtasks=vocab)


def _annotation_of(
    row: Mapping[str, Any], scheme: str, idx: int, legacy: bool
) -> list[tuple[str, int, int]] | None:
    keys = [f"{scheme}_subtask_{k}" for k in ("names", "start_frames", "end_frames")]
    if keys[0] not in row and scheme == "sparse":
        keys = ["subtask_names", "subtask_start_frames", "subtask_end_frames"]
    values = [row.get(k) for k in keys]
    if all(v is None for v in values):
        return None
    if any(v is None for v in values):
        raise AnnotationError(f"episode {idx}: annotation columns {keys} are incomplete")
    names, starts, ends = (list(v or ()) for v in values)
    if not len(names) == len(starts) == len(ends):
        raise AnnotationError(f"episode {idx}: subtask name/start/end lists differ in length")
    if not names:
        return None
    return [(str(n), int(s), int(e)) for n, s, e in zip(names, starts, ends, strict=True)]


def _normalise_spans(
    ann: list[tuple[str, int, int]], length: int, idx: int, exclusive: bool
) -> list[SubtaskSpan]:
    if exclusive:  # this package's earlier format: already half-open and tiling
        return [SubtaskSpan(n, s, e) for n, s, e in ann]
    spans: list[SubtaskSpan] = []
    for k, (name, start, end_inclusive) in enumerate(ann):
        end = end_inclusive + 1
        if k == 0:
            start = 0  # frames before the first subtask join it
        else:
            prev = spans[-1]
            if start == prev.end - 1:  # the boundary frame is claimed twice: keep it earlier
                start = prev.end
            elif start < prev.end:
                raise AnnotationError(
                    f"episode {idx}: subtask {k} ({name!r}) starts at frame {start}, inside "
                    f"subtask {k - 1} ({prev.name!r}, frames {prev.start}..{prev.end - 1})"
                )
            elif start > prev.end:  # a gap: the previous subtask extends over it
                spans[-1] = SubtaskSpan(prev.name, prev.start, start)
        if k == len(ann) - 1:
            end = length  # frames after the last subtask join it
        if end > length and k < len(ann) - 1:
            raise AnnotationError(
                f"episode {idx}: subtask {k} ({name!r}) ends at frame {end - 1}, past the "
                f"episode's last frame {length - 1}"
            )
        if end <= start:
            raise AnnotationError(
                f"episode {idx}: subtask {k} ({name!r}) covers no frame (start {start}, "
                f"end {end - 1} inclusive)"
            )
        spans.append(SubtaskSpan(name, start, end))
    return spans


def check_finite(arr: np.ndarray, what: str) -> None:
    """Raise :class:`DatasetFormatError` if a floating-point ``arr`` holds NaN or inf.

    The message names ``what`` and the first offending frames (rows of ``arr``).
    """
    if not np.issubdtype(arr.dtype, np.floating) and not np.issubdtype(
        arr.dtype, np.complexfloating
    ):
        return
    bad = ~np.isfinite(arr)
    if bad.any():
        rows = np.nonzero(bad.reshape(arr.shape[0], -1).any(1))[0]
        raise DatasetFormatError(
            f"{what} has {int(bad.sum())} non-finite value(s) (NaN or inf) at frames "
            f"{rows[:5].tolist()}"
        )


def _encode(
    path: Path, episodes: list[np.ndarray], fps: float, codec: str | None, pix_fmt: str | None
) -> dict[str, Any]:
    from lc_robotics_reward import video

    return video.encode_video(
        path, episodes, fps, codec or video.DEFAULT_CODEC, pix_fmt or video.DEFAULT_PIX_FMT
    )


def _episode_stats(
    frames: Mapping[str, np.ndarray], video_keys: Sequence[str], fps: float
) -> dict[str, Any]:
    """LeRobot-style statistics (min, max, mean, std, count) of each feature."""
    stats: dict[str, Any] = {}
    arrays = dict(frames)
    n = next(iter(arrays.values())).shape[0]
    arrays["timestamp"] = np.arange(n, dtype=np.float64) / fps
    arrays["frame_index"] = np.arange(n)
    for name, arr in arrays.items():
        if name in video_keys:  # per channel over all pixels, in [0, 1], shape [3, 1, 1]
            x = arr.astype(np.float64).reshape(-1, 3) / 255.0
            reduce = {k: v[:, None, None] for k, v in _column_stats(x).items()}
        else:
            reduce = _column_stats(arr.astype(np.float64).reshape(n, -1))
        stats[name] = {k: v.tolist() for k, v in reduce.items()}
        stats[name]["count"] = [int(n)]
    return stats


def _column_stats(x: np.ndarray) -> dict[str, np.ndarray]:
    return {"min": x.min(0), "max": x.max(0), "mean": x.mean(0), "std": x.std(0)}


def _to_arrow(arr: np.ndarray) -> Any:
    import pyarrow as pa

    if arr.ndim == 1:
        return pa.array(arr)
    width = int(np.prod(arr.shape[1:]))
    return pa.FixedSizeListArray.from_arrays(pa.array(arr.reshape(-1)), width)


def _flat(column: Any) -> np.ndarray:
    """All leaf values of a (chunked, possibly nested list) arrow column, as numpy."""
    import pyarrow as pa

    values = []
    for chunk in column.chunks:
        while pa.types.is_list(chunk.type) or pa.types.is_fixed_size_list(chunk.type):
            chunk = chunk.flatten()
        values.append(chunk.to_numpy(zero_copy_only=False))
    return np.concatenate(values) if values else np.zeros(0)


def _from_arrow(column: Any, spec: Mapping[str, Any], n: int, what: str) -> np.ndarray:
    try:
        dtype = np.dtype(spec["dtype"])
    except TypeError as exc:
        raise DatasetFormatError(f"{what}: unknown dtype {spec.get('dtype')!r}") from exc
    shape = tuple(int(s) for s in spec.get("shape", ()))
    flat = _flat(column)
    per_frame = int(np.prod(shape)) if shape else 1
    if flat.size != n * per_frame:
        raise DatasetFormatError(
            f"{what}: column has {flat.size} values for {n} frames of shape {list(shape)}"
        )
    if shape in ((), (1,)):  # LeRobot's scalar features have shape [1]
        return flat.astype(dtype)
    return flat.astype(dtype).reshape((n, *shape))


def _write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
