"""Argument checks and numerics of the SoLoPO and DAPO pieces (no model needed)."""

from __future__ import annotations

import math

import pytest
import torch

from lc_train.preference import SoLoPOConfig
from lc_train.preference.losses import ResponseLogps, reward, solopo_loss
from lc_train.rl import DAPOConfig, group_advantages, informative_groups
from lc_train.rl.memagent import Episode, Turn
from lc_train.rl.trainer import build_turn_batch, dapo_step


@pytest.mark.parametrize("field", ["beta", "simpo_gamma", "orpo_lambda", "alignment_weight"])
@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_solopo_config_rejects_non_finite_values(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        SoLoPOConfig(**{field: value})


def test_mis_sized_long_rejected_is_rejected() -> None:
    r = ResponseLogps(torch.tensor([-1.0, -2.0]), torch.tensor([2, 3]))
    one = ResponseLogps(torch.tensor([-1.0]), torch.tensor([2]))
    cfg = SoLoPOConfig(method="simpo", chosen_only=False)
    with pytest.raises(ValueError, match="long_rejected"):
        solopo_loss(cfg, r, r, r, one)


@pytest.mark.parametrize("mean_logp", [-1e-3, -1e-5, -1e-7, -1e-9])
def test_orpo_log_odds_of_confident_answers(mean_logp: float) -> None:
    """log(p / (1 - p)) with log p = m: m - log(-expm1(m)); no saturation near p = 1."""
    cfg = SoLoPOConfig(method="orpo")
    r = ResponseLogps(torch.tensor([mean_logp * 4], dtype=torch.float64), torch.tensor([4]))
    exact = mean_logp - math.log(-math.expm1(mean_logp))
    assert reward(cfg, r).item() == pytest.approx(exact, rel=1e-9)
    r32 = ResponseLogps(torch.tensor([mean_logp * 4]), torch.tensor([4]))
    assert reward(cfg, r32).item() == pytest.approx(exact, rel=1e-5)


def test_orpo_log_odds_stay_finite_at_probability_one() -> None:
    cfg = SoLoPOConfig(method="orpo")
    logps = torch.tensor([0.0, -2.0], requires_grad=True)
    value = reward(cfg, ResponseLogps(logps, torch.tensor([3, 3])))
    assert torch.isfinite(value).all()
    value.sum().backward()
    assert logps.grad is not None
    assert torch.isfinite(logps.grad).all()


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_rewards_are_rejected(bad: float) -> None:
    rewards = torch.tensor([[1.0, 0.0], [bad, bad]])
    with pytest.raises(ValueError, match="finite"):
        group_advantages(rewards)
    with pytest.raises(ValueError, match="finite"):
        informative_groups(rewards)
    groups = [[_episode("a", 1.0, 3), _episode("a", 0.0, 3)], [_episode("b", bad, 3)] * 2]
    with pytest.raises(ValueError, match="'b'"):
        build_turn_batch(groups)


def _episode(item: str, reward: float, length: int) -> Episode:
    turn = Turn(prompt_ids=(1, 2), completion_ids=tuple(range(3, 3 + length)), kind="answer")
    return Episode(item_id=item, turns=[turn], reward=reward)


def test_build_turn_batch_applies_the_overlong_penalty() -> None:
    """Equal correctness, different lengths: the shaped rewards separate them."""
    cfg = DAPOConfig(max_length=10, overlong_cache=4)
    group = [_episode("a", 1.0, 4), _episode("a", 1.0, 8), _episode("a", 1.0, 12)]
    assert build_turn_batch([group]) is None  # flat group without shaping
    batch = build_turn_batch([group], overlong=cfg)
    assert batch is not None
    # lengths 4, 8, 12 -> penalties 0, -0.5, -1
    torch.testing.assert_close(batch.rewards, torch.tensor([[1.0, 0.5, 0.0]]))
    assert batch.advantages[0] > batch.advantages[1] > batch.advantages[2]


class _Fixed(torch.nn.Module):
    """A "model" whose next-token log-probs are learnable logits (vocab 4)."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.zeros(length, 4))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> object:
        out = self.logits[: input_ids.shape[1]].expand(input_ids.shape[0], -1, -1)
        return type("Out", (), {"logits": out})()


def test_clip_frac_counts_the_clipped_region_like_trl() -> None:
    """Only tokens whose clipped term is active: ratio < 1 - eps_low with A < 0, or
    ratio > 1 + eps_high with A > 0 (TRL's ``clip_ratio/region_mean``)."""
    model = _Fixed(6)
    # completion tokens 3, 3, 3 (targets at positions 1, 2, 3); all logps log(1/4)
    lp = math.log(0.25)
    olds = [lp - 1.0, lp + 1.0, lp]  # ratios e, 1/e, 1
    turns = [
        Turn(prompt_ids=(0, 1), completion_ids=(3, 3, 3), kind="answer", logps=tuple(olds)),
        Turn(prompt_ids=(0, 1), completion_ids=(3, 3, 3), kind="answer", logps=tuple(olds)),
    ]
    stats = dapo_step(model, None, turns, torch.tensor([1.0, -1.0]), DAPOConfig(), micro_batch=2)
    # A > 0: ratio e is clipped (high), 1/e is not; A < 0: 1/e is clipped (low), e not
    assert stats["clip_frac"] == pytest.approx(2 / 6)
