"""scikit-learn style estimator: fit on full series, predict from partial ones."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError

from lc_timeseries_kd.config import METHODS, GDPDConfig, TrainConfig
from lc_timeseries_kd.data import check_earliness, prefix_view, resample, stratified_split
from lc_timeseries_kd.training import predict_proba, train_student, train_teacher

__all__ = ["PartialSeriesClassifier"]


class PartialSeriesClassifier(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """Classify a series from its first ``earliness`` fraction (teacher -> student KD).

    ``fit`` takes *full* training series: it trains a teacher on them and a student on
    their prefix views (the first ``earliness`` fraction, re-stretched to ``length``
    points) with the chosen distillation ``method``. ``predict`` / ``predict_proba``
    take the *observed partial* series, of any length, stretch each to ``length`` points
    as in training and run the student alone.

    Args:
        earliness: observed fraction in ``(0, 1]`` the student is trained for.
        method: ``"gdpd"`` (default), ``"fitnet"`` (Base-KD), ``"logit"`` or ``"none"``.
        arch: ``"fcn"`` or ``"lstm"`` (teacher and student share the architecture).
        length: resampled series length (paper: 100).
        epochs: training epochs of teacher and student.
        warmup_epochs: GDPD / FitNet warm-up epochs (model selection starts after them).
        lr: Adam learning rate.
        batch_size: minibatch size.
        val_fraction: share of the training data held out for model selection.
        gdpd_weight: weight of the GDPD terms.
        inference_steps: DDIM steps of the GDPD sampler.
        seed: seeds the split, initialisation, batch order and diffusion noise.
        hidden: LSTM units; layers: LSTM layers; widths: FCN channels.

    Attributes:
        classes_: class labels in the order of ``predict_proba``'s columns.
        teacher_: the trained full-series teacher.
        student_: the trained partial-series student (used for prediction).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(40, 1, 50)); y = np.repeat(["a", "b"], 20)
        >>> X[y == "b", 0, :10] += 2.0
        >>> clf = PartialSeriesClassifier(earliness=0.4, epochs=6, warmup_epochs=2,
        ...                               widths=(8, 16, 8)).fit(X, y)
        >>> clf.predict_proba(X[:3, :, :20]).shape
        (3, 2)
    """

    def __init__(
        self,
        earliness: float = 0.4,
        method: str = "gdpd",
        arch: str = "fcn",
        length: int = 100,
        epochs: int = 60,
        warmup_epochs: int = 20,
        lr: float = 1e-3,
        batch_size: int = 32,
        val_fraction: float = 0.2,
        gdpd_weight: float = 1.0,
        inference_steps: int = 5,
        seed: int = 0,
        hidden: int = 100,
        layers: int = 3,
        widths: tuple[int, int, int] = (128, 256, 128),
    ):
        self.earliness = earliness
        self.method = method
        self.arch = arch
        self.length = length
        self.epochs = epochs
        self.warmup_epochs = warmup_epochs
        self.lr = lr
        self.batch_size = batch_size
        self.val_fraction = val_fraction
        self.gdpd_weight = gdpd_weight
        self.inference_steps = inference_steps
        self.seed = seed
        self.hidden = hidden
        self.layers = layers
        self.widths = widths

    def _config(self) -> TrainConfig:
        return TrainConfig(
            arch=self.arch,
            hidden=self.hidden,
            layers=self.layers,
            widths=tuple(self.widths),  # type: ignore[arg-type]
            length=self.length,
            epochs=self.epochs,
            warmup_epochs=self.warmup_epochs,
            batch_size=self.batch_size,
            lr=self.lr,
            val_fraction=self.val_fraction,
            gdpd=GDPDConfig(weight=self.gdpd_weight, inference_steps=self.inference_steps),
        )

    def fit(self, X: Any, y: Any) -> PartialSeriesClassifier:
        """Train teacher (full series) and student (prefix views).

        Args:
            X: full series, ``[n, channels, t]`` / ``[n, t]`` array or a list of
                ``[channels, t_i]`` arrays (unequal lengths are resampled).
            y: ``[n]`` labels (any hashable type).

        Returns:
            self.
        """
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        e = check_earliness(self.earliness)
        cfg = self._config()
        x = resample(X, cfg.length)
        y_arr = np.asarray(y)
        if y_arr.shape != (x.shape[0],):
            raise ValueError(f"y must have shape [{x.shape[0]}], got {y_arr.shape}")
        self.classes_, y_ids = np.unique(y_arr, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError("need at least two classes")
        self.mean_ = x.mean(axis=(0, 2), keepdims=True)
        self.std_ = x.std(axis=(0, 2), keepdims=True) + 1e-6
        x = ((x - self.mean_) / self.std_).astype(np.float32)
        tr, va = stratified_split(y_ids, cfg.val_fraction, self.seed)
        if len(va) == 0:
            raise ValueError("too few series to hold out a validation split")
        k = len(self.classes_)
        teacher = train_teacher(x[tr], y_ids[tr], x[va], y_ids[va], cfg, self.seed, k)
        self.teacher_ = teacher.model
        result = train_student(
            self.method,
            prefix_view(x[tr], e),
            x[tr],
            y_ids[tr],
            prefix_view(x[va], e),
            y_ids[va],
            self.teacher_,
            cfg,
            self.seed,
            k,
        )
        self.student_ = result.model
        self.n_channels_ = x.shape[1]
        return self

    def _prepare(self, X: Any) -> np.ndarray:
        if not hasattr(self, "student_"):
            raise NotFittedError("this PartialSeriesClassifier is not fitted; call fit first")
        x = resample(X, self.length)
        if x.shape[1] != self.n_channels_:
            raise ValueError(f"expected {self.n_channels_} channels, got {x.shape[1]}")
        return ((x - self.mean_) / self.std_).astype(np.float32)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities ``[n, n_classes]`` of observed partial series ``X``."""
        x = self._prepare(X)
        return predict_proba(self.student_, x)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels ``[n]`` of observed partial series ``X``."""
        proba = self.predict_proba(X)
        return self.classes_[proba.argmax(axis=1)]  # type: ignore[no-any-return]
