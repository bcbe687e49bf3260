"""PartialSeriesClassifier under scikit-learn's estimator contract."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import DataConversionWarning
from sklearn.model_selection import StratifiedKFold, cross_val_predict, cross_val_score
from sklearn.utils.estimator_checks import check_classifiers_train, check_estimator

from lc_timeseries_kd import PartialSeriesClassifier

TINY = {
    "earliness": 0.5,
    "epochs": 2,
    "warmup_epochs": 1,
    "widths": (4, 4, 4),
    "length": 8,
    "batch_size": 64,
}

#: The only checks excluded from ``check_estimator``, each with its reason. Everything
#: else in the check (fitting, shapes, errors, probabilities) is run by
#: ``test_classifiers_train_apart_from_its_accuracy_threshold``.
ACCURACY_CHECKS = {
    "check_classifiers_train": (
        "asserts accuracy > 0.83 on a blob problem after one fit; a two-epoch network "
        "of width 4 (kept tiny so the checks run in seconds) does not reach it"
    ),
}


def test_check_estimator_passes_except_the_accuracy_threshold() -> None:
    results = check_estimator(
        PartialSeriesClassifier(**TINY),
        expected_failed_checks=ACCURACY_CHECKS,
        on_fail=None,
    )
    failed = [(r["check_name"], repr(r["exception"])) for r in results if r["status"] == "failed"]
    assert failed == []
    names = {r["check_name"] for r in results}
    assert "check_n_features_in_after_fitting" in names  # the suite did run
    assert len(results) > 40


class _NoAccuracyThreshold(PartialSeriesClassifier):
    """The same estimator, tagged so that check_classifiers_train skips its score bar."""

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.classifier_tags.poor_score = True
        return tags


def test_classifiers_train_apart_from_its_accuracy_threshold() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_classifiers_train("PartialSeriesClassifier", _NoAccuracyThreshold(**TINY))


def _data(n: int = 40, t: int = 30, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 1, t))
    y = np.repeat(["a", "b"], n // 2)
    x[y == "b", 0, : t // 3] += 2.0  # the class shows in the first third
    return x, y


def test_predict_on_full_series_uses_only_their_first_earliness() -> None:
    x, y = _data()
    clf = PartialSeriesClassifier(**TINY).fit(x, y)
    full = clf.predict_proba(x)
    # earliness 0.5 of 30 points: what lies after point 16 is never observed, so
    # scrambling it must not change a single probability
    scrambled = x.copy()
    scrambled[:, :, 17:] = np.random.default_rng(1).normal(size=(40, 1, 13)) * 50
    np.testing.assert_array_equal(clf.predict_proba(scrambled), full)
    assert clf.score(scrambled, y) == clf.score(x, y)
    # observed prefixes go to predict_partial: with length == T it is the same input
    same = PartialSeriesClassifier(**{**TINY, "length": 30}).fit(x, y)
    np.testing.assert_allclose(
        same.predict_proba(x), same.predict_proba_partial(x[:, :, :15]), rtol=1e-4, atol=1e-5
    )


def test_predict_refuses_series_of_another_length() -> None:
    x, y = _data()
    clf = PartialSeriesClassifier(**TINY).fit(x, y)
    with pytest.raises(ValueError, match=r"X has 15 features, but .* expecting 30 features"):
        clf.predict(x[:, :, :15])
    with pytest.raises(ValueError, match="predict_partial"):
        clf.score(x[:, :, :20], y)
    with pytest.raises(ValueError, match="channels"):
        clf.predict(np.repeat(x, 2, axis=1))


def test_cross_validation_scores_the_prefix_task() -> None:
    # with length == T (no resampling), cutting a full series to its first half and
    # stretching it back is exactly what predict_partial does with the observed half:
    # cross-validated probabilities must be those of the observed prefixes
    x, y = _data(n=48)
    cfg = {**TINY, "length": 30}
    folds = list(StratifiedKFold(2, shuffle=True, random_state=0).split(x, y))
    got = cross_val_predict(PartialSeriesClassifier(**cfg), x, y, cv=folds, method="predict_proba")
    for tr, te in folds:
        fitted = PartialSeriesClassifier(**cfg).fit(x[tr], y[tr])
        want = fitted.predict_proba_partial(x[te][:, :, :15])
        np.testing.assert_allclose(got[te], want, rtol=1e-4, atol=1e-5)
    scores = cross_val_score(PartialSeriesClassifier(**cfg), x, y, cv=folds)
    for (tr, te), score in zip(folds, scores, strict=True):
        fitted = PartialSeriesClassifier(**cfg).fit(x[tr], y[tr])
        assert score == np.mean(fitted.predict_partial(x[te][:, :, :15]) == y[te])


def test_input_validation() -> None:
    x, y = _data()
    clf = PartialSeriesClassifier(**TINY)
    with pytest.raises(ValueError, match="Complex"):
        clf.fit(x.astype(np.complex128), y)
    with pytest.raises(ValueError, match="Complex"):
        clf.fit([s.astype(np.complex128)[:, : 20 + i % 3] for i, s in enumerate(x)], y)
    with pytest.raises(ValueError, match="Unknown label type"):
        clf.fit(x, np.linspace(0.0, 1.0, len(y)))
    with pytest.raises(ValueError, match="y is None"):
        clf.fit(x, None)
    with pytest.raises(ValueError, match="1 class"):
        clf.fit(x, np.zeros(len(y)))
    fitted = PartialSeriesClassifier(**TINY).fit(x[:, 0, :], y)
    assert fitted.n_features_in_ == 30
    assert fitted.n_channels_ == 1
    # a column vector y is taken (with scikit-learn's warning) and gives the same model
    with pytest.warns(DataConversionWarning):
        col = PartialSeriesClassifier(**TINY).fit(x[:, 0, :], y[:, None])
    np.testing.assert_allclose(col.predict_proba(x[:, 0, :]), fitted.predict_proba(x[:, 0, :]))
    # nested lists are array-likes like any other
    lst = PartialSeriesClassifier(**TINY).fit(x[:, 0, :].tolist(), y.tolist())
    np.testing.assert_allclose(
        lst.predict_proba(x[:, 0, :].tolist()), fitted.predict_proba(x[:, 0, :])
    )


def test_series_of_different_lengths_are_cut_each_to_its_earliness() -> None:
    x, y = _data()
    ragged = [s[:, : 24 + (i % 7)] for i, s in enumerate(x)]
    clf = PartialSeriesClassifier(**TINY).fit(ragged, y)
    assert clf.n_timepoints_ is None
    assert not hasattr(clf, "n_features_in_")
    # each series' first half is observed: changing what follows changes nothing
    tails = [
        np.concatenate([s[:, : s.shape[1] // 2 + 2], 50 + s[:, s.shape[1] // 2 + 2 :]], 1)
        for s in ragged
    ]
    np.testing.assert_array_equal(clf.predict_proba(tails), clf.predict_proba(ragged))
