"""Label derivation on hand-made annotations (stage, tau, temporal proportions, progress)."""

from __future__ import annotations

import numpy as np
import pytest

from lc_robotics_reward.errors import AnnotationError
from lc_robotics_reward.labels import (
    SubtaskSpan,
    derive_labels,
    frame_index_progress,
    normalized_progress,
    spans_from_stages,
    stage_and_tau,
    temporal_proportions,
    validate_spans,
)

NAMES = ["reach", "grasp", "place"]


def test_stage_and_tau_by_hand() -> None:
    spans = [SubtaskSpan("reach", 0, 4), SubtaskSpan("grasp", 4, 6), SubtaskSpan("place", 6, 10)]
    stage, tau = stage_and_tau(spans, 10, NAMES)
    assert stage.tolist() == [0, 0, 0, 0, 1, 1, 2, 2, 2, 2]
    np.testing.assert_allclose(tau, [0, 0.25, 0.5, 0.75, 0, 0.5, 0, 0.25, 0.5, 0.75])


def test_temporal_proportions_average_shares_over_episodes() -> None:
    # episode A: shares 0.4 / 0.2 / 0.4; episode B (20 frames): 0.1 / 0.1 / 0.8
    a = [SubtaskSpan("reach", 0, 4), SubtaskSpan("grasp", 4, 6), SubtaskSpan("place", 6, 10)]
    b = [SubtaskSpan("reach", 0, 2), SubtaskSpan("grasp", 2, 4), SubtaskSpan("place", 4, 20)]
    alpha = temporal_proportions([(a, 10), (b, 20)], NAMES)
    np.testing.assert_allclose(alpha, [0.25, 0.15, 0.6])


def test_proportion_of_a_subtask_is_averaged_only_where_it_occurs() -> None:
    a = [SubtaskSpan("reach", 0, 5), SubtaskSpan("place", 5, 10)]  # no grasp
    b = [SubtaskSpan("reach", 0, 2), SubtaskSpan("grasp", 2, 6), SubtaskSpan("place", 6, 8)]
    alpha = temporal_proportions([(a, 10), (b, 8)], NAMES)
    raw = np.array([(0.5 + 0.25) / 2, 0.5, (0.5 + 0.25) / 2])
    np.testing.assert_allclose(alpha, raw / raw.sum())


def test_normalized_progress_is_cumulative_prior_plus_scaled_tau() -> None:
    alpha = np.array([0.25, 0.15, 0.6])
    spans = [SubtaskSpan("reach", 0, 4), SubtaskSpan("grasp", 4, 6), SubtaskSpan("place", 6, 10)]
    labels = derive_labels(spans, 10, NAMES, alpha)
    expected = [0, 0.0625, 0.125, 0.1875, 0.25, 0.325, 0.4, 0.55, 0.7, 0.85]
    np.testing.assert_allclose(labels.progress, expected)
    assert np.all(np.diff(labels.progress) > 0)


def test_progress_is_not_frame_index_based() -> None:
    """The start of a subtask gets the same progress however long earlier subtasks took."""
    alpha = np.array([0.3, 0.3, 0.4])
    fast = [SubtaskSpan("reach", 0, 2), SubtaskSpan("grasp", 2, 4), SubtaskSpan("place", 4, 8)]
    slow = [SubtaskSpan("reach", 0, 20), SubtaskSpan("grasp", 20, 22), SubtaskSpan("place", 22, 26)]
    p_fast = derive_labels(fast, 8, NAMES, alpha).progress
    p_slow = derive_labels(slow, 26, NAMES, alpha).progress
    assert p_fast[4] == pytest.approx(0.6)
    assert p_slow[22] == pytest.approx(0.6)
    assert frame_index_progress(8)[4] != pytest.approx(frame_index_progress(26)[22])


def test_normalized_progress_rejects_out_of_range_stage() -> None:
    with pytest.raises(ValueError, match="stage indices"):
        normalized_progress(np.array([3]), np.array([0.0]), np.array([0.5, 0.5]))


@pytest.mark.parametrize(
    ("spans", "length", "match"),
    [
        ([SubtaskSpan("reach", 0, 5), SubtaskSpan("grasp", 4, 10)], 10, "overlaps"),
        ([SubtaskSpan("reach", 0, 4), SubtaskSpan("grasp", 6, 10)], 10, "gap before subtask 1"),
        ([SubtaskSpan("reach", 2, 10)], 10, "gap before subtask 0"),
        ([SubtaskSpan("reach", 0, 8)], 10, "end at frame 8 but the episode has 10"),
        ([SubtaskSpan("reach", 0, 12)], 10, "end at frame 12"),
        ([SubtaskSpan("wave", 0, 10)], 10, "'wave' is not one of"),
        ([SubtaskSpan("reach", 0, 0), SubtaskSpan("grasp", 0, 10)], 10, "start 0 >= end 0"),
        ([], 10, "no subtask annotations"),
    ],
)
def test_bad_annotations_raise_naming_the_episode(spans, length, match) -> None:
    with pytest.raises(AnnotationError, match=match) as info:
        validate_spans(spans, length, NAMES, episode=7)
    assert "episode 7" in str(info.value)


def test_a_subtask_that_no_episode_has_is_an_error() -> None:
    with pytest.raises(AnnotationError, match="grasp"):
        temporal_proportions([([SubtaskSpan("reach", 0, 3), SubtaskSpan("place", 3, 6)], 6)], NAMES)


def test_spans_from_stages_round_trips() -> None:
    stage = np.array([0, 0, 1, 1, 1, 2])
    spans = spans_from_stages(stage, NAMES)
    assert spans == [
        SubtaskSpan("reach", 0, 2),
        SubtaskSpan("grasp", 2, 5),
        SubtaskSpan("place", 5, 6),
    ]
    np.testing.assert_array_equal(stage_and_tau(spans, 6, NAMES)[0], stage)
