"""Configuration of the SARM stage-aware reward model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SARMConfig:
    """Hyper-parameters of :class:`~lc_robotics_reward.modeling_sarm.SARMModel` and its training.

    The paper's model is larger (hidden 768, 12 heads, 8 layers, CLIP frame features,
    frames 30 apart at 30 fps); the defaults here are sized for 40x40 frames on a CPU.

    Attributes:
        num_stages: number of subtasks ``K``.
        temporal_proportions: ``alpha [K]`` (sum 1) used to turn stage + tau into
            normalised progress; ``None`` means uniform ``1 / K``.
        image_size: frame side in pixels (frames are ``[H, W, 3]`` uint8).
        state_dim: robot-state size per frame.
        text_dim: task-text embedding size (384 for all-MiniLM-L6-v2).
        frame_dim: frame-feature size (output of the frame encoder).
        hidden_dim, num_heads, num_layers, dropout: the temporal transformer.
        num_frames: window length: the episode's first frame plus ``num_frames - 1``
            frames ``frame_gap`` apart, ending at the current frame.
        frame_gap: frames between window entries.
        rewind_prob: probability that a training window is a rewind (frames played
            forward, then backward, with labels following the frames).
        max_rewind: most window entries that may be rewound.
        language_perturb_prob: probability that a training window gets a different
            task's text, with targets stage 0 and tau 0 (no progress on that task).
        stage_loss_weight: weight of the stage cross-entropy next to the tau MSE.
        lr, weight_decay: AdamW settings.
    """

    num_stages: int
    temporal_proportions: tuple[float, ...] | None = None
    image_size: int = 40
    state_dim: int = 3
    text_dim: int = 384
    frame_dim: int = 64
    hidden_dim: int = 64
    num_heads: int = 4
    num_layers: int = 2
    dropout: float = 0.1
    num_frames: int = 9
    frame_gap: int = 3
    rewind_prob: float = 0.5
    max_rewind: int = 4
    language_perturb_prob: float = 0.2
    stage_loss_weight: float = 1.0
    lr: float = 1e-3
    weight_decay: float = 1e-3

    def __post_init__(self) -> None:
        positive = (
            "num_stages", "image_size", "state_dim", "text_dim", "frame_dim", "hidden_dim",
            "num_heads", "num_layers", "frame_gap",
        )  # fmt: skip
        for name in positive:
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"SARMConfig.{name}={value}; allowed: >= 1")
        if self.num_frames < 2:
            raise ValueError(f"SARMConfig.num_frames={self.num_frames}; allowed: >= 2")
        if self.hidden_dim % self.num_heads:
            raise ValueError(
                f"SARMConfig.hidden_dim={self.hidden_dim} must be divisible by "
                f"num_heads={self.num_heads}"
            )
        for name in ("dropout", "rewind_prob", "language_perturb_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"SARMConfig.{name}={value}; allowed: 0 <= {name} <= 1")
        if not 0 <= self.max_rewind <= self.num_frames - 2:
            raise ValueError(
                f"SARMConfig.max_rewind={self.max_rewind}; allowed: 0..{self.num_frames - 2}"
            )
        if self.temporal_proportions is not None:
            alpha = np.asarray(self.temporal_proportions, dtype=float)
            if alpha.shape != (self.num_stages,):
                raise ValueError(
                    f"SARMConfig.temporal_proportions has {alpha.size} entries; "
                    f"expected num_stages={self.num_stages}"
                )
            if (alpha <= 0).any() or abs(alpha.sum() - 1.0) > 1e-4:
                raise ValueError(
                    f"SARMConfig.temporal_proportions={self.temporal_proportions}; "
                    "allowed: positive entries summing to 1"
                )
        if self.lr <= 0 or self.weight_decay < 0:
            raise ValueError(f"SARMConfig lr={self.lr}, weight_decay={self.weight_decay}")

    @property
    def window_span(self) -> int:
        """Frames covered by the moving part of the window: ``(num_frames - 2) * gap + 1``."""
        return (self.num_frames - 2) * self.frame_gap + 1

    @property
    def alpha(self) -> np.ndarray:
        if self.temporal_proportions is None:
            return np.full(self.num_stages, 1.0 / self.num_stages)
        return np.asarray(self.temporal_proportions, dtype=np.float64)
