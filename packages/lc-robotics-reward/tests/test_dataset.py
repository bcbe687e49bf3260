"""Dataset round trip through the LeRobot-style layout, and bad input at the boundary."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lc_robotics_reward.dataset import Episode, RobotDataset
from lc_robotics_reward.errors import AnnotationError, DatasetFormatError
from lc_robotics_reward.labels import SubtaskSpan

SUBTASKS = {"put the cube away": ["reach", "carry"], "push it": ["push"]}


def _episode(index: int, length: int, task: str = "put the cube away") -> Episode:
    rng = np.random.default_rng(index)
    spans = (
        [SubtaskSpan("reach", 0, length // 2), SubtaskSpan("carry", length // 2, length)]
        if task == "put the cube away"
        else [SubtaskSpan("push", 0, length)]
    )
    return Episode(
        index=index,
        task=task,
        frames={
            "observation.image": rng.integers(0, 256, size=(length, 6, 5, 3), dtype=np.uint8),
            "observation.state": rng.normal(size=(length, 3)).astype(np.float32),
            "action": rng.normal(size=(length, 2)).astype(np.float32),
            "behaviour": rng.integers(0, 5, size=length),
        },
        subtasks=spans,
        meta={"style": "good", "success": bool(index % 2)},
    )


def test_round_trip_preserves_frames_annotations_and_metadata(tmp_path) -> None:
    ds = RobotDataset(
        [_episode(0, 7), _episode(1, 4, "push it"), _episode(2, 9)], fps=15, subtasks=SUBTASKS
    )
    ds.write(tmp_path)
    back = RobotDataset.read(tmp_path)
    assert back.fps == 15
    assert back.subtasks == SUBTASKS
    for a, b in zip(ds.episodes, back.episodes, strict=True):
        assert (a.index, a.task, a.subtasks, a.meta) == (b.index, b.task, b.subtasks, b.meta)
        for key, arr in a.frames.items():
            assert b.frames[key].dtype == arr.dtype
            np.testing.assert_array_equal(b.frames[key], arr)
    np.testing.assert_allclose(
        back.temporal_proportions("put the cube away"), ds.temporal_proportions("put the cube away")
    )


def test_layout_follows_lerobot(tmp_path) -> None:
    RobotDataset([_episode(0, 5), _episode(1, 6)], fps=10, subtasks=SUBTASKS).write(tmp_path)
    info = json.loads((tmp_path / "meta" / "info.json").read_text())
    assert info["total_episodes"] == 2
    assert info["total_frames"] == 11
    assert info["features"]["observation.image"] == {"dtype": "uint8", "shape": [6, 5, 3]}
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "data" / "chunk-000" / "episode_000001.parquet")
    assert table.column("index").to_pylist() == list(range(5, 11))
    assert table.column("frame_index").to_pylist() == list(range(6))
    assert table.column("timestamp").to_pylist()[1] == pytest.approx(0.1)
    rows = [json.loads(x) for x in (tmp_path / "meta" / "episodes.jsonl").read_text().splitlines()]
    assert rows[0]["subtask_names"] == ["reach", "carry"]
    assert rows[0]["subtask_start_frames"] == [0, 2]
    assert rows[0]["subtask_end_frames"] == [2, 5]


def test_unknown_task_names_the_episode() -> None:
    with pytest.raises(AnnotationError, match=r"episode 3: unknown task 'fly'"):
        RobotDataset(
            [
                _episode(3, 5, "put the cube away").__class__(
                    3, "fly", _episode(3, 5).frames, [SubtaskSpan("reach", 0, 5)]
                )
            ],
            10,
            SUBTASKS,
        )


def test_bad_annotation_on_disk_names_the_episode(tmp_path) -> None:
    RobotDataset([_episode(0, 6), _episode(1, 6)], fps=10, subtasks=SUBTASKS).write(tmp_path)
    path = tmp_path / "meta" / "episodes.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    rows[1]["subtask_start_frames"] = [0, 2]  # overlaps: reach ends at 3
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(AnnotationError, match=r"episode 1: subtask 1 .*overlaps"):
        RobotDataset.read(tmp_path)


def test_mismatched_frame_counts_and_missing_files(tmp_path) -> None:
    ep = _episode(0, 5)
    ep.frames["action"] = ep.frames["action"][:4]
    with pytest.raises(DatasetFormatError, match="episode 0: frame counts differ"):
        RobotDataset([ep], 10, SUBTASKS)
    with pytest.raises(DatasetFormatError, match="missing or malformed"):
        RobotDataset.read(tmp_path / "nothing")
