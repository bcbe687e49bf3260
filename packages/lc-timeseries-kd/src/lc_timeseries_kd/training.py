"""Training loops: full-series teacher and partial-series students (4 methods).

Students see prefix views (re-stretched to the full length); the teacher sees the
full series. The teacher is frozen while students train, so its features and logits
on the training set are computed once.

Methods:
    ``none``: task loss only.
    ``logit``: task loss + ``kd_weight * T^2 KL`` to the teacher's softened logits.
    ``fitnet``: FitNet in two stages (the paper's Base-KD): hint loss only for
        ``warmup_epochs``, then task loss only.
    ``gdpd``: task loss throughout; during the warm-up plus ``weight`` x (diffusion
        prior + autoencoder losses on teacher features); afterwards plus ``weight`` x
        the task loss of the prior-restored student feature classified by the
        student's head.

Budgets are equal across methods, as in the paper's code: the same initial student
(seeded), the same epochs, the same minibatch order (diffusion noise and prior
pre-training draw from their own generator) and the same model-selection window: the
epoch with the lowest validation loss (student on validation prefixes) among the epochs
after the warm-up, for every method.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lc_timeseries_kd.config import METHODS, TrainConfig
from lc_timeseries_kd.gdpd import GDPDDistiller
from lc_timeseries_kd.losses import FitNetHint, logit_kd_loss
from lc_timeseries_kd.models import SeriesClassifier, build_model

__all__ = ["TrainResult", "predict_proba", "train_student", "train_teacher"]


@dataclass
class TrainResult:
    """A trained model and its history.

    Attributes:
        model: the trained classifier (best validation epoch), in eval mode.
        best_epoch: 1-based epoch whose weights were kept.
        train_loss: mean training loss per epoch.
        val_loss: validation cross-entropy per epoch.
        seconds: wall time of the training run.
    """

    model: SeriesClassifier
    best_epoch: int
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0


def _tensor(x: np.ndarray | torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(np.asarray(x, dtype=np.float32))


@torch.no_grad()
def _forward_all(
    fn: object, x: torch.Tensor, batch_size: int = 256
) -> tuple[torch.Tensor, torch.Tensor]:
    """Features and logits of a frozen classifier over ``x``, in batches."""
    model: SeriesClassifier = fn  # type: ignore[assignment]
    model.eval()
    feats, logits = [], []
    for i in range(0, x.shape[0], batch_size):
        f = model.features(x[i : i + batch_size])
        feats.append(f)
        logits.append(model.head(f))
    return torch.cat(feats), torch.cat(logits)


@torch.no_grad()
def predict_proba(
    model: SeriesClassifier, x: np.ndarray | torch.Tensor, batch_size: int = 256
) -> np.ndarray:
    """Class probabilities ``[n, classes]`` of ``x`` ``[n, channels, length]``.

    Example:
        >>> from lc_timeseries_kd.models import FCNClassifier
        >>> p = predict_proba(FCNClassifier(1, 3, widths=(4, 4, 4)), np.zeros((2, 1, 8)))
        >>> p.shape, bool(np.allclose(p.sum(1), 1))
        ((2, 3), True)
    """
    _, logits = _forward_all(model, _tensor(x), batch_size)
    return torch.softmax(logits, dim=-1).numpy()


def _val_loss(model: SeriesClassifier, x: torch.Tensor, y: torch.Tensor) -> float:
    _, logits = _forward_all(model, x)
    return float(F.cross_entropy(logits, y))


def _check_xy(x: np.ndarray, y: np.ndarray, what: str) -> None:
    if x.ndim != 3:
        raise ValueError(f"{what}: x must have shape [n, channels, length], got {x.shape}")
    if y.shape != (x.shape[0],):
        raise ValueError(f"{what}: y must have shape [{x.shape[0]}], got {y.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what}: x has missing or infinite values")


@dataclass(frozen=True)
class _Data:
    """One run's training and validation tensors and its minibatch-order generator."""

    x: torch.Tensor
    y: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    generator: torch.Generator

    @classmethod
    def of(
        cls, x: np.ndarray, y: np.ndarray, x_val: np.ndarray, y_val: np.ndarray, seed: int
    ) -> _Data:
        y_t, y_val_t = (torch.as_tensor(v, dtype=torch.long) for v in (y, y_val))
        return cls(_tensor(x), y_t, _tensor(x_val), y_val_t, torch.Generator().manual_seed(seed))


def _fit(
    student: SeriesClassifier,
    extra: nn.Module | None,
    loss_fn: object,
    data: _Data,
    cfg: TrainConfig,
    *,
    select_from: int,
    on_epoch: object = None,
    desc: str = "train",
) -> TrainResult:
    """Generic minibatch loop with best-validation-epoch selection."""
    x, x_val, y_val, generator = data.x, data.x_val, data.y_val, data.generator
    params = [p for p in student.parameters()]
    if extra is not None:
        params += list(extra.parameters())
    opt = torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    n = x.shape[0]
    best_state: dict[str, torch.Tensor] | None = None
    best_loss, best_epoch = float("inf"), cfg.epochs
    result = TrainResult(model=student, best_epoch=cfg.epochs)
    start = time.perf_counter()
    epochs: object = range(cfg.epochs)
    if cfg.progress:
        from tqdm.auto import tqdm

        epochs = tqdm(epochs, desc=desc, leave=False)
    for epoch in epochs:  # type: ignore[attr-defined]
        if on_epoch is not None:
            on_epoch(epoch)  # type: ignore[operator]
        student.train()
        if extra is not None:
            extra.train()
        order = torch.randperm(n, generator=generator)
        losses = []
        for i in range(0, n, cfg.batch_size):
            idx = order[i : i + cfg.batch_size]
            if idx.numel() < 2 and n >= 2:  # BatchNorm needs two rows; fold into previous
                continue
            loss = loss_fn(epoch, idx)  # type: ignore[operator]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip > 0:
                nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            opt.step()
            losses.append(float(loss.detach()))
        result.train_loss.append(float(np.mean(losses)) if losses else float("nan"))
        vl = _val_loss(student, x_val, y_val)
        result.val_loss.append(vl)
        if epoch >= select_from and vl < best_loss:
            best_loss, best_epoch = vl, epoch + 1
            best_state = copy.deepcopy(student.state_dict())
    if best_state is not None:
        student.load_state_dict(best_state)
    student.eval()
    result.best_epoch = best_epoch
    result.seconds = time.perf_counter() - start
    return result


def _init_model(cfg: TrainConfig, in_channels: int, n_classes: int, seed: int) -> SeriesClassifier:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build_model(
            cfg.arch,
            in_channels,
            n_classes,
            hidden=cfg.hidden,
            layers=cfg.layers,
            widths=cfg.widths,
        )


def _n_classes(*ys: np.ndarray) -> int:
    return int(max(int(y.max()) for y in ys)) + 1


def _pretrain_prior(
    distiller: GDPDDistiller, t_feat: torch.Tensor, cfg: TrainConfig, gen: torch.Generator
) -> None:
    """``prior_pretrain_steps`` Adam steps on the prior losses over teacher features."""
    steps = cfg.gdpd.prior_pretrain_steps
    if steps == 0:
        return
    params = [p for m in distiller.prior_modules() for p in m.parameters()]
    opt = torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    n = t_feat.shape[0]
    for _ in range(steps):
        idx = torch.randint(0, n, (min(cfg.batch_size, n),), generator=gen)
        loss = distiller.prior_loss(t_feat[idx], generator=gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def train_teacher(
    x: np.ndarray,
    y: np.ndarray,
    x_val: np.ndarray,
    y_val: np.ndarray,
    cfg: TrainConfig,
    seed: int,
    n_classes: int | None = None,
) -> TrainResult:
    """Train the full-series teacher.

    Args:
        x: ``[n, channels, length]`` full training series; ``y``: ``[n]`` class ids.
        x_val: full validation series; ``y_val``: their class ids.
        cfg: training settings (architecture, epochs, optimiser).
        seed: seeds the initialisation and the batch order.
        n_classes: number of classes (default: inferred from the labels).

    Example:
        >>> rng = np.random.default_rng(0)
        >>> x, y = rng.normal(size=(8, 1, 12)).astype("float32"), np.arange(8) % 2
        >>> cfg = TrainConfig(arch="fcn", epochs=2, warmup_epochs=0)
        >>> train_teacher(x, y, x, y, cfg, seed=0).model.feature_dim
        128
    """
    _check_xy(x, y, "teacher training data")
    _check_xy(x_val, y_val, "teacher validation data")
    k = n_classes or _n_classes(y, y_val)
    data = _Data.of(x, y, x_val, y_val, seed)
    model = _init_model(cfg, x.shape[1], k, seed)
    xt, yt = data.x, data.y

    def loss_fn(epoch: int, idx: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(model(xt[idx]), yt[idx])

    if cfg.teacher_epochs is not None:
        cfg = replace(cfg, epochs=cfg.teacher_epochs, warmup_epochs=0)
    return _fit(model, None, loss_fn, data, cfg, select_from=0, desc="teacher")


def train_student(
    method: str,
    x_prefix: np.ndarray,
    x_full: np.ndarray,
    y: np.ndarray,
    x_val_prefix: np.ndarray,
    y_val: np.ndarray,
    teacher: SeriesClassifier | None,
    cfg: TrainConfig,
    seed: int,
    n_classes: int | None = None,
) -> TrainResult:
    """Train a partial-series student with ``method`` in ``none|logit|fitnet|gdpd``.

    Args:
        method: distillation method (see the module docstring).
        x_prefix: ``[n, channels, length]`` prefix views of the training series (the
            student's input, see :func:`lc_timeseries_kd.data.prefix_view`).
        x_full: ``[n, channels, length]`` the same series in full (the teacher's input).
        y: ``[n]`` class ids.
        x_val_prefix: validation prefix views; ``y_val``: their class ids.
        teacher: trained full-series teacher (unused for ``none``).
        cfg: training settings.
        seed: seeds the student's initialisation, batch order and diffusion noise; the
            same seed gives every method the same initial student and the same sequence
            of minibatches.
        n_classes: number of classes (default: inferred from the labels).

    Returns:
        :class:`TrainResult` whose ``model`` is the student alone (inference needs
        neither the teacher nor the diffusion prior).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    _check_xy(x_prefix, y, "student training data")
    _check_xy(x_val_prefix, y_val, "student validation data")
    if x_full.shape != x_prefix.shape:
        raise ValueError(
            f"x_full {x_full.shape} must match x_prefix {x_prefix.shape} (re-stretched prefixes)"
        )
    if method != "none" and teacher is None:
        raise ValueError(f"method {method!r} needs a teacher")
    k = n_classes or _n_classes(y, y_val)
    # the generator orders the minibatches only: equal for all methods
    data = _Data.of(x_prefix, y, x_val_prefix, y_val, seed)
    student = _init_model(cfg, x_prefix.shape[1], k, seed)
    xs, yt = data.x, data.y
    t_feat = t_logits = torch.empty(0)
    if teacher is not None and method != "none":
        t_feat, t_logits = _forward_all(teacher, _tensor(x_full))
    extra: nn.Module | None = None
    # every method selects among the epochs after the warm-up (the paper's code does the
    # same for all methods), so the selection window does not favour any of them
    select_from = cfg.warmup_epochs
    on_epoch = None

    if method == "none":

        def loss_fn(epoch: int, idx: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(student(xs[idx]), yt[idx])

    elif method == "logit":

        def loss_fn(epoch: int, idx: torch.Tensor) -> torch.Tensor:
            logits = student(xs[idx])
            kd = logit_kd_loss(logits, t_logits[idx], cfg.kd_temperature)
            return F.cross_entropy(logits, yt[idx]) + cfg.kd_weight * kd

    elif method == "fitnet":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 1)
            hint = FitNetHint(student.feature_dim, t_feat.shape[1])
        extra = hint

        def loss_fn(epoch: int, idx: torch.Tensor) -> torch.Tensor:
            if epoch < cfg.warmup_epochs:
                return cfg.fitnet_weight * hint(student.features(xs[idx]), t_feat[idx])
            return F.cross_entropy(student(xs[idx]), yt[idx])

    else:  # gdpd
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed + 1)
            distiller = GDPDDistiller(student.feature_dim, t_feat.shape[1], cfg.gdpd)
        extra = distiller
        lam = cfg.gdpd.weight
        noise = torch.Generator().manual_seed(
            seed + 1
        )  # diffusion noise, apart from the minibatch order
        _pretrain_prior(distiller, t_feat, cfg, noise)

        def on_epoch(epoch: int) -> None:
            if epoch == cfg.warmup_epochs and not cfg.gdpd.train_prior_after_warmup:
                distiller.set_prior_trainable(False)

        def loss_fn(epoch: int, idx: torch.Tensor) -> torch.Tensor:
            feat = student.features(xs[idx])
            task = F.cross_entropy(student.head(feat), yt[idx])
            if epoch < cfg.warmup_epochs:
                return task + lam * distiller.prior_loss(t_feat[idx], generator=noise)
            restored = distiller.refine(feat, generator=noise)
            return task + lam * F.cross_entropy(student.head(restored), yt[idx])

    desc = f"student[{method}]"
    result = _fit(
        student, extra, loss_fn, data, cfg, select_from=select_from, on_epoch=on_epoch, desc=desc
    )
    return result
