"""In-context learning under non-stationarity: linear regression prompts whose task
weight drifts as an AR(1) process, and one-layer linear attention, gated linear attention
(GLA) and softmax attention trained to predict the query label.
"""

from __future__ import annotations

from lc_train.icl_drift.data import DriftBatch, DriftConfig, sample_prompts
from lc_train.icl_drift.experiment import TrainConfig, evaluate, run_sweep, train_regressor
from lc_train.icl_drift.kalman import kalman_predict
from lc_train.icl_drift.models import KINDS, ICLRegressor

__all__ = [
    "KINDS",
    "DriftBatch",
    "DriftConfig",
    "ICLRegressor",
    "TrainConfig",
    "evaluate",
    "kalman_predict",
    "run_sweep",
    "sample_prompts",
    "train_regressor",
]
