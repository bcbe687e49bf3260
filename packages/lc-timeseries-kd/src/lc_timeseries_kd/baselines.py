"""Non-distillation baselines from aeon, trained directly on the observed prefixes.

These answer the question a practitioner asks first: does a strong off-the-shelf
time-series classifier, trained on the same partial series the student sees, already
do as well? Each baseline takes prefix views ``[n, channels, L]`` (the same arrays the
students get) and returns class probabilities, so it is scored with the same metrics.

* ``minirocket_lr``: aeon's MiniRocket transform (about 10k features), standardised,
  then scikit-learn's logistic regression (probabilities from the model).
* ``minirocket_ridge``: the same features with ``RidgeClassifierCV`` (the classifier
  MiniRocket's authors use); probabilities are the softmax of its decision values.
* ``quant``: aeon's ``QUANTClassifier`` (quantiles over dyadic intervals + extra trees).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["BASELINES", "fit_predict_baseline"]

#: Names of the aeon baselines accepted by :func:`fit_predict_baseline`.
BASELINES: tuple[str, ...] = ("minirocket_lr", "minirocket_ridge", "quant")


def _softmax(z: NDArray[np.float64]) -> NDArray[np.float64]:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    out: NDArray[np.float64] = e / e.sum(axis=1, keepdims=True)
    return out


def _columns(proba: NDArray[np.float64], seen: NDArray[Any], n_classes: int) -> NDArray:
    """Place the columns of the classes a model saw into ``[n, n_classes]``."""
    out = np.zeros((proba.shape[0], n_classes))
    out[:, np.asarray(seen, dtype=np.int64)] = proba
    return out


def fit_predict_baseline(
    name: str,
    x_train: NDArray[np.floating],
    y_train: NDArray[np.integer],
    x_test: NDArray[np.floating],
    n_classes: int,
    seed: int,
) -> NDArray[np.float64]:
    """Fit one aeon baseline on ``(x_train, y_train)`` and return test probabilities.

    Args:
        name: one of :data:`BASELINES`.
        x_train: training prefixes ``[n, channels, L]``.
        y_train: class ids ``[n]`` in ``0 .. n_classes - 1``.
        x_test: test prefixes ``[m, channels, L]``.
        n_classes: number of classes (columns of the result).
        seed: seeds MiniRocket's kernels / QUANT's trees.

    Returns:
        ``[m, n_classes]`` probabilities (rows sum to 1).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(20, 1, 30)); y = np.repeat([0, 1], 10); x[y == 1] += 1
        >>> fit_predict_baseline("quant", x, y, x[:2], 2, seed=0).shape
        (2, 2)
    """
    if name not in BASELINES:
        raise ValueError(f"unknown baseline {name!r}; choose from {', '.join(BASELINES)}")
    x = np.ascontiguousarray(x_train, dtype=np.float64)
    xt = np.ascontiguousarray(x_test, dtype=np.float64)
    y = np.asarray(y_train, dtype=np.int64)
    if x.ndim != 3 or xt.ndim != 3 or x.shape[1:] != xt.shape[1:]:
        raise ValueError(
            f"x_train and x_test must be [n, channels, L] of equal channels and L, "
            f"got {x.shape} and {xt.shape}"
        )
    if name == "quant":
        from aeon.classification.interval_based import QUANTClassifier

        clf = QUANTClassifier(random_state=seed).fit(x, y)
        return _columns(np.asarray(clf.predict_proba(xt), float), clf.classes_, n_classes)

    from aeon.transformations.collection.convolution_based import MiniRocket
    from sklearn.linear_model import LogisticRegression, RidgeClassifierCV
    from sklearn.preprocessing import StandardScaler

    rocket = MiniRocket(random_state=seed).fit(x)
    scaler = StandardScaler()
    f = scaler.fit_transform(rocket.transform(x))
    ft = scaler.transform(rocket.transform(xt))
    if name == "minirocket_lr":
        lr = LogisticRegression(max_iter=1000).fit(f, y)
        return _columns(lr.predict_proba(ft), lr.classes_, n_classes)
    ridge = RidgeClassifierCV(alphas=np.logspace(-3, 3, 10)).fit(f, y)
    z = np.asarray(ridge.decision_function(ft), dtype=np.float64)
    if z.ndim == 1:  # binary: one decision value, positive for classes_[1]
        z = np.stack([-z, z], axis=1)
    return _columns(_softmax(z), ridge.classes_, n_classes)
