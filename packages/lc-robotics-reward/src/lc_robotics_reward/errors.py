"""Exception types of lc-robotics-reward."""

from __future__ import annotations


class AnnotationError(ValueError):
    """Subtask annotations of an episode are invalid (overlap, gap, coverage, unknown name)."""


class DatasetFormatError(ValueError):
    """A dataset on disk or in memory does not follow the expected layout."""
