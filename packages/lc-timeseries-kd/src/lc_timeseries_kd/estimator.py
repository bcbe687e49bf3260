"""scikit-learn estimator: fit on full series, classify from their first ``earliness``.

It follows scikit-learn's contract (``check_estimator`` passes apart from the one
check that demands a good score from a tiny network, listed in the package guide):
``predict``, ``predict_proba`` and ``score`` take series of the kind ``fit`` took (full
series, the same number of time points) and look only at their first ``earliness``
fraction, so cross-validation and pipelines score what the estimator is for. Observed
prefixes (shorter series, e.g. from a stream) go to ``predict_partial`` /
``predict_proba_partial``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_array
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_consistent_length, column_or_1d

from lc_timeseries_kd.config import METHODS, GDPDConfig, TrainConfig
from lc_timeseries_kd.data import check_earliness, prefix_view, resample, stratified_split
from lc_timeseries_kd.training import predict_proba, train_student, train_teacher

__all__ = ["PartialSeriesClassifier"]


def _is_ragged(X: Any) -> bool:
    """A list/tuple of series whose shapes differ (cannot be one array)."""
    if not isinstance(X, list | tuple) or not X:
        return False
    shapes = {np.shape(s) for s in X}
    return len(shapes) > 1


def _series(X: Any) -> tuple[np.ndarray | list[np.ndarray], int | None, int]:
    """Validate series input; return ``(data, n_timepoints or None, n_channels)``.

    Equal-length input of any array-like kind becomes a float64 ``[n, C, T]`` array
    (``[n, T]`` is one channel). A list of series of different lengths stays a list
    of ``[C, T_i]`` arrays (``n_timepoints`` is then ``None``). Complex, sparse,
    non-numeric, empty or non-finite input raises.
    """
    if _is_ragged(X):
        out = []
        for i, s in enumerate(X):
            a = np.asarray(s)
            if np.iscomplexobj(a):
                raise ValueError("Complex data not supported")
            a = check_array(np.atleast_2d(a), dtype=np.float64, input_name=f"X[{i}]")
            out.append(a)
        channels = {a.shape[0] for a in out}
        if len(channels) != 1:
            raise ValueError(f"all series must have the same number of channels, got {channels}")
        return out, None, channels.pop()
    arr = check_array(X, dtype=np.float64, allow_nd=True, ensure_min_samples=1)
    if arr.ndim == 2:
        arr = arr[:, None, :]
    if arr.ndim != 3:
        raise ValueError(
            f"X must have shape [n, time points] or [n, channels, time points], got {arr.shape}"
        )
    if arr.shape[2] < 1:
        raise ValueError(f"X has 0 time points (shape={arr.shape})")
    return arr, int(arr.shape[2]), int(arr.shape[1])


class PartialSeriesClassifier(ClassifierMixin, BaseEstimator):  # type: ignore[misc]
    """Classify a series from its first ``earliness`` fraction (teacher -> student KD).

    ``fit`` takes *full* training series: it trains a teacher on them and a student on
    their prefix views (the first ``earliness`` fraction, re-stretched to ``length``
    points) with the chosen distillation ``method``.

    ``predict`` / ``predict_proba`` / ``score`` take full series like ``fit`` (the same
    number of time points and channels; anything else raises) and use only their first
    ``earliness`` fraction, exactly as in training: scikit-learn's cross-validation,
    grid search and pipelines therefore score the partial-series task. To classify
    series that are already cut short (observed prefixes, any length), call
    ``predict_partial`` / ``predict_proba_partial``.

    Input: ``[n, T]`` (one channel) or ``[n, channels, T]`` arrays or array-likes, or a
    list of ``[channels, T_i]`` series of different lengths (each is then treated as a
    full series of its own length). Labels: 1-D, any hashable type; a column vector is
    accepted with a ``DataConversionWarning``; continuous targets are refused.

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
        n_features_in_: time points per channel of the training series (absent when
            they had different lengths).
        n_timepoints_: the same, or ``None`` for series of different lengths.
        n_channels_: channels of the training series.
        teacher_: the trained full-series teacher.
        student_: the trained partial-series student (used for prediction).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(40, 1, 50)); y = np.repeat(["a", "b"], 20)
        >>> X[y == "b", 0, :10] += 2.0
        >>> clf = PartialSeriesClassifier(earliness=0.4, epochs=6, warmup_epochs=2,
        ...                               widths=(8, 16, 8)).fit(X, y)
        >>> clf.predict_proba(X[:3]).shape  # full series: the first 40 % is used
        (3, 2)
        >>> clf.predict_proba_partial(X[:3, :, :20]).shape  # already-cut prefixes
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
            X: full series, ``[n, channels, T]`` / ``[n, T]`` array-like or a list of
                ``[channels, T_i]`` arrays (unequal lengths are resampled).
            y: ``[n]`` class labels (any hashable type; at least two classes).

        Returns:
            self.

        Raises:
            ValueError: invalid settings, complex / non-finite / empty input, a
                continuous target, fewer than two classes, or mismatched lengths.
        """
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        e = check_earliness(self.earliness)
        cfg = self._config()
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None"
            )
        data, n_t, n_c = _series(X)
        y_arr = column_or_1d(y, warn=True)
        check_consistent_length(data, y_arr)
        check_classification_targets(y_arr)
        self.classes_, y_ids = np.unique(y_arr, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                f"got 1 class ({self.classes_[0]!r}); a classifier needs at least two classes"
            )
        for attr in ("n_features_in_", "teacher_", "student_"):
            if hasattr(self, attr):
                delattr(self, attr)
        x = resample(data, cfg.length)
        self.mean_ = x.mean(axis=(0, 2), keepdims=True)
        self.std_ = x.std(axis=(0, 2), keepdims=True) + 1e-6
        x = ((x - self.mean_) / self.std_).astype(np.float32)
        tr, va = stratified_split(y_ids, cfg.val_fraction, self.seed)
        if len(va) == 0:
            raise ValueError(
                f"too few series ({len(y_ids)}) to hold out a validation split of "
                f"val_fraction={cfg.val_fraction}"
            )
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
        self.n_channels_ = n_c
        self.n_timepoints_ = n_t
        if n_t is not None:
            self.n_features_in_ = n_t
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "student_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet. Call 'fit' with "
                "appropriate arguments before using this estimator."
            )

    def _standardise(self, data: np.ndarray | list[np.ndarray], n_c: int) -> np.ndarray:
        if n_c != self.n_channels_:
            raise ValueError(
                f"X has {n_c} channels, but {type(self).__name__} is expecting "
                f"{self.n_channels_} channels as input"
            )
        x = resample(data, self.length)
        return ((x - self.mean_) / self.std_).astype(np.float32)  # type: ignore[no-any-return]

    def _full(self, X: Any) -> np.ndarray:
        """Full series like ``fit``'s, cut to the first ``earliness`` as in training."""
        self._check_fitted()
        data, n_t, n_c = _series(X)
        if self.n_timepoints_ is not None and n_t != self.n_timepoints_:
            got = "series of different lengths" if n_t is None else f"{n_t} features"
            raise ValueError(
                f"X has {got}, but {type(self).__name__} is expecting "
                f"{self.n_timepoints_} features as input (full series, as in fit; it "
                f"uses their first {self.earliness:g}). For series already cut to their "
                "observed prefix, call predict_partial / predict_proba_partial."
            )
        return prefix_view(self._standardise(data, n_c), self.earliness)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities ``[n, n_classes]`` from the first ``earliness`` of ``X``.

        Args:
            X: full series, as in ``fit`` (same time points and channels).
        """
        x = self._full(X)
        return predict_proba(self.student_, x)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels ``[n]`` from the first ``earliness`` of full series ``X``."""
        proba = self.predict_proba(X)
        return self.classes_[proba.argmax(axis=1)]  # type: ignore[no-any-return]

    def predict_proba_partial(self, X: Any) -> np.ndarray:
        """Class probabilities ``[n, n_classes]`` of observed prefixes ``X`` (any length).

        Each prefix is stretched to ``length`` points, as the student's training
        prefixes were; it should cover about ``earliness`` of its full series.
        """
        self._check_fitted()
        data, _, n_c = _series(X)
        return predict_proba(self.student_, self._standardise(data, n_c))

    def predict_partial(self, X: Any) -> np.ndarray:
        """Predicted labels ``[n]`` of observed prefixes ``X`` (any length)."""
        proba = self.predict_proba_partial(X)
        return self.classes_[proba.argmax(axis=1)]  # type: ignore[no-any-return]

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        return tags
