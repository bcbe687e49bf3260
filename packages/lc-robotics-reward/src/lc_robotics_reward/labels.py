r"""Reward labels from natural-language subtask annotations (SARM's labelling).

An episode of ``T`` frames is annotated with consecutive subtask spans, each a name from
the task's ordered subtask list and a half-open frame range ``[start, end)``; together the
spans must cover ``0..T-1`` without gaps or overlaps. For frame ``t`` in a span of subtask
``k`` (0-based),

.. math::
    \tau_t = \frac{t - s}{e - s} \in [0, 1), \qquad
    \text{progress}_t = P_{k-1} + \bar\alpha_k \, \tau_t, \qquad P_{k-1} = \sum_{j<k}\bar\alpha_j,

where :math:`\bar\alpha_k` is the dataset-level temporal proportion of subtask ``k``: its
share of episode time, averaged over the annotated episodes that contain it, and
normalised so that the proportions sum to one. A frame at the start of subtask ``k``
therefore has the same progress in every episode however long the earlier subtasks took;
frame-index labels (``t / (T - 1)``) do not have that property.

Example:
    >>> spans = [SubtaskSpan("reach", 0, 2), SubtaskSpan("lift", 2, 6)]
    >>> alpha = temporal_proportions([(spans, 6)], ["reach", "lift"])
    >>> alpha.round(3).tolist()
    [0.333, 0.667]
    >>> labels = derive_labels(spans, 6, ["reach", "lift"], alpha)
    >>> labels.stage.tolist(), labels.tau.tolist()
    ([0, 0, 1, 1, 1, 1], [0.0, 0.5, 0.0, 0.25, 0.5, 0.75])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lc_robotics_reward.errors import AnnotationError


@dataclass(frozen=True)
class SubtaskSpan:
    """One annotated subtask: its name and the half-open frame range ``[start, end)``."""

    name: str
    start: int
    end: int


@dataclass(frozen=True)
class FrameLabels:
    """Per-frame labels of one episode, each ``[T]``: stage index, tau and progress."""

    stage: np.ndarray
    tau: np.ndarray
    progress: np.ndarray


def validate_spans(
    spans: Sequence[SubtaskSpan],
    length: int,
    subtasks: Sequence[str],
    episode: int | str = "?",
) -> None:
    """Raise :class:`AnnotationError` (naming ``episode``) unless the spans tile the episode.

    Checks: at least one span; every name in ``subtasks``; ``start < end``; spans sorted and
    contiguous (a later start is a gap, an earlier one an overlap); the first starts at 0
    and the last ends at ``length``.
    """
    if length < 1:
        raise AnnotationError(f"episode {episode}: length {length}; must be >= 1")
    if not spans:
        raise AnnotationError(f"episode {episode}: no subtask annotations")
    known = set(subtasks)
    expected_start = 0
    for i, span in enumerate(spans):
        if span.name not in known:
            raise AnnotationError(
                f"episode {episode}: subtask {span.name!r} is not one of {list(subtasks)}"
            )
        if span.end <= span.start:
            raise AnnotationError(
                f"episode {episode}: subtask {i} ({span.name!r}) has start {span.start} >= "
                f"end {span.end}"
            )
        if span.start > expected_start:
            raise AnnotationError(
                f"episode {episode}: gap before subtask {i} ({span.name!r}): frames "
                f"{expected_start}..{span.start - 1} are not annotated"
            )
        if span.start < expected_start:
            raise AnnotationError(
                f"episode {episode}: subtask {i} ({span.name!r}) starts at {span.start} and "
                f"overlaps the previous one, which ends at {expected_start}"
            )
        expected_start = span.end
    if expected_start != length:
        raise AnnotationError(
            f"episode {episode}: annotations end at frame {expected_start} but the episode "
            f"has {length} frames"
        )


def temporal_proportions(
    episodes: Sequence[tuple[Sequence[SubtaskSpan], int]],
    subtasks: Sequence[str],
) -> np.ndarray:
    """Dataset-level temporal proportions ``alpha [K]`` (sum 1) of the ordered ``subtasks``.

    Args:
        episodes: ``(spans, length)`` per annotated episode.
        subtasks: the task's ordered subtask names (``K`` of them).

    Raises:
        AnnotationError: invalid spans, or a subtask that no episode contains.
    """
    if not subtasks:
        raise ValueError("subtasks is empty; a task needs at least one subtask")
    index = {name: k for k, name in enumerate(subtasks)}
    if len(index) != len(subtasks):
        raise ValueError(f"subtasks has duplicates: {list(subtasks)}")
    total = np.zeros(len(subtasks))
    count = np.zeros(len(subtasks))
    for e, (spans, length) in enumerate(episodes):
        validate_spans(spans, length, subtasks, episode=e)
        share = np.zeros(len(subtasks))
        for span in spans:
            share[index[span.name]] += (span.end - span.start) / length
        present = share > 0
        total[present] += share[present]
        count[present] += 1
    if (count == 0).any():
        missing = [subtasks[int(k)] for k in np.nonzero(count == 0)[0]]
        raise AnnotationError(f"no annotated episode contains subtask(s) {missing}")
    alpha = total / count
    return alpha / alpha.sum()


def stage_and_tau(
    spans: Sequence[SubtaskSpan],
    length: int,
    subtasks: Sequence[str],
    episode: int | str = "?",
) -> tuple[np.ndarray, np.ndarray]:
    """Stage index ``[T]`` (int64) and within-stage progress tau ``[T]`` (float64)."""
    validate_spans(spans, length, subtasks, episode)
    index = {name: k for k, name in enumerate(subtasks)}
    stage = np.empty(length, dtype=np.int64)
    tau = np.empty(length, dtype=np.float64)
    for span in spans:
        t = np.arange(span.start, span.end)
        stage[t] = index[span.name]
        tau[t] = (t - span.start) / (span.end - span.start)
    return stage, tau


def normalized_progress(stage: np.ndarray, tau: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``P_{k-1} + alpha_k * tau`` elementwise; ``stage`` int, ``tau`` in ``[0, 1]``.

    Works on numpy arrays of any matching shape; ``alpha [K]`` are the temporal proportions.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    stage = np.asarray(stage)
    if stage.size and (stage.min() < 0 or stage.max() >= alpha.size):
        raise ValueError(
            f"stage indices must lie in [0, {alpha.size}); got {stage.min()}..{stage.max()}"
        )
    before = np.concatenate([[0.0], np.cumsum(alpha)[:-1]])
    return before[stage] + alpha[stage] * np.asarray(tau, dtype=np.float64)


def derive_labels(
    spans: Sequence[SubtaskSpan],
    length: int,
    subtasks: Sequence[str],
    alpha: np.ndarray,
    episode: int | str = "?",
) -> FrameLabels:
    """Stage, tau and normalised progress of every frame of one annotated episode."""
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.shape != (len(subtasks),):
        raise ValueError(f"alpha has shape {alpha.shape}; expected ({len(subtasks)},)")
    stage, tau = stage_and_tau(spans, length, subtasks, episode)
    return FrameLabels(stage, tau, normalized_progress(stage, tau, alpha))


def frame_index_progress(length: int) -> np.ndarray:
    """The frame-index baseline label ``t / (T - 1)`` (``[T]``), for comparison only."""
    if length < 1:
        raise ValueError(f"length={length}; allowed: >= 1")
    return np.arange(length) / max(length - 1, 1)


def spans_from_stages(stage: np.ndarray, subtasks: Sequence[str]) -> list[SubtaskSpan]:
    """Turn a per-frame stage index ``[T]`` into consecutive spans (runs of one stage)."""
    stage = np.asarray(stage)
    if stage.ndim != 1 or stage.size == 0:
        raise ValueError(f"stage must be a non-empty 1-D array; got shape {stage.shape}")
    cuts = np.nonzero(np.diff(stage))[0] + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [stage.size]])
    return [
        SubtaskSpan(subtasks[int(stage[s])], int(s), int(e))
        for s, e in zip(starts, ends, strict=True)
    ]
