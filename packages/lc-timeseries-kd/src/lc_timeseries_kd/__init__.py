"""Knowledge distillation from full to partial time series (GDPD) and baselines.

A teacher trained on full series transfers to a student that sees only the first
``earliness`` fraction of each series. Methods: no distillation, logit KD, FitNet
feature KD (Base-KD) and GDPD (a diffusion prior over teacher features restores the
student's features during training; inference uses the student alone). Baselines
without distillation: aeon's MiniRocket and QUANT trained on the same prefixes.

Heavy modules (torch, aeon, scikit-learn) load on first use of a name.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__: str = version("lc-timeseries-kd")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

_LAZY: dict[str, str] = {
    "BASELINES": "baselines",
    "fit_predict_baseline": "baselines",
    "METHODS": "config",
    "GDPDConfig": "config",
    "TrainConfig": "config",
    "PAPER_EARLINESS": "data",
    "PartialSeriesDataset": "data",
    "bundled_datasets": "data",
    "load_bundled": "data",
    "prefix_view": "data",
    "prepare_dataset": "data",
    "resample": "data",
    "NoisePredictor": "diffusion",
    "NoiseSchedule": "diffusion",
    "ddim_sample": "diffusion",
    "GDPDDistiller": "gdpd",
    "FitNetHint": "losses",
    "logit_kd_loss": "losses",
    "accuracy": "metrics",
    "auc_prc": "metrics",
    "FCNClassifier": "models",
    "LSTMClassifier": "models",
    "build_model": "models",
    "TrainResult": "training",
    "predict_proba": "training",
    "train_student": "training",
    "train_teacher": "training",
    "PartialSeriesClassifier": "estimator",
    "config_hash": "experiment",
    "paired_tests": "experiment",
    "results_table": "experiment",
    "run_cell": "experiment",
    "run_grid": "experiment",
}

__all__ = [
    "BASELINES",
    "METHODS",
    "PAPER_EARLINESS",
    "FCNClassifier",
    "FitNetHint",
    "GDPDConfig",
    "GDPDDistiller",
    "LSTMClassifier",
    "NoisePredictor",
    "NoiseSchedule",
    "PartialSeriesClassifier",
    "PartialSeriesDataset",
    "TrainConfig",
    "TrainResult",
    "__version__",
    "accuracy",
    "auc_prc",
    "build_model",
    "bundled_datasets",
    "config_hash",
    "ddim_sample",
    "fit_predict_baseline",
    "load_bundled",
    "logit_kd_loss",
    "paired_tests",
    "predict_proba",
    "prefix_view",
    "prepare_dataset",
    "resample",
    "results_table",
    "run_cell",
    "run_grid",
    "train_student",
    "train_teacher",
]

if TYPE_CHECKING:
    from lc_timeseries_kd.baselines import BASELINES, fit_predict_baseline
    from lc_timeseries_kd.config import METHODS, GDPDConfig, TrainConfig
    from lc_timeseries_kd.data import (
        PAPER_EARLINESS,
        PartialSeriesDataset,
        bundled_datasets,
        load_bundled,
        prefix_view,
        prepare_dataset,
        resample,
    )
    from lc_timeseries_kd.diffusion import NoisePredictor, NoiseSchedule, ddim_sample
    from lc_timeseries_kd.estimator import PartialSeriesClassifier
    from lc_timeseries_kd.experiment import (
        config_hash,
        paired_tests,
        results_table,
        run_cell,
        run_grid,
    )
    from lc_timeseries_kd.gdpd import GDPDDistiller
    from lc_timeseries_kd.losses import FitNetHint, logit_kd_loss
    from lc_timeseries_kd.metrics import accuracy, auc_prc
    from lc_timeseries_kd.models import FCNClassifier, LSTMClassifier, build_model
    from lc_timeseries_kd.training import TrainResult, predict_proba, train_student, train_teacher


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lc_timeseries_kd' has no attribute {name!r}")
    value = getattr(import_module(f"lc_timeseries_kd.{module}"), name)
    globals()[name] = value
    return value
