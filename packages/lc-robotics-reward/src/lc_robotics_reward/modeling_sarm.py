"""The SARM model: frame encoder, temporal transformer, stage classifier and tau regressor.

Per window entry ``f`` the input is a frame feature (frozen pretrained encoder if one is
given, else a small CNN trained from scratch) plus the projected robot state; the task
text is one extra token in front. A causal transformer runs over ``[text, frame_0, ...,
frame_{F-1}]`` (frame 0 is the episode's first frame and carries a learned marker). The
stage head classifies every entry into one of ``K`` subtasks; the tau head sees the
entry's features and an embedding of its stage (the annotated stage in training, the
predicted one at inference) and outputs ``tau`` in ``(0, 1)`` through a sigmoid.
Normalised progress is ``P_{k-1} + alpha_k * tau`` with the config's temporal proportions.

Loss: ``stage_loss_weight * CE(stage) + MSE(tau)`` averaged over window entries.

Example:
    >>> import torch
    >>> cfg = SARMConfig(num_stages=3, text_dim=8)
    >>> model = SARMModel(cfg)
    >>> out = model(torch.zeros(2, 9, 40, 40, 3, dtype=torch.uint8), torch.zeros(2, 9, 3),
    ...             torch.zeros(2, 8))
    >>> out["stage_logits"].shape, out["tau"].shape, out["progress"].shape
    (torch.Size([2, 9, 3]), torch.Size([2, 9]), torch.Size([2, 9]))
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lc_robotics_reward.configuration_sarm import SARMConfig


class SmallCNN(nn.Module):
    """Frame encoder trained from scratch: three stride-2 convolutions and a linear layer.

    Input ``[N, H, W, 3]`` uint8 (or float in ``[0, 255]``); output ``[N, out_dim]``.
    Spatial layout is kept (flatten, not pooling): where objects are matters.
    """

    def __init__(self, image_size: int, out_dim: int) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.GELU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1),
            nn.GELU(),
        )
        side = image_size
        for _ in range(3):
            side = (side + 1) // 2
        self.fc = nn.Linear(32 * side * side, out_dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = images.float().permute(0, 3, 1, 2) / 127.5 - 1.0
        return self.fc(self.conv(x).flatten(1))


class SARMModel(nn.Module):
    """Stage-aware reward model (see the module docstring for the architecture).

    Args:
        config: the hyper-parameters.
        frame_encoder: optional pretrained module mapping ``[N, H, W, 3]`` frames to
            ``[N, config.frame_dim]`` features; it is frozen. ``None`` trains a
            :class:`SmallCNN` from scratch.
    """

    def __init__(self, config: SARMConfig, frame_encoder: nn.Module | None = None) -> None:
        super().__init__()
        self.config = config
        h = config.hidden_dim
        if frame_encoder is None:
            self.frame_encoder: nn.Module = SmallCNN(config.image_size, config.frame_dim)
            self.frozen_encoder = False
        else:
            self.frame_encoder = frame_encoder
            self.frame_encoder.requires_grad_(False)
            self.frame_encoder.eval()
            self.frozen_encoder = True
        self.frame_proj = nn.Linear(config.frame_dim, h)
        self.state_proj = nn.Linear(config.state_dim, h)
        self.text_proj = nn.Linear(config.text_dim, h)
        self.first_frame = nn.Parameter(torch.zeros(h))
        self.position = nn.Parameter(torch.zeros(config.num_frames + 1, h))
        nn.init.normal_(self.first_frame, std=0.02)
        nn.init.normal_(self.position, std=0.02)
        layer = nn.TransformerEncoderLayer(
            d_model=h,
            nhead=config.num_heads,
            dim_feedforward=4 * h,
            dropout=config.dropout,
            batch_first=True,
            norm_first=True,
        )
        self.transformer = nn.TransformerEncoder(
            layer, config.num_layers, enable_nested_tensor=False
        )
        self.norm = nn.LayerNorm(h)
        self.stage_head = nn.Sequential(nn.Linear(h, h), nn.GELU(), nn.Linear(h, config.num_stages))
        self.stage_embedding = nn.Embedding(config.num_stages, h // 2)
        self.tau_head = nn.Sequential(nn.Linear(h + h // 2, h), nn.GELU(), nn.Linear(h, 1))
        alpha = torch.as_tensor(config.alpha, dtype=torch.float32)
        self.register_buffer("alpha", alpha)
        self.register_buffer("before", torch.cumsum(alpha, 0) - alpha)
        causal = torch.triu(
            torch.ones(config.num_frames + 1, config.num_frames + 1, dtype=torch.bool), 1
        )
        self.register_buffer("causal_mask", causal)

    def train(self, mode: bool = True) -> SARMModel:
        super().train(mode)
        if self.frozen_encoder:
            self.frame_encoder.eval()
        return self

    def encode_frames(self, images: torch.Tensor) -> torch.Tensor:
        """Frame features ``[N, frame_dim]`` from frames ``[N, H, W, 3]``."""
        if images.ndim != 4 or images.shape[-1] != 3:
            raise ValueError(f"images must be [N, H, W, 3]; got {tuple(images.shape)}")
        if self.frozen_encoder:
            with torch.no_grad():
                return self.frame_encoder(images)
        return self.frame_encoder(images)

    def forward_features(
        self,
        frame_features: torch.Tensor,
        states: torch.Tensor,
        text: torch.Tensor,
        stage_condition: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Run the transformer and heads on precomputed frame features.

        Args:
            frame_features: ``[B, F, frame_dim]``.
            states: ``[B, F, state_dim]``.
            text: ``[B, text_dim]`` task-text embeddings.
            stage_condition: ``[B, F]`` stage indices for the tau head (training: the
                annotated stages); ``None`` uses the predicted stages.

        Returns:
            ``stage_logits [B, F, K]``, ``stage [B, F]`` (the conditioning stage),
            ``tau [B, F]`` and ``progress [B, F]``.
        """
        b, f, _ = frame_features.shape
        cfg = self.config
        if f != cfg.num_frames:
            raise ValueError(f"window has {f} frames; config.num_frames={cfg.num_frames}")
        if states.shape != (b, f, cfg.state_dim):
            raise ValueError(
                f"states shape {tuple(states.shape)}; expected {(b, f, cfg.state_dim)}"
            )
        if text.shape != (b, cfg.text_dim):
            raise ValueError(f"text shape {tuple(text.shape)}; expected {(b, cfg.text_dim)}")
        x = self.frame_proj(frame_features) + self.state_proj(states)
        x = torch.cat([x[:, :1] + self.first_frame, x[:, 1:]], dim=1)
        seq = torch.cat([self.text_proj(text)[:, None], x], dim=1) + self.position
        hidden = self.norm(self.transformer(seq, mask=self.causal_mask))[:, 1:]
        logits = self.stage_head(hidden)
        stage = logits.argmax(-1) if stage_condition is None else stage_condition
        tau = torch.sigmoid(
            self.tau_head(torch.cat([hidden, self.stage_embedding(stage)], dim=-1))
        ).squeeze(-1)
        before: torch.Tensor = self.before  # type: ignore[assignment]
        alpha: torch.Tensor = self.alpha  # type: ignore[assignment]
        progress = before[stage] + alpha[stage] * tau
        return {"stage_logits": logits, "stage": stage, "tau": tau, "progress": progress}

    def forward(
        self,
        images: torch.Tensor,
        states: torch.Tensor,
        text: torch.Tensor,
        stage_condition: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Windows of frames ``[B, F, H, W, 3]``, states ``[B, F, S]``, text ``[B, D]``."""
        if images.ndim != 5:
            raise ValueError(f"images must be [B, F, H, W, 3]; got {tuple(images.shape)}")
        b, f = images.shape[:2]
        feats = self.encode_frames(images.reshape(b * f, *images.shape[2:])).reshape(b, f, -1)
        return self.forward_features(feats, states, text, stage_condition)


def sarm_loss(
    outputs: dict[str, torch.Tensor],
    stage_target: torch.Tensor,
    tau_target: torch.Tensor,
    stage_loss_weight: float = 1.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``stage_loss_weight * CE(stage) + MSE(tau)`` over every window entry.

    Args:
        outputs: from :meth:`SARMModel.forward` (with ``stage_condition`` = targets).
        stage_target: ``[B, F]`` int64.
        tau_target: ``[B, F]`` float in ``[0, 1]``.

    Returns:
        The loss and a dict of its parts (floats) for logging.
    """
    logits = outputs["stage_logits"]
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), stage_target.reshape(-1))
    mse = F.mse_loss(outputs["tau"], tau_target.float())
    loss = stage_loss_weight * ce + mse
    return loss, {"stage_ce": float(ce.detach()), "tau_mse": float(mse.detach())}
