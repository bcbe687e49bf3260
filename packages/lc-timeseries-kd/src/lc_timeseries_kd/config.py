"""Configurations (frozen, validated) for GDPD and the training loops."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["METHODS", "GDPDConfig", "TrainConfig", "default_start"]

#: Student training methods: no distillation, logit KD (Hinton), FitNet feature KD
#: (the paper's Base-KD) and GDPD.
METHODS: tuple[str, ...] = ("none", "logit", "fitnet", "gdpd")


def _positive(name: str, value: float, allowed: str = "> 0") -> None:
    if not value > 0:
        raise ValueError(f"{name} must be {allowed}, got {value!r}")


def default_start(num_train_timesteps: int, num_steps: int) -> int:
    """First timestep of the default ``num_steps``-step restoration grid.

    The grid is the lower half of a ``2 * num_steps``-step DDIM grid over
    ``[0, num_train_timesteps)`` (step ``d = T // (2 n)``), so it starts at ``(n - 1) d``
    and ends at ``0``.

    Example:
        >>> default_start(1000, 5)
        400
        >>> default_start(1000, 0)
        0
    """
    if num_steps <= 0:
        return 0
    return (num_steps - 1) * (num_train_timesteps // (2 * num_steps))


@dataclass(frozen=True)
class GDPDConfig:
    """Diffusion-prior distillation settings (defaults follow the paper / its code).

    Attributes:
        num_train_timesteps: diffusion steps ``T`` of the linear schedule (1000).
        beta_start: first beta of the linear schedule.
        beta_end: last beta of the linear schedule.
        inference_steps: DDIM steps from the student-conditioned start point (5).
        start_timestep: timestep assigned to the start point, the first one the noise
            predictor sees; the steps then run evenly down to ``0``. ``None`` = the
            paper's code: the lower half of a ``2 n``-step grid, ``(n - 1) * (T // 2n)``
            (400 for ``T = 1000`` and 5 steps).
        latent_dim: size of the teacher-feature latent the prior lives in; ``None`` =
            the student's feature size.
        use_autoencoder: map teacher features to a batch-normalised latent (linear
            encoder + batch norm, linear decoder, trained with a reconstruction loss)
            before learning the prior, as the paper's code does; the batch norm keeps the
            latent at the unit scale the noise schedule assumes.
        hidden: width of the noise predictor and the noise adapter.
        weight: weight ``lambda`` of the GDPD terms (prior losses in the warm-up,
            classification of the restored feature afterwards).
        train_prior_after_warmup: keep the prior trainable after the warm-up, as the
            paper's code does (its noise predictor then receives the gradient of the
            distillation loss); ``False`` freezes the learned teacher prior and its
            autoencoder once the warm-up ends.
        prior_pretrain_steps: extra Adam steps on the prior losses alone (minibatches
            of the precomputed teacher features) before the student loop starts; for
            short schedules where the warm-up alone leaves the prior under-trained.
            ``0`` (the paper's schedule) trains the prior only inside the warm-up.
    """

    num_train_timesteps: int = 1000
    beta_start: float = 1e-4
    beta_end: float = 0.02
    inference_steps: int = 5
    start_timestep: int | None = None
    latent_dim: int | None = None
    use_autoencoder: bool = True
    hidden: int = 256
    weight: float = 1.0
    train_prior_after_warmup: bool = True
    prior_pretrain_steps: int = 0

    def __post_init__(self) -> None:
        if self.num_train_timesteps < 2:
            raise ValueError(f"num_train_timesteps must be >= 2, got {self.num_train_timesteps}")
        if not 0.0 < self.beta_start <= self.beta_end < 1.0:
            raise ValueError(
                f"need 0 < beta_start <= beta_end < 1, got beta_start={self.beta_start}, "
                f"beta_end={self.beta_end}"
            )
        if self.inference_steps < 0:
            raise ValueError(f"inference_steps must be >= 0, got {self.inference_steps}")
        start = self.start
        lowest = max(self.inference_steps - 1, 0)
        if not lowest <= start < self.num_train_timesteps:
            raise ValueError(
                f"start_timestep must lie in [inference_steps - 1, num_train_timesteps - 1] = "
                f"[{lowest}, {self.num_train_timesteps - 1}], got {start}"
            )
        if self.latent_dim is not None:
            _positive("latent_dim", self.latent_dim)
        _positive("hidden", self.hidden)
        if self.prior_pretrain_steps < 0:
            raise ValueError(f"prior_pretrain_steps must be >= 0, got {self.prior_pretrain_steps}")
        if self.weight < 0:
            raise ValueError(f"weight must be >= 0, got {self.weight}")

    @property
    def start(self) -> int:
        """Timestep of the start point."""
        if self.start_timestep is None:
            return default_start(self.num_train_timesteps, self.inference_steps)
        return self.start_timestep


@dataclass(frozen=True)
class TrainConfig:
    """Training settings for teachers and students.

    Attributes:
        arch: ``"lstm"`` (paper: 3 x 100) or ``"fcn"``.
        hidden: LSTM units per layer.
        layers: LSTM layers.
        widths: channels of the three FCN blocks.
        length: series length after resampling (paper: 100).
        epochs: training epochs of the students.
        teacher_epochs: training epochs of the teacher (``None``: ``epochs``).
        warmup_epochs: warm-up epochs of GDPD (prior learning) and FitNet (hint stage);
            model selection of every student (all methods alike) starts after it.
        batch_size: minibatch size.
        lr: Adam learning rate.
        weight_decay: Adam weight decay.
        grad_clip: gradient-norm clip (``0`` disables).
        val_fraction: share of the official training split held out for validation.
        kd_temperature: softmax temperature of logit KD.
        kd_weight: weight of the logit-KD term (added to the task loss).
        fitnet_weight: weight of the FitNet hint loss in its hint stage.
        gdpd: GDPD settings.
        progress: show a progress bar per training run.
    """

    arch: str = "lstm"
    hidden: int = 100
    layers: int = 3
    widths: tuple[int, int, int] = (128, 256, 128)
    length: int = 100
    epochs: int = 60
    teacher_epochs: int | None = None
    warmup_epochs: int = 20
    batch_size: int = 32
    lr: float = 1e-3
    weight_decay: float = 1e-5
    grad_clip: float = 5.0
    val_fraction: float = 0.2
    kd_temperature: float = 2.0
    kd_weight: float = 1.0
    fitnet_weight: float = 1.0
    gdpd: GDPDConfig = field(default_factory=GDPDConfig)
    progress: bool = False

    def __post_init__(self) -> None:
        if self.arch not in ("lstm", "fcn"):
            raise ValueError(f"arch must be one of 'lstm', 'fcn', got {self.arch!r}")
        for name in ("hidden", "layers", "epochs", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if len(self.widths) != 3 or any(int(w) < 1 for w in self.widths):
            raise ValueError(f"widths must be three positive ints, got {self.widths!r}")
        if self.teacher_epochs is not None and self.teacher_epochs < 1:
            raise ValueError(f"teacher_epochs must be >= 1 or None, got {self.teacher_epochs}")
        if self.length < 2:
            raise ValueError(f"length must be >= 2, got {self.length}")
        if not 0 <= self.warmup_epochs < self.epochs:
            raise ValueError(
                f"warmup_epochs must lie in [0, epochs - 1] = [0, {self.epochs - 1}], "
                f"got {self.warmup_epochs}"
            )
        _positive("lr", self.lr)
        _positive("kd_temperature", self.kd_temperature)
        for name in ("weight_decay", "grad_clip", "kd_weight", "fitnet_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must lie in (0, 1), got {self.val_fraction}")
