"""LeRobot datasets (v2.1 and v3.0 layouts, videos, subtask annotation columns) in and out,
and bad input at the boundary.

The hand-built datasets below are laid out the way LeRobot writes them (reserved columns
declared with shape [1], scalar features as plain columns, cameras as mp4 videos of dtype
``video``, annotations as ``sparse_``/``dense_subtask_*`` episode columns with inclusive
end frames, no ``meta/subtasks.json``); the tests write them with pyarrow and PyAV
directly, not through :meth:`RobotDataset.write`.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lc_robotics_reward.dataset import Episode, RobotDataset
from lc_robotics_reward.errors import AnnotationError, DatasetFormatError
from lc_robotics_reward.labels import SubtaskSpan

SUBTASKS = {"put the cube away": ["reach", "carry"], "push it": ["push"]}
CAMERA = "observation.images.top"


def _episode(index: int, length: int, task: str = "put the cube away") -> Episode:
    rng = np.random.default_rng(index)
    spans = (
        [SubtaskSpan("reach", 0, length // 2), SubtaskSpan("carry", length // 2, length)]
        if task == "put the cube away"
        else [SubtaskSpan("push", 0, length)]
    )
    # smooth images: video codecs keep them (near) exactly
    ramp = np.linspace(0, 200, 5)[None, :, None] * np.ones((6, 1, 3))
    images = np.stack([np.roll(ramp, i + index, axis=1) for i in range(length)]).astype(np.uint8)
    return Episode(
        index=index,
        task=task,
        frames={
            CAMERA: images,
            "observation.state": rng.normal(size=(length, 3)).astype(np.float32),
            "action": rng.normal(size=(length, 2)).astype(np.float32),
            "behaviour": rng.integers(0, 5, size=length),
        },
        subtasks=spans,
        meta={"style": "good", "success": bool(index % 2)},
    )


def _dataset() -> RobotDataset:
    eps = [_episode(0, 7), _episode(1, 4, "push it"), _episode(2, 9)]
    return RobotDataset(eps, fps=15, subtasks=SUBTASKS)


@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
@pytest.mark.parametrize("as_video", [False, True])
def test_round_trip_preserves_frames_annotations_and_metadata(
    tmp_path, version: str, as_video: bool
) -> None:
    if as_video:
        pytest.importorskip("av")
    ds = _dataset()
    ds.write(tmp_path, version=version, video_keys=[CAMERA] if as_video else [])
    back = RobotDataset.read(tmp_path)
    assert back.fps == 15
    assert back.subtasks == SUBTASKS
    for a, b in zip(ds.episodes, back.episodes, strict=True):
        assert (a.index, a.task, a.subtasks, a.meta) == (b.index, b.task, b.subtasks, b.meta)
        for key, arr in a.frames.items():
            assert b.frames[key].dtype == arr.dtype
            assert b.frames[key].shape == arr.shape
            if key == CAMERA and as_video:  # near lossless (4:4:4, quantiser 0)
                assert np.abs(b.frames[key].astype(int) - arr).max() <= 2
            else:
                np.testing.assert_array_equal(b.frames[key], arr)
    np.testing.assert_allclose(
        back.temporal_proportions("put the cube away"), ds.temporal_proportions("put the cube away")
    )


def _write_two_episodes(tmp_path: Path, version: str) -> dict:
    """Write two episodes (5 and 6 frames, one camera as video) in ``version``'s layout;
    the layout's ``meta/info.json``."""
    pytest.importorskip("av")
    ds = RobotDataset([_episode(0, 5), _episode(1, 6)], fps=10, subtasks=SUBTASKS)
    ds.write(tmp_path, version=version, video_keys=[CAMERA])
    return json.loads((tmp_path / "meta" / "info.json").read_text())


def test_v21_layout_follows_lerobot(tmp_path) -> None:
    info = _write_two_episodes(tmp_path, "v2.1")
    assert info["codebase_version"] == "v2.1"
    assert (info["total_episodes"], info["total_frames"], info["fps"]) == (2, 11, 10)
    assert info["features"]["timestamp"]["shape"] == [1]
    assert info["features"]["behaviour"] == {"dtype": "int64", "shape": [1], "names": None}
    cam = info["features"][CAMERA]
    assert (cam["dtype"], cam["shape"], cam["info"]["video.fps"]) == ("video", [6, 5, 3], 10.0)
    assert (tmp_path / "videos" / "chunk-000" / CAMERA / "episode_000001.mp4").exists()
    assert not (tmp_path / "meta" / "subtasks.json").exists()
    table = pq.read_table(tmp_path / "data" / "chunk-000" / "episode_000001.parquet")
    assert CAMERA not in table.column_names
    assert table.column("index").to_pylist() == list(range(5, 11))
    assert table.column("frame_index").to_pylist() == list(range(6))
    assert table.column("timestamp").to_pylist()[1] == pytest.approx(0.1)
    assert pa.types.is_integer(table.schema.field("behaviour").type)  # a scalar column
    rows = [json.loads(x) for x in (tmp_path / "meta" / "episodes.jsonl").read_text().splitlines()]
    assert rows[0]["sparse_subtask_names"] == ["reach", "carry"]
    assert rows[0]["sparse_subtask_start_frames"] == [0, 2]
    assert rows[0]["sparse_subtask_end_frames"] == [1, 4]  # inclusive, as in LeRobot
    stats = json.loads((tmp_path / "meta" / "episodes_stats.jsonl").read_text().splitlines()[0])
    assert np.array(stats["stats"][CAMERA]["mean"]).shape == (3, 1, 1)


def test_v30_layout_follows_lerobot(tmp_path) -> None:
    info = _write_two_episodes(tmp_path, "v3.0")
    assert info["codebase_version"] == "v3.0"
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert (tmp_path / "videos" / CAMERA / "chunk-000" / "file-000.mp4").exists()
    data = pq.read_table(tmp_path / "data" / "chunk-000" / "file-000.parquet")
    assert data.column("episode_index").to_pylist() == [0] * 5 + [1] * 6
    eps = pq.read_table(tmp_path / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    rows = eps.to_pylist()
    assert rows[1][f"videos/{CAMERA}/from_timestamp"] == pytest.approx(0.5)
    assert rows[1][f"videos/{CAMERA}/to_timestamp"] == pytest.approx(1.1)
    assert (rows[1]["dataset_from_index"], rows[1]["dataset_to_index"]) == (5, 11)
    assert rows[1]["sparse_subtask_end_frames"] == [2, 5]
    tasks = pq.read_table(tmp_path / "meta" / "tasks.parquet").to_pylist()
    assert {"task_index": 0, "task": "put the cube away"} in tasks


# ------------------------------------------------------------- datasets as LeRobot lays them out
def _mp4(path: Path, episodes: list[np.ndarray], fps: int) -> None:
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=Fraction(fps))
        stream.width, stream.height, stream.pix_fmt = 8, 6, "yuv444p"
        stream.options = {"qp": "0"}
        for i, img in enumerate(np.concatenate(episodes)):
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = i
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def _lerobot_features() -> dict:
    scalar = {"shape": [1], "names": None}
    return {
        CAMERA: {
            "dtype": "video",
            "shape": [6, 8, 3],
            "names": ["height", "width", "channels"],
            "info": {"video.fps": 10, "video.codec": "h264", "video.pix_fmt": "yuv444p"},
        },
        "observation.state": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
        "observation.gripper": {"dtype": "float32", **scalar},
        "action": {"dtype": "float32", "shape": [2], "names": ["x", "y"]},
        "timestamp": {"dtype": "float32", **scalar},
        "frame_index": {"dtype": "int64", **scalar},
        "episode_index": {"dtype": "int64", **scalar},
        "index": {"dtype": "int64", **scalar},
        "task_index": {"dtype": "int64", **scalar},
    }


def _frames(ep: int, n: int, offset: int) -> tuple[pa.Table, np.ndarray]:
    t = np.arange(n)
    state = np.stack([t * 0.1 + ep, -t * 0.1], 1).astype(np.float32)
    table = pa.table(
        {
            "observation.state": pa.FixedSizeListArray.from_arrays(pa.array(state.ravel()), 2),
            "observation.gripper": pa.array((t % 2).astype(np.float32)),  # scalar column
            "action": pa.array([list(map(float, row)) for row in state], pa.list_(pa.float32())),
            "timestamp": pa.array((t / 10).astype(np.float32)),
            "frame_index": pa.array(t),
            "episode_index": pa.array(np.full(n, ep)),
            "index": pa.array(offset + t),
            "task_index": pa.array(np.zeros(n, dtype=np.int64)),
        }
    )
    images = np.zeros((n, 6, 8, 3), np.uint8)
    images[:, :, :, 0] = (40 * ep + 10 * t)[:, None, None]  # frame identity in the red channel
    return table, images


ANNOTATIONS = [  # as LeRobot's annotator writes them: boundaries shared, end frames inclusive
    {"names": ["reach", "grasp", "lift"], "start": [0, 3, 7], "end": [3, 7, 11]},
    {"names": ["reach", "grasp", "lift"], "start": [1, 4, 6], "end": [3, 5, 8]},
]
LENGTHS = [12, 9]


def _write_lerobot_v21(root: Path) -> None:
    info = {
        "codebase_version": "v2.1",
        "robot_type": "so100",
        "total_episodes": 2,
        "total_frames": sum(LENGTHS),
        "total_tasks": 1,
        "total_videos": 2,
        "total_chunks": 1,
        "chunks_size": 1000,
        "fps": 10,
        "splits": {"train": "0:2"},
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "video_path": "videos/chunk-{episode_chunk:03d}/{video_key}/episode_{episode_index:06d}.mp4",
        "features": _lerobot_features(),
    }
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps(info))
    (root / "meta" / "tasks.jsonl").write_text(json.dumps({"task_index": 0, "task": "lift"}))
    rows, offset = [], 0
    for ep, (n, ann) in enumerate(zip(LENGTHS, ANNOTATIONS, strict=True)):
        table, images = _frames(ep, n, offset)
        offset += n
        path = root / "data" / "chunk-000" / f"episode_{ep:06d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
        _mp4(root / "videos" / "chunk-000" / CAMERA / f"episode_{ep:06d}.mp4", [images], 10)
        rows.append(
            {
                "episode_index": ep,
                "tasks": ["lift"],
                "length": n,
                "sparse_subtask_names": ann["names"],
                "sparse_subtask_start_frames": ann["start"],
                "sparse_subtask_end_frames": ann["end"],
            }
        )
    (root / "meta" / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _write_lerobot_v30(root: Path) -> None:
    info = {
        "codebase_version": "v3.0",
        "robot_type": "so100",
        "total_episodes": 2,
        "total_frames": sum(LENGTHS),
        "total_tasks": 1,
        "chunks_size": 1000,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 200,
        "fps": 10,
        "splits": {"train": "0:2"},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        "features": _lerobot_features(),
    }
    (root / "meta" / "episodes" / "chunk-000").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps(info))
    pq.write_table(
        pa.table({"task_index": pa.array([0]), "task": pa.array(["lift"])}),
        root / "meta" / "tasks.parquet",
    )
    tables, videos, rows, offset = [], [], [], 0
    for ep, (n, ann) in enumerate(zip(LENGTHS, ANNOTATIONS, strict=True)):
        table, images = _frames(ep, n, offset)
        tables.append(table)
        videos.append(images)
        rows.append(
            {
                "episode_index": ep,
                "tasks": ["lift"],
                "length": n,
                "data/chunk_index": 0,
                "data/file_index": 0,
                "dataset_from_index": offset,
                "dataset_to_index": offset + n,
                f"videos/{CAMERA}/chunk_index": 0,
                f"videos/{CAMERA}/file_index": 0,
                f"videos/{CAMERA}/from_timestamp": offset / 10,
                f"videos/{CAMERA}/to_timestamp": (offset + n) / 10,
                "sparse_subtask_names": ann["names"],
                "sparse_subtask_start_frames": ann["start"],
                "sparse_subtask_end_frames": ann["end"],
                "dense_subtask_names": ["a", "b"],
                "dense_subtask_start_frames": [0, 4],
                "dense_subtask_end_frames": [4, n - 1],
            }
        )
        offset += n
    (root / "data" / "chunk-000").mkdir(parents=True)
    # episodes stored in reverse order in the data file: rows are located by episode_index
    pq.write_table(pa.concat_tables(tables[::-1]), root / "data/chunk-000/file-000.parquet")
    _mp4(root / "videos" / CAMERA / "chunk-000" / "file-000.mp4", videos, 10)
    pq.write_table(pa.Table.from_pylist(rows), root / "meta/episodes/chunk-000/file-000.parquet")


@pytest.mark.parametrize("writer", [_write_lerobot_v21, _write_lerobot_v30])
def test_reads_a_lerobot_dataset_with_videos_scalars_and_subtask_columns(tmp_path, writer) -> None:
    pytest.importorskip("av")
    writer(tmp_path)
    ds = RobotDataset.read(tmp_path)
    assert ds.subtasks == {"lift": ["reach", "grasp", "lift"]}
    ep0, ep1 = ds.episodes
    # inclusive ends; a boundary frame named by two subtasks stays with the earlier one
    assert ep0.subtasks == [
        SubtaskSpan("reach", 0, 4),
        SubtaskSpan("grasp", 4, 8),
        SubtaskSpan("lift", 8, 12),
    ]
    # frame 0 (before the first subtask) joins it, frames 9..10 past the last join it too
    assert ep1.subtasks == [
        SubtaskSpan("reach", 0, 4),
        SubtaskSpan("grasp", 4, 6),
        SubtaskSpan("lift", 6, 9),
    ]
    assert ep0.frames["observation.gripper"].shape == (12,)  # shape [1] -> [T]
    np.testing.assert_array_equal(ep0.frames["observation.gripper"], np.arange(12) % 2)
    np.testing.assert_allclose(ep1.frames["observation.state"][:, 0], 1 + 0.1 * np.arange(9))
    np.testing.assert_array_equal(ep1.frames["action"], ep1.frames["observation.state"])
    for ep in (ep0, ep1):
        img = ep.frames[CAMERA]
        assert img.shape == (ep.length, 6, 8, 3)
        assert img.dtype == np.uint8
        expected = 40 * ep.index + 10 * np.arange(ep.length)  # the right frame, in order
        assert np.abs(img[:, 3, 4, 0].astype(int) - expected).max() <= 2


def test_reads_lerobots_dense_scheme(tmp_path) -> None:
    pytest.importorskip("av")
    _write_lerobot_v30(tmp_path)
    ds = RobotDataset.read(tmp_path, annotations="dense")
    assert ds.subtasks == {"lift": ["a", "b"]}
    assert ds.episodes[1].subtasks == [SubtaskSpan("a", 0, 5), SubtaskSpan("b", 5, 9)]


def test_global_subtask_order_from_temporal_proportions(tmp_path) -> None:
    pytest.importorskip("av")
    _write_lerobot_v21(tmp_path)
    order = {"grasp": 0.2, "reach": 0.3, "lift": 0.5}
    (tmp_path / "meta" / "temporal_proportions_sparse.json").write_text(json.dumps(order))
    assert RobotDataset.read(tmp_path).subtasks == {"lift": ["grasp", "reach", "lift"]}


def _rewrite_episode_rows(root: Path, **changes: list) -> None:
    path = root / "meta" / "episodes.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for key, value in changes.items():
        rows[1][key] = value
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_gaps_between_subtasks_extend_the_earlier_one(tmp_path) -> None:
    _dataset().write(tmp_path)
    # episode 1 has one subtask; give it a gap-free but late-starting annotation
    _rewrite_episode_rows(tmp_path, sparse_subtask_start_frames=[2], sparse_subtask_end_frames=[1])
    assert RobotDataset.read(tmp_path).episodes[1].subtasks == [SubtaskSpan("push", 0, 4)]
    RobotDataset([_episode(0, 10), _episode(1, 6)], fps=10, subtasks=SUBTASKS).write(tmp_path)
    _rewrite_episode_rows(
        tmp_path, sparse_subtask_start_frames=[0, 4], sparse_subtask_end_frames=[1, 5]
    )
    spans = RobotDataset.read(tmp_path).episodes[1].subtasks
    assert spans == [SubtaskSpan("reach", 0, 4), SubtaskSpan("carry", 4, 6)]


def test_overlapping_subtasks_on_disk_name_the_episode(tmp_path) -> None:
    RobotDataset([_episode(0, 6), _episode(1, 6)], fps=10, subtasks=SUBTASKS).write(tmp_path)
    # carry starts at 1 while reach runs to 2 (inclusive): more than a shared boundary frame
    _rewrite_episode_rows(
        tmp_path, sparse_subtask_start_frames=[0, 1], sparse_subtask_end_frames=[2, 5]
    )
    with pytest.raises(AnnotationError, match=r"episode 1: subtask 1 \('carry'\) starts at"):
        RobotDataset.read(tmp_path)


def test_unannotated_dataset_is_single_stage_and_half_annotated_task_is_refused(
    tmp_path,
) -> None:
    RobotDataset([_episode(0, 6), _episode(1, 6)], fps=10, subtasks=SUBTASKS).write(tmp_path)
    path = tmp_path / "meta" / "episodes.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    stripped = [{k: v for k, v in r.items() if "subtask" not in k} for r in rows]
    path.write_text(json.dumps(stripped[0]) + "\n" + json.dumps(rows[1]) + "\n")
    with pytest.raises(AnnotationError, match=r"episode 0: no sparse subtask annotation"):
        RobotDataset.read(tmp_path)
    path.write_text("".join(json.dumps(r) + "\n" for r in stripped))
    ds = RobotDataset.read(tmp_path)
    assert ds.subtasks == {"put the cube away": ["task"]}
    assert ds.episodes[1].subtasks == [SubtaskSpan("task", 0, 6)]


def test_reads_datasets_of_earlier_versions_with_meta_subtasks_json(tmp_path) -> None:
    """The layout written before LeRobot's columns were used: meta/subtasks.json, unprefixed
    subtask columns with exclusive end frames, 1-D features declared with shape []."""
    (tmp_path / "meta").mkdir()
    (tmp_path / "data" / "chunk-000").mkdir(parents=True)
    info = {
        "codebase_version": "v2.1",
        "fps": 10.0,
        "total_episodes": 1,
        "total_frames": 5,
        "total_tasks": 1,
        "chunks_size": 1000,
        "data_path": "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
        "features": {
            "action": {"dtype": "float32", "shape": [2]},
            "behaviour": {"dtype": "int64", "shape": []},
        },
    }
    (tmp_path / "meta" / "info.json").write_text(json.dumps(info))
    (tmp_path / "meta" / "subtasks.json").write_text(json.dumps({"go": ["a", "b"]}))
    (tmp_path / "meta" / "tasks.jsonl").write_text('{"task_index": 0, "task": "go"}\n')
    row = {
        "episode_index": 0,
        "tasks": ["go"],
        "length": 5,
        "subtask_names": ["a", "b"],
        "subtask_start_frames": [0, 2],
        "subtask_end_frames": [2, 5],
        "style": "good",
    }
    (tmp_path / "meta" / "episodes.jsonl").write_text(json.dumps(row) + "\n")
    action = np.arange(10, dtype=np.float32)
    pq.write_table(
        pa.table(
            {
                "action": pa.FixedSizeListArray.from_arrays(pa.array(action), 2),
                "behaviour": pa.array(np.arange(5)),
                "timestamp": pa.array(np.arange(5, dtype=np.float32) / 10),
                "frame_index": pa.array(np.arange(5)),
                "episode_index": pa.array(np.zeros(5, dtype=np.int64)),
                "index": pa.array(np.arange(5)),
                "task_index": pa.array(np.zeros(5, dtype=np.int64)),
            }
        ),
        tmp_path / "data" / "chunk-000" / "episode_000000.parquet",
    )
    ds = RobotDataset.read(tmp_path)
    assert ds.subtasks == {"go": ["a", "b"]}
    ep = ds.episodes[0]
    assert ep.subtasks == [SubtaskSpan("a", 0, 2), SubtaskSpan("b", 2, 5)]
    assert ep.meta == {"style": "good"}
    np.testing.assert_array_equal(ep.frames["action"], action.reshape(5, 2))


def test_missing_video_names_the_episode_and_camera(tmp_path) -> None:
    pytest.importorskip("av")
    _write_lerobot_v21(tmp_path)
    (tmp_path / "videos" / "chunk-000" / CAMERA / "episode_000001.mp4").unlink()
    with pytest.raises(DatasetFormatError, match=rf"episode 1: camera '{CAMERA}'.*missing"):
        RobotDataset.read(tmp_path)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_values_are_rejected_naming_episode_feature_and_frame(tmp_path, bad) -> None:
    ep = _episode(4, 6)
    ep.frames["observation.state"][3, 1] = bad
    with pytest.raises(
        DatasetFormatError, match=r"episode 4: feature 'observation.state' has 1 non-finite .*\[3\]"
    ):
        RobotDataset([ep], 10, SUBTASKS)
    good = _episode(0, 6)
    RobotDataset([good], 10, SUBTASKS).write(tmp_path)
    path = tmp_path / "data" / "chunk-000" / "episode_000000.parquet"
    table = pq.read_table(path)
    action = good.frames["action"].copy()
    action[2, 0] = bad
    i = table.column_names.index("action")
    column = pa.FixedSizeListArray.from_arrays(pa.array(action.ravel()), 2)
    pq.write_table(table.set_column(i, "action", column), path)
    with pytest.raises(DatasetFormatError, match=r"episode 0: feature 'action' .*\[2\]"):
        RobotDataset.read(tmp_path)


def test_unknown_task_names_the_episode() -> None:
    with pytest.raises(AnnotationError, match=r"episode 3: unknown task 'fly'"):
        RobotDataset(
            [Episode(3, "fly", _episode(3, 5).frames, [SubtaskSpan("reach", 0, 5)])],
            10,
            SUBTASKS,
        )


def test_mismatched_frame_counts_and_missing_files(tmp_path) -> None:
    ep = _episode(0, 5)
    ep.frames["action"] = ep.frames["action"][:4]
    with pytest.raises(DatasetFormatError, match="episode 0: frame counts differ"):
        RobotDataset([ep], 10, SUBTASKS)
    with pytest.raises(DatasetFormatError, match="missing or malformed"):
        RobotDataset.read(tmp_path / "nothing")
    with pytest.raises(ValueError, match="version"):
        _dataset().write(tmp_path, version="v1.6")
    with pytest.raises(ValueError, match="video key 'action'"):
        _dataset().write(tmp_path, video_keys=["action"])


def test_sarm_trains_and_predicts_on_a_lerobot_dataset_read_from_disk(tmp_path) -> None:
    """End to end: a v3.0 dataset with a non-square camera (6x8) and a 2-d state."""
    pytest.importorskip("av")
    from lc_robotics_reward.configuration_sarm import SARMConfig
    from lc_robotics_reward.processor_sarm import SARMProcessor, predict_episode
    from lc_robotics_reward.text import HashingTextEmbedder
    from lc_robotics_reward.training import train_sarm

    _write_lerobot_v30(tmp_path)
    ds = RobotDataset.read(tmp_path)
    cfg = SARMConfig(
        num_stages=3,
        image_size=12,
        state_dim=2,
        text_dim=16,
        frame_dim=8,
        hidden_dim=16,
        num_heads=2,
        num_layers=1,
        num_frames=4,
        frame_gap=2,
        max_rewind=1,
        temporal_proportions=tuple(ds.temporal_proportions("lift")),
    )
    proc = SARMProcessor(ds, "lift", cfg, HashingTextEmbedder(16), image_key=CAMERA)
    assert proc.episodes[0].images.shape == (12, 12, 12, 3)  # resized to image_size
    model, history = train_sarm(proc, steps=3, batch_size=4, seed=0, show_progress=False)
    assert np.isfinite(history[-1]["loss"])
    ep = ds.episodes[1]
    pred = predict_episode(
        model, ep.frames[CAMERA], ep.frames["observation.state"], proc.text_table[0]
    )
    assert pred["progress"].shape == (9,)
    assert ((pred["progress"] >= 0) & (pred["progress"] <= 1)).all()
    with pytest.raises(ValueError, match=r"'observation\.images\.side' is missing"):
        SARMProcessor(ds, "lift", cfg, HashingTextEmbedder(16), image_key="observation.images.side")
