"""The noise model of multi-agent chunking: fit it to pilot runs, then plan the chunk size.

Model (our parametrisation of the three-noise decomposition of arXiv 2506.16411). A
document of ``L`` units (tokens) is read by ``k`` workers, each reading ``l = L / k``
units. Errors are treated as independent hazards, so accuracy is ``A = exp(-eta)`` with
total noise

    eta(L, k) = delta + k * a * (l / s) ** beta + gamma * (k - 1)

- ``a * (l / s) ** beta`` is the *model noise* of one reader of ``l`` units (``s`` is a
  fixed length scale that keeps numbers well conditioned). The paper's central
  observation is that this confusion grows superlinearly with input length
  (``beta > 1``). Summed over ``k`` readers it is ``a * L**beta * s**-beta * k**(1-beta)``:
  chunking lowers total model noise only when ``beta > 1``; with ``beta <= 1`` it never helps.
- ``gamma * (k - 1)`` is the noise added per extra partial result: the *aggregator noise*
  of merging ``k`` replies plus the *task noise* of cutting the document at ``k - 1``
  boundaries. Both grow with the number of pieces, so accuracy data alone cannot tell
  them apart; we fit their sum.
- ``delta`` is noise present at any length (answer format, the task's own difficulty).

For ``beta > 1`` and ``gamma > 0`` the best chunk length does not depend on ``L``:
``l* = s * (gamma / (a * (beta - 1))) ** (1 / beta)`` (set ``d eta / d l = 0``).

Fitting: binomial maximum likelihood on pilot counts. For fixed ``beta`` the negative
log-likelihood is convex in ``(delta, a, gamma) >= 0`` (``eta`` is linear in them and
``-log(1 - exp(-eta))`` is convex), so a projected Newton method finds the optimum; ``beta``
is profiled on a grid and refined by golden-section search. numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

_EPS = 1e-10


@dataclass(frozen=True)
class PilotResult:
    """Accuracy of chunk-and-aggregate at one chunk size on labelled items.

    Attributes:
        chunk_size: most units (tokens) per worker in this run.
        doc_length: document length in the same units (mean over the items).
        correct: items answered correctly.
        total: items tried (``>= 1``).
        n_workers: workers per document; default ``ceil(doc_length / chunk_size)``
            (pass it when chunks overlap).
    """

    chunk_size: int
    doc_length: float
    correct: int
    total: int
    n_workers: int | None = None

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise ValueError(f"chunk_size={self.chunk_size} is invalid: must be >= 1")
        if not self.doc_length > 0:
            raise ValueError(f"doc_length={self.doc_length} is invalid: must be > 0")
        if self.total < 1:
            raise ValueError(f"total={self.total} is invalid: must be >= 1")
        if not 0 <= self.correct <= self.total:
            raise ValueError(
                f"correct={self.correct} is invalid: must be in [0, total={self.total}]"
            )
        if self.n_workers is not None and self.n_workers < 1:
            raise ValueError(f"n_workers={self.n_workers} is invalid: must be >= 1")

    @property
    def workers(self) -> int:
        """Workers per document (given, or ``ceil(doc_length / chunk_size)``)."""
        if self.n_workers is not None:
            return self.n_workers
        return max(1, math.ceil(self.doc_length / self.chunk_size - 1e-9))

    @property
    def accuracy(self) -> float:
        """``correct / total``."""
        return self.correct / self.total


@dataclass(frozen=True)
class NoiseModel:
    """Predicted accuracy of chunk-and-aggregate, ``exp(-eta(L, k))`` (see the module docstring).

    Attributes:
        model_noise: ``a``, the model noise of one reader of ``length_scale`` units (>= 0).
        growth: ``beta``, how model noise grows with input length (>= 0; > 1 superlinear).
        aggregator_noise: ``gamma``, noise per extra partial result (aggregator + task noise).
        base_noise: ``delta``, noise at any length.
        length_scale: ``s``, the unit of length of ``model_noise`` (tokens).

    Examples:
        >>> m = NoiseModel(model_noise=0.5, growth=2.0, aggregator_noise=0.02, length_scale=1000)
        >>> round(float(m.accuracy(4000, 1)), 4), round(float(m.accuracy(4000, 8)), 4)
        (0.0003, 0.3198)
        >>> round(m.optimal_chunk_length)
        200
    """

    model_noise: float
    growth: float
    aggregator_noise: float
    base_noise: float = 0.0
    length_scale: float = 1000.0

    def __post_init__(self) -> None:
        for name in ("model_noise", "growth", "aggregator_noise", "base_noise"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}={value} is invalid: must be finite and >= 0")
        if not (math.isfinite(self.length_scale) and self.length_scale > 0):
            raise ValueError(f"length_scale={self.length_scale} is invalid: must be > 0")

    def reader_noise(self, length: float | np.ndarray) -> np.ndarray:
        """Model noise of one worker reading ``length`` units: ``a * (length / s) ** beta``."""
        x = np.asarray(length, dtype=float) / self.length_scale
        return self.model_noise * np.power(x, self.growth)

    def noise(self, doc_length: float | np.ndarray, n_workers: float | np.ndarray) -> np.ndarray:
        """Total noise ``eta`` for ``n_workers`` balanced chunks of a ``doc_length`` document."""
        k = np.asarray(n_workers, dtype=float)
        if np.any(k < 1):
            raise ValueError("n_workers must be >= 1")
        length = np.asarray(doc_length, dtype=float)
        return (
            self.base_noise + k * self.reader_noise(length / k) + self.aggregator_noise * (k - 1.0)
        )

    def accuracy(self, doc_length: float | np.ndarray, n_workers: float | np.ndarray) -> np.ndarray:
        """Predicted accuracy ``exp(-eta)`` in [0, 1]."""
        return np.exp(-self.noise(doc_length, n_workers))

    @property
    def superlinear(self) -> bool:
        """Whether model noise grows faster than input length (``beta > 1``): chunking can help."""
        return self.growth > 1.0

    @property
    def characteristic_length(self) -> float:
        """Length at which one reader's model noise is 1 (accuracy ``e**-1`` from it alone)."""
        if self.model_noise == 0 or self.growth == 0:
            return math.inf
        log_length = math.log(self.length_scale) - math.log(self.model_noise) / self.growth
        return math.exp(log_length) if log_length < 700 else math.inf

    @property
    def optimal_chunk_length(self) -> float:
        """``l* = s (gamma / (a (beta - 1)))**(1/beta)``; ``inf`` when chunking never helps.

        With ``beta > 1`` and ``gamma == 0`` smaller chunks are always better (returns 0).
        """
        if self.growth <= 1.0 or self.model_noise == 0:
            return math.inf
        if self.aggregator_noise == 0:
            return 0.0
        ratio = self.aggregator_noise / (self.model_noise * (self.growth - 1.0))
        return self.length_scale * ratio ** (1.0 / self.growth)


@dataclass(frozen=True)
class NoiseFit:
    """A fitted :class:`NoiseModel` with the fit's diagnostics.

    Attributes:
        model: the maximum-likelihood model.
        log_likelihood: binomial log-likelihood at the optimum (constant terms dropped).
        n_points: pilot results used.
        growth_grid: the ``beta`` values of the profile likelihood.
        profile: the best negative log-likelihood at each ``beta`` of ``growth_grid``.
    """

    model: NoiseModel
    log_likelihood: float
    n_points: int
    growth_grid: tuple[float, ...] = field(repr=False)
    profile: tuple[float, ...] = field(repr=False)


def _nll(eta: np.ndarray, s: np.ndarray, f: np.ndarray) -> float:
    eta = np.maximum(eta, _EPS)
    return float(np.sum(s * eta) - np.sum(f * np.log(-np.expm1(-eta))))


def _fit_linear(
    x: np.ndarray, s: np.ndarray, f: np.ndarray, theta0: np.ndarray, iterations: int = 100
) -> tuple[np.ndarray, float]:
    """Minimise the binomial NLL over ``theta >= 0`` where ``eta = x @ theta`` (projected Newton)."""
    theta = np.maximum(theta0, 1e-3)
    value = _nll(x @ theta, s, f)
    for _ in range(iterations):
        eta = np.maximum(x @ theta, _EPS)
        d1 = s - f * np.exp(-eta) / -np.expm1(-eta)  # s - f / (e**eta - 1), overflow-free
        d2 = f * np.exp(-eta) / np.expm1(-eta) ** 2
        grad = x.T @ d1
        free = (theta > 0) | (grad < 0)
        if not free.any():
            break
        hess = x[:, free].T @ (d2[:, None] * x[:, free])
        hess = hess + 1e-12 * np.trace(hess) * np.eye(hess.shape[0])
        step = np.zeros_like(theta)
        step[free] = -np.linalg.lstsq(hess, grad[free], rcond=None)[0]
        if float(grad @ step) >= 0:  # not a descent direction: fall back to the gradient
            step = np.where(free, -grad, 0.0)
        t, improved = 1.0, False
        for _ in range(40):
            candidate = np.maximum(theta + t * step, 0.0)
            new_value = _nll(x @ candidate, s, f)
            if new_value < value - 1e-13 * max(1.0, abs(value)):
                improved = True
                break
            t *= 0.5
        if not improved:
            break
        converged = value - new_value < 1e-11 * max(1.0, abs(value))
        theta, value = candidate, new_value
        if converged:
            break
    return theta, value


def _design(
    growth: float, length: np.ndarray, k: np.ndarray, scale: float, base: bool
) -> np.ndarray:
    cols = [k * np.power(length / k / scale, growth), k - 1.0]
    if base:
        cols.insert(0, np.ones_like(k))
    return np.stack(cols, axis=1)


def fit_noise_model(
    pilots: Iterable[PilotResult],
    *,
    growth_bounds: tuple[float, float] = (0.0, 6.0),
    fit_base_noise: bool = True,
    length_scale: float | None = None,
    grid_size: int = 241,
) -> NoiseFit:
    """Fit the noise model to pilot accuracies by binomial maximum likelihood.

    Pilots at 3 or more different worker counts are needed (4 or more with
    ``fit_base_noise``) for every parameter to be identified; a single-pass run
    (``chunk_size >= doc_length``) is a useful pilot. Pilots may come from different
    document lengths.

    Args:
        pilots: accuracies at several chunk sizes (and/or document lengths).
        growth_bounds: search range of ``beta``.
        fit_base_noise: also fit ``delta`` (else it is fixed at 0).
        length_scale: ``s``; default the longest chunk length among the pilots.
        grid_size: ``beta`` grid points of the profile before golden-section refinement.

    Returns:
        The fitted model and its diagnostics.

    Examples:
        >>> true = NoiseModel(0.4, 2.0, 0.03, base_noise=0.05, length_scale=1000)
        >>> pilots = [PilotResult(c, 4000, round(1e6 * float(true.accuracy(4000, 4000 // c))), 10**6)
        ...           for c in (4000, 2000, 1000, 500, 250, 125)]
        >>> round(fit_noise_model(pilots, length_scale=1000).model.growth, 2)
        2.0
    """
    pilots = list(pilots)
    if not pilots:
        raise ValueError("fit_noise_model needs at least one pilot result")
    lo, hi = growth_bounds
    if not (0 <= lo < hi):
        raise ValueError(f"growth_bounds={growth_bounds} is invalid: need 0 <= low < high")
    if grid_size < 3:
        raise ValueError(f"grid_size={grid_size} is invalid: must be >= 3")
    length = np.array([p.doc_length for p in pilots], dtype=float)
    k = np.array([p.workers for p in pilots], dtype=float)
    s = np.array([p.correct for p in pilots], dtype=float)
    f = np.array([p.total - p.correct for p in pilots], dtype=float)
    scale = float(length_scale) if length_scale is not None else float(np.max(length / k))
    if not scale > 0:
        raise ValueError(f"length_scale={length_scale} is invalid: must be > 0")
    # Starting point: least squares on -log(accuracy), kept positive.
    y = -np.log(np.clip((s + 0.5) / (s + f + 1.0), 1e-6, 1 - 1e-6))

    def solve(growth: float) -> tuple[np.ndarray, float]:
        x = _design(growth, length, k, scale, fit_base_noise)
        theta0 = np.maximum(np.linalg.lstsq(x, y, rcond=None)[0], 1e-3)
        return _fit_linear(x, s, f, theta0)

    grid = np.linspace(lo, hi, grid_size)
    profile = np.array([solve(float(b))[1] for b in grid])
    i = int(np.argmin(profile))
    a, b = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, grid_size - 1)])
    golden = (math.sqrt(5) - 1) / 2
    c, d = b - golden * (b - a), a + golden * (b - a)
    fc, fd = solve(c)[1], solve(d)[1]
    for _ in range(40):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - golden * (b - a)
            fc = solve(c)[1]
        else:
            a, c, fc = c, d, fd
            d = a + golden * (b - a)
            fd = solve(d)[1]
    candidates = [(float(profile[i]), float(grid[i])), (fc, c), (fd, d)]
    _, growth = min(candidates)
    theta, value = solve(growth)
    if fit_base_noise:
        base, model_noise, aggregator = (float(v) for v in theta)
    else:
        base, (model_noise, aggregator) = 0.0, (float(v) for v in theta)
    model = NoiseModel(
        model_noise=model_noise,
        growth=float(growth),
        aggregator_noise=aggregator,
        base_noise=base,
        length_scale=scale,
    )
    return NoiseFit(
        model, -value, len(pilots), tuple(float(g) for g in grid), tuple(float(p) for p in profile)
    )


@dataclass(frozen=True)
class ChunkingRecommendation:
    """What the planner advises for one document length.

    Attributes:
        chunk: ``False`` means "do not chunk": read the document in one pass.
        chunk_size: units per worker to configure (``doc_length`` when not chunking).
        n_workers: number of workers this gives.
        predicted_accuracy: the model's accuracy at the recommendation.
        single_pass_accuracy: the model's accuracy in one pass (``None`` if the document
            does not fit ``max_chunk_size``).
        curve: ``(n_workers, chunk_size, predicted accuracy)`` for every candidate.
        reason: one sentence explaining the choice.
    """

    chunk: bool
    chunk_size: int
    n_workers: int
    predicted_accuracy: float
    single_pass_accuracy: float | None
    curve: tuple[tuple[int, int, float], ...]
    reason: str


def recommend_chunking(
    model: NoiseModel,
    doc_length: int,
    *,
    chunk_sizes: Sequence[int] | None = None,
    max_chunk_size: int | None = None,
    min_chunk_size: int = 1,
    max_workers: int = 4096,
    min_gain: float = 0.0,
) -> ChunkingRecommendation:
    """Recommend a chunk size for a ``doc_length``-unit document, or no chunking.

    Candidates are the given ``chunk_sizes`` or every worker count from
    ``ceil(doc_length / max_chunk_size)`` to ``doc_length // min_chunk_size`` (at most
    ``max_workers``). The candidate with the highest predicted accuracy wins; ties go to
    fewer workers. Chunking is advised only if it beats the single pass by more than
    ``min_gain`` (absolute accuracy) or if the document does not fit ``max_chunk_size``.

    Args:
        model: a fitted :class:`NoiseModel`.
        doc_length: the document's length in units (tokens), ``>= 1``.
        chunk_sizes: candidate chunk sizes (units per worker).
        max_chunk_size: the most a worker can read (the window minus the prompt).
        min_chunk_size: smallest chunk considered when no candidates are given.
        max_workers: largest worker count considered when no candidates are given.
        min_gain: accuracy chunking must add over a single pass to be advised.

    Returns:
        The recommendation and the predicted curve.

    Examples:
        >>> m = NoiseModel(model_noise=0.5, growth=2.0, aggregator_noise=0.02, length_scale=1000)
        >>> rec = recommend_chunking(m, 4000)
        >>> rec.chunk, rec.chunk_size, rec.n_workers
        (True, 200, 20)
    """
    if doc_length < 1:
        raise ValueError(f"doc_length={doc_length} is invalid: must be >= 1")
    if max_chunk_size is not None and max_chunk_size < 1:
        raise ValueError(f"max_chunk_size={max_chunk_size} is invalid: must be >= 1")
    if min_chunk_size < 1:
        raise ValueError(f"min_chunk_size={min_chunk_size} is invalid: must be >= 1")
    if min_gain < 0:
        raise ValueError(f"min_gain={min_gain} is invalid: must be >= 0")
    if chunk_sizes is not None:
        if not chunk_sizes or any(c < 1 for c in chunk_sizes):
            raise ValueError(f"chunk_sizes={chunk_sizes!r} is invalid: need positive sizes")
        by_k: dict[int, int] = {}
        for c in sorted(chunk_sizes, reverse=True):
            if max_chunk_size is not None and c > max_chunk_size:
                continue
            by_k.setdefault(max(1, math.ceil(doc_length / c)), min(c, doc_length))
        if not by_k:
            raise ValueError(
                f"no chunk size in {list(chunk_sizes)} is <= max_chunk_size={max_chunk_size}"
            )
        ks = np.array(sorted(by_k), dtype=int)
        sizes = np.array([by_k[int(kk)] for kk in ks], dtype=int)
    else:
        k_min = 1 if max_chunk_size is None else max(1, math.ceil(doc_length / max_chunk_size))
        k_max = max(k_min, min(max_workers, doc_length // min_chunk_size))
        ks = np.arange(k_min, k_max + 1)
        sizes = np.ceil(doc_length / ks).astype(int)
    acc = model.accuracy(float(doc_length), ks.astype(float))
    best = int(np.flatnonzero(acc >= acc.max() - 1e-12)[0])
    single = float(acc[0]) if ks[0] == 1 else None
    curve = tuple((int(kk), int(cc), float(a)) for kk, cc, a in zip(ks, sizes, acc))
    k_best, size_best, acc_best = int(ks[best]), int(sizes[best]), float(acc[best])
    if single is None:
        reason = (
            f"the document ({doc_length}) does not fit max_chunk_size={max_chunk_size}; "
            f"{k_best} workers of {size_best} predict accuracy {acc_best:.3f}"
        )
        return ChunkingRecommendation(True, size_best, k_best, acc_best, None, curve, reason)
    if k_best == 1 or acc_best - single <= min_gain:
        why = (
            "model noise does not grow superlinearly with length (beta <= 1)"
            if not model.superlinear
            else f"the best chunking gains {acc_best - single:.3f} <= min_gain={min_gain}"
        )
        return ChunkingRecommendation(
            False, doc_length, 1, single, single, curve, f"read in one pass: {why}"
        )
    reason = (
        f"{k_best} workers of {size_best} predict accuracy {acc_best:.3f} "
        f"vs {single:.3f} in one pass"
    )
    return ChunkingRecommendation(True, size_best, k_best, acc_best, single, curve, reason)
