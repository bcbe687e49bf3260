"""GDPD: a diffusion prior over teacher features restores student features.

Student features of a partial series are treated as degraded observations of the
teacher's full-context features. A diffusion model learns the distribution of (a
batch-normalised autoencoder latent of) teacher features. A student feature is projected into that
latent space, mixed with Gaussian noise using a per-sample weight predicted from the
feature itself, and denoised with a few DDIM steps; the restored feature is mapped
back to the student's feature space and classified by the student's own head. The
classification loss of the restored feature back-propagates through the sampler into
the student. At inference only the student is used.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lc_timeseries_kd.config import GDPDConfig
from lc_timeseries_kd.diffusion import NoisePredictor, NoiseSchedule, ddim_sample, diffusion_loss

__all__ = ["GDPDDistiller", "NoiseAdapter"]


class NoiseAdapter(nn.Module):
    """Learned mixing weight ``gamma(s) in (0, 1)`` of the start point.

    The start point is ``x = sqrt(gamma) * s + sqrt(1 - gamma) * eps``: ``gamma`` near 1
    trusts the student feature, near 0 hands the restoration to the prior.

    Example:
        >>> NoiseAdapter(4, 8)(torch.zeros(3, 4)).shape
        torch.Size([3])
    """

    def __init__(self, dim: int, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        """Mixing weight ``[batch]`` for features ``[batch, dim]``."""
        return torch.sigmoid(self.net(s)).squeeze(-1)


class GDPDDistiller(nn.Module):
    """Diffusion prior over teacher features plus the student-side restoration path.

    Args:
        student_dim: student feature size ``D_s`` (its head's input).
        teacher_dim: teacher feature size ``D_t``.
        config: GDPD settings.

    Example:
        >>> d = GDPDDistiller(8, 12, GDPDConfig(hidden=16))
        >>> g = torch.Generator().manual_seed(0)
        >>> d.refine(torch.randn(4, 8), generator=g).shape
        torch.Size([4, 8])
        >>> d.prior_loss(torch.randn(4, 12), generator=g).ndim
        0
    """

    def __init__(self, student_dim: int, teacher_dim: int, config: GDPDConfig | None = None):
        super().__init__()
        self.config = config or GDPDConfig()
        cfg = self.config
        latent = cfg.latent_dim or student_dim
        if not cfg.use_autoencoder and latent != teacher_dim:
            raise ValueError(
                f"without the autoencoder the prior lives in the teacher feature space, so "
                f"latent_dim must equal teacher_dim={teacher_dim}, got {latent}"
            )
        self.latent_dim = latent
        self.encoder: nn.Module
        self.decoder: nn.Module
        if cfg.use_autoencoder:
            # as the paper's code: a linear map followed by batch norm, so the prior's data
            # have roughly zero mean and unit variance (the scale the noise schedule
            # assumes) whatever the scale of the teacher features; linear decoder
            self.encoder = nn.Sequential(nn.Linear(teacher_dim, latent), nn.BatchNorm1d(latent))
            self.decoder = nn.Linear(latent, teacher_dim)
        else:
            self.encoder = nn.Identity()
            self.decoder = nn.Identity()
        self.trans = nn.Linear(student_dim, latent)
        self.schedule = NoiseSchedule(cfg.num_train_timesteps, cfg.beta_start, cfg.beta_end)
        self.eps_model = NoisePredictor(latent, hidden=cfg.hidden)
        self.noise_adapter = NoiseAdapter(latent, hidden=max(16, cfg.hidden // 4))
        self.proj = nn.Sequential(nn.Linear(latent, student_dim), nn.BatchNorm1d(student_dim))

    def prior_modules(self) -> list[nn.Module]:
        """Modules that make up the teacher prior (autoencoder and noise predictor)."""
        return [self.encoder, self.decoder, self.eps_model]

    def set_prior_trainable(self, trainable: bool) -> None:
        """Freeze or unfreeze the prior; gradients still flow *through* it."""
        for module in self.prior_modules():
            for p in module.parameters():
                p.requires_grad_(trainable)

    def prior_loss(
        self, teacher_feat: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Diffusion loss on the teacher latent plus the autoencoder reconstruction loss.

        Args:
            teacher_feat: ``[batch, D_t]`` teacher features of the full series.

        Returns:
            Scalar loss. The diffusion term sees the latent detached, as in the paper's
            code, so the autoencoder is shaped by reconstruction only.
        """
        z = self.encoder(teacher_feat)
        rec = F.mse_loss(self.decoder(z), teacher_feat) if self.config.use_autoencoder else 0.0
        return diffusion_loss(self.eps_model, self.schedule, z.detach(), generator) + rec

    def start_point(
        self, student_feat: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Student-conditioned start point and its mixing weight.

        Returns:
            ``(x_start [batch, latent], gamma [batch])``.
        """
        s = self.trans(student_feat)
        gamma = self.noise_adapter(s)
        noise = torch.randn(s.shape, device=s.device, dtype=s.dtype, generator=generator)
        g = gamma.unsqueeze(-1)
        return g.sqrt() * s + (1.0 - g).sqrt() * noise, gamma

    def refine(
        self, student_feat: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Restore student features with the prior: ``[batch, D_s] -> [batch, D_s]``.

        Mixes the projected feature with noise, runs ``inference_steps`` DDIM steps from
        the configured start timestep down to ``0`` (then to the clean sample) and maps
        the result back to the student's feature space, so the student's head can
        classify it.
        """
        x, _ = self.start_point(student_feat, generator)
        x = ddim_sample(
            self.eps_model,
            self.schedule,
            x,
            num_steps=self.config.inference_steps,
            start=self.config.start,
        )
        return self.proj(x)
