"""Bundled UCR/UEA datasets, fixed-length resampling, prefix views and splits.

Everything here works offline: the datasets come from the files that ship inside the
``aeon`` wheel, and a name that is not bundled raises instead of downloading.

Series are arrays of shape ``[n_series, n_channels, length]`` (float32); labels are
integer class ids ``[n_series]`` in ``0 .. n_classes - 1``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "PAPER_EARLINESS",
    "PartialSeriesDataset",
    "bundled_datasets",
    "check_earliness",
    "is_classification_file",
    "load_bundled",
    "prefix_length",
    "prefix_view",
    "prepare_dataset",
    "resample",
    "stratified_split",
]

#: Earliness values (fraction of the series observed) evaluated in the paper.
PAPER_EARLINESS: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)

FloatArray = NDArray[np.float32]
IntArray = NDArray[np.int64]


def _data_dir() -> Path:
    """Directory of the datasets bundled in the installed ``aeon`` wheel."""
    import aeon  # local import: aeon is heavy and only the loader needs it

    return Path(aeon.__file__).parent / "datasets" / "data"


def bundled_datasets() -> list[str]:
    """Names of the classification datasets shipped inside the ``aeon`` wheel.

    A dataset counts as bundled when both ``<name>_TRAIN.ts`` and ``<name>_TEST.ts``
    are present, so loading it never touches the network. Only classification problems
    are listed: the header of the training file must declare class labels
    (``@classLabel true ...``); aeon's regression sets (``@targetLabel true``, such as
    CardanoSentiment and Covid3Month) are left out.

    Returns:
        Sorted dataset names, e.g. ``["ACSF1", "ArrowHead", "BasicMotions", ...]``.

    Example:
        >>> "GunPoint" in bundled_datasets()
        True
    """
    root = _data_dir()
    if not root.is_dir():
        return []
    names = [
        d.name
        for d in root.iterdir()
        if d.is_dir()
        and d.name != "UnitTest"
        and (d / f"{d.name}_TRAIN.ts").is_file()
        and (d / f"{d.name}_TEST.ts").is_file()
        and is_classification_file(d / f"{d.name}_TRAIN.ts")
    ]
    return sorted(names)


def is_classification_file(path: str | Path) -> bool:
    """Whether a ``.ts`` file's header declares class labels (``@classLabel true``).

    Reads the header only (up to ``@data``). Regression files declare
    ``@targetLabel true`` instead; a file with neither is not a classification problem.

    Example:
        >>> import tempfile, pathlib
        >>> f = pathlib.Path(tempfile.mkdtemp()) / "x.ts"
        >>> _ = f.write_text("@problemName x\\n@targetLabel true\\n@data\\n1,2:0.5\\n")
        >>> is_classification_file(f)
        False
    """
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            words = line.strip().lower().split()
            if not words:
                continue
            if words[0] == "@data":
                return False
            if words[0] == "@classlabel":
                return len(words) > 1 and words[1] == "true"
    return False


def _as_list(x: object) -> list[NDArray[np.float64]]:
    """Series as a list of ``[channels, length_i]`` float arrays (lengths may differ)."""
    if isinstance(x, np.ndarray):
        if x.ndim == 2:  # [n, length] univariate
            x = x[:, None, :]
        if x.ndim != 3:
            raise ValueError(
                f"series array must have shape [n, channels, length] or [n, length], got {x.shape}"
            )
        return [np.asarray(s, dtype=np.float64) for s in x]
    if isinstance(x, Sequence):
        out = []
        for i, s in enumerate(x):
            a = np.asarray(s, dtype=np.float64)
            if a.ndim == 1:
                a = a[None, :]
            if a.ndim != 2:
                raise ValueError(f"series {i} must have shape [channels, length], got {a.shape}")
            out.append(a)
        return out
    raise TypeError(f"series must be a numpy array or a list of arrays, got {type(x).__name__}")


def load_bundled(
    name: str,
) -> tuple[list[FloatArray], NDArray[np.str_], list[FloatArray], NDArray[np.str_]]:
    """Load the official train/test split of a dataset bundled with ``aeon``.

    Args:
        name: dataset name as in :func:`bundled_datasets` (case-sensitive).

    Returns:
        ``(x_train, y_train, x_test, y_test)``; series are lists of ``[channels, length_i]``
        float32 arrays (lengths may differ, e.g. JapaneseVowels); labels are the raw
        string labels.

    Raises:
        ValueError: the name is not bundled (the message lists the bundled names); nothing
            is downloaded.

    Example:
        >>> x_tr, y_tr, x_te, y_te = load_bundled("GunPoint")
        >>> len(x_tr), x_tr[0].shape
        (50, (1, 150))
    """
    available = bundled_datasets()
    if name not in available:
        raise ValueError(
            f"dataset {name!r} is not bundled with the installed aeon wheel and will not be "
            f"downloaded; bundled datasets: {', '.join(available)}"
        )
    from aeon.datasets import load_from_ts_file

    root = _data_dir() / name
    out: list[object] = []
    for split in ("TRAIN", "TEST"):
        x, y = load_from_ts_file(str(root / f"{name}_{split}.ts"))
        out += [[np.asarray(s, dtype=np.float32) for s in _as_list(x)], np.asarray(y).astype(str)]
    return out[0], out[1], out[2], out[3]  # type: ignore[return-value]


def check_earliness(earliness: float) -> float:
    """Validate an earliness value (fraction of the series observed), in ``(0, 1]``.

    Example:
        >>> check_earliness(0.4)
        0.4
    """
    e = float(earliness)
    if not (0.0 < e <= 1.0) or math.isnan(e):
        raise ValueError(f"earliness must lie in (0, 1], got {earliness!r}")
    return e


def prefix_length(length: int, earliness: float) -> int:
    """Number of observed points of a length-``length`` series at ``earliness``.

    ``floor(earliness * length)`` (with a tolerance for floating error), at least 1.

    Example:
        >>> prefix_length(100, 0.2), prefix_length(24, 0.6)
        (20, 14)
    """
    e = check_earliness(earliness)
    return max(1, min(length, math.floor(e * length + 1e-9)))


def _interp(series: NDArray[np.floating], length: int) -> FloatArray:
    """Linear interpolation of ``[channels, t]`` onto ``length`` points, ends aligned."""
    c, t = series.shape
    if t == length:
        return series.astype(np.float32, copy=True)
    if t == 1:
        return np.repeat(series, length, axis=1).astype(np.float32)
    src = np.linspace(0.0, 1.0, t)
    dst = np.linspace(0.0, 1.0, length)
    return np.stack([np.interp(dst, src, series[k]) for k in range(c)]).astype(np.float32)


def resample(x: object, length: int = 100) -> FloatArray:
    """Resample every series to ``length`` points by linear interpolation (ends aligned).

    Accepts equal- or unequal-length input, so ragged datasets (JapaneseVowels) become
    one array. Missing values are refused rather than silently filled.

    Args:
        x: ``[n, channels, t]`` / ``[n, t]`` array or a list of ``[channels, t_i]`` arrays.
        length: target number of points (>= 2).

    Returns:
        float32 array ``[n, channels, length]``.

    Raises:
        ValueError: NaN/inf values, channels that differ between series, or ``length < 2``.

    Example:
        >>> resample(np.arange(5.0)[None, None, :], 9)[0, 0, :3]
        array([0. , 0.5, 1. ], dtype=float32)
    """
    if int(length) < 2:
        raise ValueError(f"length must be >= 2, got {length}")
    series = _as_list(x)
    if not series:
        raise ValueError("no series given")
    channels = {s.shape[0] for s in series}
    if len(channels) != 1:
        raise ValueError(f"all series must have the same number of channels, got {channels}")
    for i, s in enumerate(series):
        if not np.all(np.isfinite(s)):
            raise ValueError(
                f"series {i} has missing or infinite values; impute them before fitting "
                "(this package does not fill gaps silently)"
            )
        if s.shape[1] < 1:
            raise ValueError(f"series {i} is empty")
    return np.stack([_interp(s, int(length)) for s in series])


def prefix_view(x: FloatArray, earliness: float, restretch: bool = True) -> FloatArray:
    """The first ``earliness`` fraction of each series, optionally re-stretched.

    As in the paper, the observed prefix of a length-``L`` series (``floor(e * L)``
    points) is linearly interpolated back to ``L`` points, so a student sees inputs of
    the same length as the teacher, with its content stretched in time.

    Args:
        x: ``[n, channels, L]`` array of full series.
        earliness: observed fraction in ``(0, 1]``; 1 returns a copy of ``x``.
        restretch: interpolate the prefix back to ``L`` points (default) or return the
            raw ``[n, channels, floor(e * L)]`` prefix.

    Example:
        >>> x = np.arange(10.0, dtype=np.float32)[None, None, :]
        >>> prefix_view(x, 0.5, restretch=False)[0, 0]
        array([0., 1., 2., 3., 4.], dtype=float32)
        >>> prefix_view(x, 0.5).shape
        (1, 1, 10)
    """
    if x.ndim != 3:
        raise ValueError(f"x must have shape [n, channels, length], got {x.shape}")
    length = x.shape[-1]
    k = prefix_length(length, earliness)
    prefix = np.ascontiguousarray(x[:, :, :k], dtype=np.float32)
    if not restretch or k == length:
        return prefix.copy()
    return np.stack([_interp(s, length) for s in prefix])


def stratified_split(y: IntArray, val_fraction: float, seed: int) -> tuple[IntArray, IntArray]:
    """Indices of a seeded, class-stratified train/validation split.

    Every class keeps at least one training example; classes with a single example
    stay entirely in training.

    Example:
        >>> tr, va = stratified_split(np.array([0, 0, 0, 0, 1, 1, 1, 1]), 0.25, seed=0)
        >>> len(tr), len(va)
        (6, 2)
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie in (0, 1), got {val_fraction}")
    rng = np.random.default_rng(seed)
    train, val = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_val = min(len(idx) - 1, round(val_fraction * len(idx)))
        val.append(idx[:n_val])
        train.append(idx[n_val:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(val))


@dataclass(frozen=True)
class PartialSeriesDataset:
    """A dataset ready for full-to-partial distillation (all series ``[n, C, L]``).

    Attributes:
        name: dataset name.
        classes: original label of each class id.
        x_train: full training series ``[n_train, C, L]``.
        y_train: their class ids ``[n_train]``.
        x_val: full validation series (held out from the official train split).
        y_val: their class ids.
        x_test: full test series (official test split).
        y_test: their class ids.
    """

    name: str
    classes: tuple[str, ...]
    x_train: FloatArray
    y_train: IntArray
    x_val: FloatArray
    y_val: IntArray
    x_test: FloatArray
    y_test: IntArray

    @property
    def n_channels(self) -> int:
        """Number of channels ``C``."""
        return int(self.x_train.shape[1])

    @property
    def length(self) -> int:
        """Series length ``L`` after resampling."""
        return int(self.x_train.shape[2])

    @property
    def n_classes(self) -> int:
        """Number of classes."""
        return len(self.classes)


def prepare_dataset(
    name: str, length: int = 100, val_fraction: float = 0.2, seed: int = 0
) -> PartialSeriesDataset:
    """Load a bundled dataset, resample to ``length``, standardise, split off validation.

    Channels are standardised with the mean and standard deviation of the training
    series (after resampling). The validation split is seeded and stratified.

    Example:
        >>> ds = prepare_dataset("GunPoint", length=100, seed=0)
        >>> ds.x_train.shape[1:], ds.n_classes
        ((1, 100), 2)
    """
    x_tr, y_tr, x_te, y_te = load_bundled(name)
    classes = tuple(sorted(set(y_tr.tolist()) | set(y_te.tolist()), key=_label_key))
    lookup = {c: i for i, c in enumerate(classes)}
    ytr = np.array([lookup[c] for c in y_tr], dtype=np.int64)
    yte = np.array([lookup[c] for c in y_te], dtype=np.int64)
    xtr, xte = resample(x_tr, length), resample(x_te, length)
    mean = xtr.mean(axis=(0, 2), keepdims=True)
    std = xtr.std(axis=(0, 2), keepdims=True) + 1e-6
    xtr, xte = (xtr - mean) / std, (xte - mean) / std
    tr, va = stratified_split(ytr, val_fraction, seed)
    return PartialSeriesDataset(
        name=name,
        classes=classes,
        x_train=xtr[tr].astype(np.float32),
        y_train=ytr[tr],
        x_val=xtr[va].astype(np.float32),
        y_val=ytr[va],
        x_test=xte.astype(np.float32),
        y_test=yte,
    )


def _label_key(label: str) -> tuple[int, float | str]:
    """Sort numeric labels numerically ("2" before "10"), others alphabetically."""
    try:
        return (0, float(label))
    except ValueError:
        return (1, label)
