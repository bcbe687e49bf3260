"""HardKuma: support, point masses against the closed form, pathwise gradients, hard roles."""

from __future__ import annotations

import math

import pytest
import torch

from lc_attention.lychee.hardkuma import (
    HardKumaGates,
    hardkuma_p0,
    hardkuma_p1,
    hardkuma_sample,
    kuma_cdf,
    kuma_sample,
)

torch.set_num_threads(1)
L, R = -0.1, 1.1
PARAMS = [(1.0, 1.0), (0.3, 0.5), (2.0, 0.7), (0.5, 3.0), (5.0, 5.0)]


def _u(n: int, seed: int) -> torch.Tensor:
    return torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize(("a", "b"), [*PARAMS, (0.05, 0.05), (40.0, 40.0)])
def test_samples_lie_in_unit_interval(a: float, b: float) -> None:
    u = _u(50_000, 0)
    at, bt = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    z = hardkuma_sample(u, at, bt)
    assert torch.isfinite(z).all()
    assert z.min() >= 0.0
    assert z.max() <= 1.0
    k = kuma_sample(u, at, bt)
    assert k.min() >= 0.0
    assert k.max() <= 1.0


def test_uniform_kuma_closed_forms() -> None:
    one = torch.tensor(1.0)
    assert math.isclose(float(hardkuma_p0(one, one)), 0.1 / 1.2, rel_tol=1e-6)
    assert math.isclose(float(hardkuma_p1(one, one)), 0.1 / 1.2, rel_tol=1e-6)
    x = torch.linspace(0, 1, 11)
    assert (kuma_cdf(x, one, one) - x).abs().max() < 1e-6


@pytest.mark.parametrize(("a", "b"), PARAMS)
def test_point_masses_match_closed_form(a: float, b: float) -> None:
    n = 40_000
    at, bt = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    z = hardkuma_sample(_u(n, 1), at, bt)
    for got, p in ((float((z == 0).double().mean()), float(hardkuma_p0(at, bt))),
                   (float((z == 1).double().mean()), float(hardkuma_p1(at, bt)))):  # fmt: skip
        std = math.sqrt(max(p * (1 - p), 1e-12) / n)
        assert abs(got - p) <= 4.5 * std + 1e-4, (a, b, got, p, std)


@pytest.mark.parametrize(("a", "b"), PARAMS[:3])
def test_continuous_part_follows_the_stretched_cdf(a: float, b: float) -> None:
    n = 40_000
    at, bt = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    z = hardkuma_sample(_u(n, 2), at, bt)
    for c in (0.1, 0.5, 0.9):
        p = float(kuma_cdf(torch.tensor((c - L) / (R - L), dtype=torch.float64), at, bt))
        got = float((z <= c).double().mean())
        assert abs(got - p) <= 4.5 * math.sqrt(p * (1 - p) / n), (c, got, p)


def _mean_by_quadrature(log_a: torch.Tensor, log_b: torch.Tensor) -> torch.Tensor:
    """E[Z] = int_0^1 P(Z > z) dz with P(Z > z) = 1 - F((z - l) / (r - l)), trapezoid rule."""
    z = torch.linspace(0.0, 1.0, 20_001, dtype=torch.float64)
    surv = 1.0 - kuma_cdf((z - L) / (R - L), log_a.exp(), log_b.exp())
    return torch.trapezoid(surv, z)


@pytest.mark.parametrize(("a", "b"), [(1.0, 1.0), (2.0, 0.7), (0.5, 3.0)])
def test_reparameterized_gradient_matches_the_exact_one(a: float, b: float) -> None:
    log_a = torch.tensor(math.log(a), dtype=torch.float64, requires_grad=True)
    log_b = torch.tensor(math.log(b), dtype=torch.float64, requires_grad=True)
    n = 200_000
    z = hardkuma_sample(_u(n, 3), log_a.exp(), log_b.exp())
    # per-sample pathwise gradients give the Monte Carlo standard error of the estimate
    ga, gb = torch.autograd.grad(z.sum(), (log_a, log_b))
    mc = torch.stack([ga, gb]) / n
    exact = torch.stack(torch.autograd.grad(_mean_by_quadrature(log_a, log_b), (log_a, log_b)))
    assert torch.isfinite(mc).all()
    assert (mc.abs() > 1e-3).all()
    # per-sample gradients are bounded by a few units here; 200k samples -> se < 0.01
    assert ((mc - exact).abs() <= 0.02 + 0.05 * exact.abs()).all(), (mc, exact)


def test_gates_sample_respect_fixed_heads_and_l0_is_differentiable() -> None:
    gates = HardKumaGates(3, 4, init_log_a=0.0, init_log_b=0.0)
    z = gates.sample(torch.Generator().manual_seed(0))
    assert z.shape == (3, 4)
    assert torch.equal(z[0], torch.ones(4))
    assert ((z >= 0) & (z <= 1)).all()
    l0 = gates.expected_l0()
    assert math.isclose(float(l0.detach()), 4 + 8 * (1 - 0.1 / 1.2), rel_tol=1e-5)
    l0.backward()
    assert gates.log_a.grad is not None
    assert gates.log_a.grad[1:].abs().min() > 0
    assert torch.equal(gates.log_a.grad[0], torch.zeros(4))  # fixed heads take no part


def test_hard_roles_median_rule_and_exact_budget() -> None:
    gates = HardKumaGates(2, 3)
    with torch.no_grad():
        gates.log_a[1] = torch.tensor([3.0, -3.0, 0.5])  # near 1, near 0, median above 1/2
        gates.log_b[1] = torch.tensor([0.0, 0.0, 0.0])
    hard = gates.hard()
    assert hard[0].all()
    assert hard[1].tolist() == [True, False, True]
    exact = gates.hard(num_retrieval=4)
    assert exact.sum() == 4
    assert exact[0].all()
    assert exact[1].tolist() == [True, False, False]
    with pytest.raises(ValueError, match="num_retrieval"):
        gates.hard(num_retrieval=2)
    with pytest.raises(ValueError, match="stretch"):
        hardkuma_sample(torch.rand(3), torch.ones(3), torch.ones(3), low=0.1)
