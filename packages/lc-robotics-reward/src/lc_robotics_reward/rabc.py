r"""Reward-aligned behaviour cloning (RA-BC): sample weights from progress deltas.

For a sample at frame ``t`` of an episode with predicted normalised progress ``p``, the
reward is the progress made over the next action chunk of ``H`` frames,

.. math::  r_t = p_{\min(t + H,\, T - 1)} - p_t,

and with ``mu`` and ``sigma`` the statistics of ``r`` over the whole dataset the weight is

.. math::
    \tilde w = \mathrm{clip}\Big(\frac{r - (\mu - 2\sigma)}{4\sigma + \epsilon}, 0, 1\Big),\qquad
    w = \mathbb 1[r > \kappa] + \mathbb 1[0 \le r \le \kappa]\,\tilde w,

so a sample that makes clear progress counts fully, one that stalls counts a little and
one that undoes progress not at all. The policy loss is ``sum(w * l) / sum(w)``.

The statistics follow LeRobot's RA-BC sample weighter: ``mu = max(mean(r), 0)`` and
``sigma = max(std(r), eps)`` (population standard deviation) over the frames whose delta
is known; a frame with unknown progress (NaN, as in LeRobot's ``sarm_progress.parquet``)
gets ``fallback_weight`` (1 by default). :class:`RABCWeighter` wraps this behind the
``compute_batch_weights(batch)`` / ``get_stats()`` interface of LeRobot's
``SampleWeighter`` and reads and writes LeRobot's progress parquet.

*Filtering* keeps only the samples with ``r > kappa`` (weight 1) and drops the rest;
:func:`episode_filter` drops whole episodes whose predicted progress ends low, and its
mask can be multiplied with the weights (filter episodes, then reweight samples).

Example:
    >>> import numpy as np
    >>> r = np.array([0.2, 0.0, -0.1, 0.005])
    >>> rabc_weights(r, kappa=0.01, mu=0.05, sigma=0.1).round(3).tolist()
    [1.0, 0.375, 0.0, 0.387]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

KAPPA = 0.01  # the paper's threshold of clear progress
EPSILON = 1e-6


def progress_deltas(progress: Sequence[np.ndarray] | np.ndarray, chunk: int) -> np.ndarray:
    """Progress made over the next ``chunk`` frames, per frame, for each episode.

    Args:
        progress: one array ``[T_e]`` of normalised progress per episode (or one array).
            NaN marks a frame whose progress is unknown; its delta, and the delta of any
            frame that looks ahead to it, is NaN (see ``fallback_weight`` of
            :func:`rabc_weights`).
        chunk: look-ahead ``H`` in frames (the policy's action-chunk length); a frame
            closer than ``H`` to the end looks at the episode's last frame.

    Returns:
        ``[sum T_e]`` float64, episodes concatenated in order.

    Raises:
        ValueError: ``chunk < 1``, an empty or non-1-D episode, or an infinite value.
    """
    if chunk < 1:
        raise ValueError(f"chunk={chunk}; allowed: >= 1")
    episodes = [progress] if isinstance(progress, np.ndarray) and progress.ndim == 1 else progress
    out = []
    for i, p in enumerate(episodes):
        p = np.asarray(p, dtype=np.float64)
        if p.ndim != 1 or p.size == 0:
            raise ValueError(
                f"progress of episode {i} has shape {p.shape}; expected [T] with T >= 1"
            )
        if np.isinf(p).any():
            raise ValueError(
                f"progress of episode {i} has infinite values at frames "
                f"{np.nonzero(np.isinf(p))[0][:5].tolist()}; use NaN for unknown progress"
            )
        ahead = np.minimum(np.arange(p.size) + chunk, p.size - 1)
        out.append(p[ahead] - p)
    return np.concatenate(out)


def delta_statistics(deltas: np.ndarray, eps: float = EPSILON) -> tuple[float, float]:
    """``(mu, sigma)`` of progress deltas as RA-BC uses them.

    ``mu = max(mean, 0)`` and ``sigma = max(std, eps)`` (population standard deviation)
    over the finite deltas; ``(0, eps)`` if there is none. Clamping ``mu`` at 0 keeps a
    dataset that mostly regresses from lowering the bar for stalled frames.
    """
    r = np.asarray(deltas, dtype=np.float64)
    r = r[np.isfinite(r)]
    if r.size == 0:
        return 0.0, float(eps)
    return max(float(r.mean()), 0.0), max(float(r.std()), float(eps))


def rabc_weights(
    deltas: np.ndarray,
    kappa: float = KAPPA,
    mu: float | None = None,
    sigma: float | None = None,
    eps: float = EPSILON,
    fallback_weight: float = 1.0,
) -> np.ndarray:
    """RA-BC weights ``[N]`` in ``[0, 1]`` from progress deltas ``r [N]``.

    Args:
        deltas: progress deltas ``r`` (see :func:`progress_deltas`); NaN marks an
            unknown delta.
        kappa: threshold above which a sample gets weight 1 (paper: 0.01).
        mu: mean of ``r`` over the dataset; default: ``max(mean(deltas), 0)``.
        sigma: standard deviation of ``r`` over the dataset; default:
            ``max(std(deltas), eps)`` (see :func:`delta_statistics`).
        eps: keeps the soft weight finite when ``sigma`` is 0.
        fallback_weight: weight of a sample whose delta is NaN (LeRobot: 1).

    Raises:
        ValueError: ``deltas`` not 1-D or with infinite values; a negative ``kappa`` or
            ``sigma``; a ``fallback_weight`` outside ``[0, 1]``.
    """
    r = np.asarray(deltas, dtype=np.float64)
    if r.ndim != 1 or np.isinf(r).any():
        raise ValueError(
            f"deltas must be a 1-D array of finite values (NaN: unknown); got shape {r.shape}"
            + (" with infinite values" if r.ndim == 1 else "")
        )
    if kappa < 0:
        raise ValueError(f"kappa={kappa}; allowed: >= 0")
    if not 0.0 <= fallback_weight <= 1.0:
        raise ValueError(f"fallback_weight={fallback_weight}; allowed: 0..1")
    default_mu, default_sigma = delta_statistics(r, eps)
    mu = default_mu if mu is None else float(mu)
    sigma = default_sigma if sigma is None else float(sigma)
    if sigma < 0:
        raise ValueError(f"sigma={sigma}; allowed: >= 0")
    known = ~np.isnan(r)
    rk = np.where(known, r, 0.0)
    soft = np.clip((rk - (mu - 2.0 * sigma)) / (4.0 * sigma + eps), 0.0, 1.0)
    w = np.where(rk > kappa, 1.0, np.where(rk >= 0.0, soft, 0.0))
    return np.where(known, w, float(fallback_weight))


def rabc_filter(deltas: np.ndarray, kappa: float = KAPPA) -> np.ndarray:
    """Filtering mode: weight 1 where ``r > kappa``, else 0 (``[N]`` float64)."""
    r = np.asarray(deltas, dtype=np.float64)
    if r.ndim != 1:
        raise ValueError(f"deltas must be 1-D; got shape {r.shape}")
    return (r > kappa).astype(np.float64)


def episode_filter(
    progress: Sequence[np.ndarray], threshold: float = 0.9, tail: int = 3
) -> np.ndarray:
    """Episode-level filtering: keep episodes whose predicted progress ends high.

    Args:
        progress: normalised progress ``[T_e]`` per episode.
        threshold: keep an episode if the mean progress of its last ``tail`` frames is at
            least this.
        tail: frames averaged at the end of an episode.

    Returns:
        ``[sum T_e]`` float64: 1 for every frame of a kept episode, else 0 (multiply it
        with :func:`rabc_weights` to filter episodes and reweight samples).
    """
    if not 0.0 <= threshold <= 1.0 or tail < 1:
        raise ValueError(f"threshold={threshold} (allowed 0..1), tail={tail} (allowed >= 1)")
    out = []
    for p in progress:
        p = np.asarray(p, dtype=np.float64)
        out.append(np.full(p.size, float(p[-tail:].mean() >= threshold)))
    return np.concatenate(out)


def weighted_bc_loss(per_sample_loss: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``sum(w * l) / sum(w)`` over a batch; 0 (with gradient) if every weight is 0.

    Args:
        per_sample_loss: ``[B]`` losses of the policy, one per sample.
        weights: ``[B]`` non-negative weights (all ones: vanilla BC, the plain mean).

    Example:
        >>> import torch
        >>> weighted_bc_loss(torch.tensor([1.0, 3.0]), torch.tensor([1.0, 0.0])).item()
        1.0
    """
    if per_sample_loss.shape != weights.shape or per_sample_loss.ndim != 1:
        raise ValueError(
            f"per_sample_loss {tuple(per_sample_loss.shape)} and weights "
            f"{tuple(weights.shape)} must be the same 1-D shape"
        )
    total = weights.sum()
    return (weights * per_sample_loss).sum() / total.clamp_min(EPSILON)


PROGRESS_FILE = "sarm_progress.parquet"


class RABCWeighter:
    """RA-BC sample weights looked up by global frame index, for any training loop.

    The interface is that of LeRobot's ``SampleWeighter``: :meth:`compute_batch_weights`
    takes a batch holding ``"index"`` (global frame indices ``[B]``) and returns weights
    ``[B]`` rescaled to sum to ``B`` plus a dict of statistics, and :meth:`get_stats`
    describes the whole dataset. Deltas look ``chunk_size`` frames ahead inside each
    episode (clamped at its last frame); ``mu``/``sigma`` come from every frame with a
    known delta (:func:`delta_statistics`).

    Args:
        index: global frame indices ``[N]`` (int).
        episode_index: the episode of each frame ``[N]``.
        progress: normalised progress ``[N]``; NaN for frames without a prediction.
        chunk_size: look-ahead ``H`` in frames (LeRobot's default is 50).
        kappa: threshold of clear progress, as in :func:`rabc_weights`.
        epsilon: ``eps`` of :func:`rabc_weights`.
        fallback_weight: weight of frames with unknown delta, as in :func:`rabc_weights`.

    Example:
        >>> import numpy as np
        >>> w = RABCWeighter(np.arange(4), np.zeros(4), np.array([0.0, 0.1, 0.1, 0.3]), 1)
        >>> w.weights_for(np.arange(4)).round(3).tolist()
        [1.0, 0.274, 1.0, 0.274]
    """

    def __init__(
        self,
        index: np.ndarray,
        episode_index: np.ndarray,
        progress: np.ndarray,
        chunk_size: int = 50,
        kappa: float = KAPPA,
        epsilon: float = EPSILON,
        fallback_weight: float = 1.0,
    ) -> None:
        index = np.asarray(index, dtype=np.int64)
        episode_index = np.asarray(episode_index, dtype=np.int64)
        progress = np.asarray(progress, dtype=np.float64)
        if not index.ndim == episode_index.ndim == progress.ndim == 1 or not (
            index.shape == episode_index.shape == progress.shape
        ):
            raise ValueError(
                f"index {index.shape}, episode_index {episode_index.shape} and progress "
                f"{progress.shape} must be 1-D of one length"
            )
        if np.unique(index).size != index.size:
            raise ValueError("index has duplicate frame indices")
        order = np.argsort(index, kind="stable")
        self.index = index[order]
        self.episode_index = episode_index[order]
        self.chunk_size = chunk_size
        self.kappa = kappa
        self.epsilon = epsilon
        self.fallback_weight = fallback_weight
        prog = progress[order]
        episodes = []
        for ep in dict.fromkeys(self.episode_index.tolist()):
            rows = np.nonzero(self.episode_index == ep)[0]
            if np.any(np.diff(self.index[rows]) != 1):
                raise ValueError(f"episode {ep}: its frame indices are not consecutive")
            episodes.append(rows)
        deltas = np.empty_like(prog)
        for rows in episodes:
            deltas[rows] = progress_deltas(prog[rows], chunk_size)
        self.deltas = deltas
        self.delta_mean, self.delta_std = delta_statistics(deltas, epsilon)
        self.weights = rabc_weights(
            deltas, kappa, self.delta_mean, self.delta_std, epsilon, fallback_weight
        )
        self._pos = {int(i): k for k, i in enumerate(self.index)}

    @classmethod
    def from_episodes(
        cls, progress: Sequence[np.ndarray], chunk_size: int = 50, **kwargs: Any
    ) -> RABCWeighter:
        """From per-episode progress arrays; frames are numbered consecutively from 0."""
        lengths = [len(p) for p in progress]
        return cls(
            np.arange(sum(lengths)),
            np.repeat(np.arange(len(lengths)), lengths),
            np.concatenate([np.asarray(p, dtype=np.float64) for p in progress]),
            chunk_size,
            **kwargs,
        )

    @classmethod
    def from_parquet(
        cls, path: str | Path, head_mode: str = "sparse", chunk_size: int = 50, **kwargs: Any
    ) -> RABCWeighter:
        """From a LeRobot ``sarm_progress.parquet`` (columns ``index``, ``episode_index``,
        ``frame_index``, ``progress_sparse`` and/or ``progress_dense``)."""
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        column = f"progress_{head_mode}"
        if column not in table.column_names:
            found = [c for c in table.column_names if c.startswith("progress")]
            raise ValueError(f"{path}: no column {column!r}; progress columns: {found}")
        return cls(
            table.column("index").to_numpy(),
            table.column("episode_index").to_numpy(),
            table.column(column).to_numpy(zero_copy_only=False).astype(np.float64),
            chunk_size,
            **kwargs,
        )

    def weights_for(self, indices: np.ndarray | Sequence[int]) -> np.ndarray:
        """Unnormalised weights ``[B]`` of the given global frame indices."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        try:
            pos = [self._pos[int(i)] for i in idx]
        except KeyError as exc:
            raise KeyError(f"frame index {exc.args[0]} has no progress value") from None
        return self.weights[pos]

    def compute_batch_weights(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict]:
        """Weights ``[B]`` (float32, rescaled to sum to ``B``) and batch statistics.

        ``batch["index"]`` holds the global frame indices (tensor, array or list).
        """
        import torch

        if "index" not in batch:
            raise KeyError("batch has no 'index' entry (global frame indices)")
        raw = batch["index"]
        if isinstance(raw, torch.Tensor):
            raw = raw.detach().cpu().numpy()
        w = self.weights_for(np.asarray(raw)).astype(np.float32)
        stats = {
            "mean_weight": float(w.mean()) if w.size else 0.0,
            "num_zero_weight": int((w == 0).sum()),
            "num_full_weight": int((w == 1).sum()),
        }
        out = torch.from_numpy(w)
        return out * len(w) / (out.sum() + self.epsilon), stats

    def get_stats(self) -> dict[str, Any]:
        """Dataset-level statistics of the weighting."""
        return {
            "type": "rabc",
            "num_frames": int(np.isfinite(self.deltas).sum()),
            "chunk_size": self.chunk_size,
            "delta_mean": self.delta_mean,
            "delta_std": self.delta_std,
            "kappa": self.kappa,
        }


def write_progress(
    path: str | Path,
    progress: Sequence[np.ndarray],
    episode_indices: Sequence[int] | None = None,
    head_mode: str = "sparse",
) -> Path:
    """Write per-episode progress as a LeRobot ``sarm_progress.parquet``.

    Frames are numbered consecutively over the episodes (the global ``index`` of a
    dataset whose episodes are stored in this order). Returns the path written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if head_mode not in ("sparse", "dense"):
        raise ValueError(f"head_mode={head_mode!r}; allowed: 'sparse', 'dense'")
    eps = list(range(len(progress))) if episode_indices is None else list(episode_indices)
    if len(eps) != len(progress):
        raise ValueError(f"{len(progress)} episodes of progress but {len(eps)} episode indices")
    lengths = [len(p) for p in progress]
    table = pa.table(
        {
            "index": pa.array(np.arange(sum(lengths), dtype=np.int64)),
            "episode_index": pa.array(np.repeat(np.asarray(eps, dtype=np.int64), lengths)),
            "frame_index": pa.array(np.concatenate([np.arange(n) for n in lengths])),
            f"progress_{head_mode}": pa.array(
                np.concatenate([np.asarray(p, dtype=np.float32) for p in progress])
            ),
        }
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path
