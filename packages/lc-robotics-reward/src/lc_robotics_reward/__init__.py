"""Stage-aware reward models (SARM) and reward-aligned behaviour cloning (RA-BC).

Light parts (labels, LeRobot dataset reading and writing, RA-BC weights, metrics) import
only numpy and pyarrow; the model, training and BC parts import torch when first used,
and camera videos need PyAV (the ``video`` extra) when first decoded or encoded.

Example:
    >>> from lc_robotics_reward import SubtaskSpan, derive_labels, rabc_weights
    >>> spans = [SubtaskSpan("reach", 0, 3), SubtaskSpan("place", 3, 6)]
    >>> derive_labels(spans, 6, ["reach", "place"], [0.5, 0.5]).progress.tolist()
    [0.0, 0.16666666666666666, 0.3333333333333333, 0.5, 0.6666666666666666, 0.8333333333333333]
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from lc_robotics_reward.configuration_sarm import SARMConfig
from lc_robotics_reward.dataset import Episode, RobotDataset
from lc_robotics_reward.errors import AnnotationError, DatasetFormatError
from lc_robotics_reward.evaluation import pearson, ranking_auc, spearman, stage_accuracy
from lc_robotics_reward.labels import (
    FrameLabels,
    SubtaskSpan,
    derive_labels,
    frame_index_progress,
    normalized_progress,
    spans_from_stages,
    stage_and_tau,
    temporal_proportions,
    validate_spans,
)
from lc_robotics_reward.rabc import (
    RABCWeighter,
    delta_statistics,
    episode_filter,
    progress_deltas,
    rabc_filter,
    rabc_weights,
    weighted_bc_loss,
    write_progress,
)
from lc_robotics_reward.text import (
    HashingTextEmbedder,
    MiniLMTextEmbedder,
    TextEmbedder,
    make_text_embedder,
)

try:
    __version__: str = version("lc-robotics-reward")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

_LAZY = {
    "SARMModel": "lc_robotics_reward.modeling_sarm",
    "SmallCNN": "lc_robotics_reward.modeling_sarm",
    "sarm_loss": "lc_robotics_reward.modeling_sarm",
    "SARMProcessor": "lc_robotics_reward.processor_sarm",
    "predict_episode": "lc_robotics_reward.processor_sarm",
    "window_indices": "lc_robotics_reward.processor_sarm",
    "resize_frames": "lc_robotics_reward.processor_sarm",
    "rewind_indices": "lc_robotics_reward.processor_sarm",
    "train_sarm": "lc_robotics_reward.training",
    "BCConfig": "lc_robotics_reward.bc",
    "BCPolicy": "lc_robotics_reward.bc",
    "train_bc": "lc_robotics_reward.bc",
    "rollout_outcomes": "lc_robotics_reward.bc",
    "rollout_success": "lc_robotics_reward.bc",
    "encode_video": "lc_robotics_reward.video",
    "decode_video": "lc_robotics_reward.video",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lc_robotics_reward' has no attribute {name!r}")


__all__ = [
    "AnnotationError",
    "BCConfig",
    "BCPolicy",
    "DatasetFormatError",
    "Episode",
    "FrameLabels",
    "HashingTextEmbedder",
    "MiniLMTextEmbedder",
    "RABCWeighter",
    "RobotDataset",
    "SARMConfig",
    "SARMModel",
    "SARMProcessor",
    "SmallCNN",
    "SubtaskSpan",
    "TextEmbedder",
    "__version__",
    "decode_video",
    "delta_statistics",
    "derive_labels",
    "encode_video",
    "episode_filter",
    "frame_index_progress",
    "make_text_embedder",
    "normalized_progress",
    "pearson",
    "predict_episode",
    "progress_deltas",
    "rabc_filter",
    "rabc_weights",
    "ranking_auc",
    "resize_frames",
    "rewind_indices",
    "rollout_outcomes",
    "rollout_success",
    "sarm_loss",
    "spans_from_stages",
    "spearman",
    "stage_accuracy",
    "stage_and_tau",
    "temporal_proportions",
    "train_bc",
    "train_sarm",
    "validate_spans",
    "weighted_bc_loss",
    "window_indices",
    "write_progress",
]
