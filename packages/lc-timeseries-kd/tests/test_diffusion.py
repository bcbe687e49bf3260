"""Noise schedule, DDIM sampler and the GDPD distiller."""

from __future__ import annotations

import pytest
import torch

from lc_timeseries_kd.config import GDPDConfig, default_start
from lc_timeseries_kd.diffusion import (
    NoisePredictor,
    NoiseSchedule,
    ddim_sample,
    ddim_timesteps,
    diffusion_loss,
)
from lc_timeseries_kd.gdpd import GDPDDistiller


class ExactEps(torch.nn.Module):
    """Optimal noise predictor when the data distribution is a point mass at ``c``."""

    def __init__(self, schedule: NoiseSchedule, c: torch.Tensor):
        super().__init__()
        self.schedule, self.c = schedule, c

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        a = self.schedule.abar(t).unsqueeze(-1)
        return (x - a.sqrt() * self.c) / (1.0 - a).sqrt()


def test_linear_schedule_matches_closed_form() -> None:
    s = NoiseSchedule(1000, 1e-4, 0.02)
    betas = torch.linspace(1e-4, 0.02, 1000, dtype=torch.float64)
    assert torch.allclose(s.alphas_cumprod.double(), torch.cumprod(1 - betas, 0), rtol=1e-6)
    assert float(s.abar(torch.tensor([-1]))) == 1.0


def test_ddim_with_zero_steps_is_the_identity() -> None:
    s = NoiseSchedule(1000)
    net = NoisePredictor(6, hidden=16)
    x = torch.randn(5, 6)
    assert torch.equal(ddim_sample(net, s, x, num_steps=0), x)
    assert ddim_timesteps(0, 500) == []


def test_ddim_timesteps_are_evenly_spaced_down_to_zero() -> None:
    assert ddim_timesteps(5, 400) == [400, 300, 200, 100, 0]
    assert ddim_timesteps(1, 999) == [999]
    assert ddim_timesteps(3, 2) == [2, 1, 0]
    with pytest.raises(ValueError):
        ddim_timesteps(-1, 10)
    with pytest.raises(ValueError, match="start"):
        ddim_timesteps(5, 3)


def test_default_grid_is_the_lower_half_of_a_ddim_grid_of_twice_the_steps() -> None:
    # the paper's code: a 2n-step DDIM grid over [0, T) (step T // 2n), of which the
    # noise predictor sees the lower n timesteps, ending at 0 and then the clean sample
    for t_max, n in [(1000, 5), (1000, 3), (200, 4)]:
        full = [i * (t_max // (2 * n)) for i in range(2 * n)][::-1]
        assert ddim_timesteps(n, default_start(t_max, n)) == full[n:]
    assert GDPDConfig().start == 400
    assert GDPDConfig(inference_steps=2).start == 250


def test_ddim_sampler_visits_the_default_grid() -> None:
    seen: list[int] = []

    class Recorder(torch.nn.Module):
        def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            seen.append(int(t[0]))
            return torch.zeros_like(x)

    ddim_sample(Recorder(), NoiseSchedule(1000), torch.randn(2, 3), num_steps=5)
    assert seen == [400, 300, 200, 100, 0]


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_ddim_recovers_a_point_mass_with_the_exact_noise_predictor(steps: int) -> None:
    s = NoiseSchedule(1000)
    c = torch.tensor([[1.5, -2.0, 0.25]])
    x0 = ddim_sample(ExactEps(s, c), s, torch.randn(4, 3), num_steps=steps, start=700)
    assert torch.allclose(x0, c.expand(4, 3), atol=1e-4)


def test_forward_noising_preserves_variance() -> None:
    s = NoiseSchedule(1000)
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(20000, 1, generator=g)
    xt = s.add_noise(x0, torch.randn(20000, 1, generator=g), torch.full((20000,), 600))
    assert abs(float(xt.var()) - 1.0) < 0.05


def test_diffusion_loss_of_the_exact_predictor_is_zero() -> None:
    s = NoiseSchedule(100)
    c = torch.tensor([[0.3, -0.7]])
    loss = diffusion_loss(ExactEps(s, c), s, c.expand(8, 2), torch.Generator().manual_seed(1))
    assert float(loss) < 1e-8


def test_noise_predictor_learns_a_gaussian_prior() -> None:
    torch.manual_seed(0)
    s = NoiseSchedule(200)
    net = NoisePredictor(2, hidden=32, depth=1)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    data = torch.tensor([[2.0, -1.0]]) + 0.05 * torch.randn(512, 2, generator=g)
    first = None
    for _ in range(150):
        loss = diffusion_loss(net, s, data[torch.randint(0, 512, (64,), generator=g)], g)
        first = float(loss.detach()) if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    samples = ddim_sample(net, s, torch.randn(256, 2, generator=g), num_steps=10, start=199)
    assert float(loss.detach()) < 0.5 * first
    assert torch.allclose(samples.mean(0), torch.tensor([2.0, -1.0]), atol=0.3)


def test_distiller_shapes_mixing_weight_and_gradients() -> None:
    d = GDPDDistiller(8, 12, GDPDConfig(hidden=16))
    g = torch.Generator().manual_seed(0)
    s = torch.randn(5, 8, requires_grad=True)
    x, gamma = d.start_point(s, g)
    assert x.shape == (5, 8)
    assert gamma.shape == (5,)
    assert bool(((gamma > 0) & (gamma < 1)).all())
    out = d.refine(s, g)
    assert out.shape == (5, 8)
    out.sum().backward()
    assert s.grad is not None
    assert float(s.grad.abs().sum()) > 0
    assert d.noise_adapter.net[0].weight.grad is not None  # the mixing weight is learned
    loss = d.prior_loss(torch.randn(5, 12), g)
    assert loss.ndim == 0
    assert float(loss.detach()) > 0


def test_start_point_reduces_to_the_student_feature_when_gamma_is_one() -> None:
    d = GDPDDistiller(4, 4, GDPDConfig(hidden=16))
    torch.nn.init.zeros_(d.noise_adapter.net[2].weight)
    torch.nn.init.constant_(d.noise_adapter.net[2].bias, 50.0)  # sigmoid -> 1
    s = torch.randn(3, 4)
    x, gamma = d.start_point(s, torch.Generator().manual_seed(0))
    assert torch.allclose(gamma, torch.ones(3))
    assert torch.allclose(x, d.trans(s), atol=1e-6)


def test_autoencoder_latent_is_normalised_whatever_the_teacher_scale() -> None:
    # the prior's data must sit at the unit scale the noise schedule assumes
    d = GDPDDistiller(4, 6, GDPDConfig(hidden=16))
    g = torch.Generator().manual_seed(0)
    teacher = 40.0 + 25.0 * torch.randn(256, 6, generator=g)  # far from unit scale
    z = d.encoder(teacher)
    assert z.shape == (256, 4)
    assert torch.allclose(z.mean(0), torch.zeros(4), atol=1e-4)
    assert torch.allclose(z.var(0, unbiased=False), torch.ones(4), atol=1e-3)


def test_prior_is_trainable_after_the_warmup_by_default() -> None:
    # the paper's code keeps the whole distiller in the optimiser throughout
    assert GDPDConfig().train_prior_after_warmup
    d = GDPDDistiller(4, 6, GDPDConfig(hidden=16))
    s = torch.randn(3, 4, requires_grad=True)
    d.refine(s, torch.Generator().manual_seed(0)).sum().backward()
    assert any(
        p.grad is not None and float(p.grad.abs().sum()) > 0 for p in d.eps_model.parameters()
    )


def test_frozen_prior_still_passes_gradients_to_the_student() -> None:
    d = GDPDDistiller(4, 6, GDPDConfig(hidden=16))
    d.set_prior_trainable(False)
    s = torch.randn(3, 4, requires_grad=True)
    d.refine(s, torch.Generator().manual_seed(0)).sum().backward()
    assert all(p.grad is None for p in d.eps_model.parameters())
    assert s.grad is not None
    assert float(s.grad.abs().sum()) > 0


def test_distiller_without_autoencoder_needs_matching_latent() -> None:
    with pytest.raises(ValueError, match="latent_dim"):
        GDPDDistiller(4, 6, GDPDConfig(use_autoencoder=False))
    d = GDPDDistiller(4, 6, GDPDConfig(use_autoencoder=False, latent_dim=6, hidden=8))
    assert d.refine(torch.randn(2, 4)).shape == (2, 4)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"inference_steps": -1}, "inference_steps"),
        ({"start_timestep": 1000}, "start_timestep"),
        ({"start_timestep": 3}, "start_timestep"),
        ({"beta_start": 0.0}, "beta_start"),
        ({"weight": -1.0}, "weight"),
    ],
)
def test_gdpd_config_validates(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        GDPDConfig(**kwargs)
