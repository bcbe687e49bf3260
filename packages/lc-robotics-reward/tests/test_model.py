"""SARM model shapes, causality, windows and augmentations, and a tiny training run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lc_robotics_reward.configuration_sarm import SARMConfig
from lc_robotics_reward.dataset import Episode, RobotDataset
from lc_robotics_reward.labels import SubtaskSpan
from lc_robotics_reward.modeling_sarm import SARMModel, sarm_loss
from lc_robotics_reward.processor_sarm import (
    SARMProcessor,
    predict_episode,
    rewind_indices,
    window_indices,
)
from lc_robotics_reward.text import HashingTextEmbedder

torch.set_num_threads(1)
SMALL = {"image_size": 12, "text_dim": 16, "frame_dim": 8, "hidden_dim": 16, "num_heads": 2,
         "num_layers": 1, "num_frames": 5, "frame_gap": 2, "max_rewind": 2}  # fmt: skip


def _config(**kw) -> SARMConfig:
    return SARMConfig(num_stages=3, **{**SMALL, **kw})


def test_output_shapes_and_ranges() -> None:
    model = SARMModel(_config(temporal_proportions=(0.2, 0.3, 0.5)))
    out = model(
        torch.randint(0, 255, (4, 5, 12, 12, 3), dtype=torch.uint8),
        torch.randn(4, 5, 3),
        torch.randn(4, 16),
    )
    assert out["stage_logits"].shape == (4, 5, 3)
    assert out["tau"].shape == out["progress"].shape == out["stage"].shape == (4, 5)
    assert ((out["tau"] > 0) & (out["tau"] < 1)).all()
    # progress = P_{k-1} + alpha_k * tau stays inside stage k's slice of [0, 1]
    lo = torch.tensor([0.0, 0.2, 0.5])[out["stage"]]
    hi = torch.tensor([0.2, 0.5, 1.0])[out["stage"]]
    assert ((out["progress"] >= lo) & (out["progress"] <= hi)).all()


def test_transformer_is_causal_over_the_window() -> None:
    model = SARMModel(_config()).eval()
    images = torch.randint(0, 255, (1, 5, 12, 12, 3), dtype=torch.uint8)
    states, text = torch.randn(1, 5, 3), torch.randn(1, 16)
    a = model(images, states, text)
    images2, states2 = images.clone(), states.clone()
    images2[:, -1] = 0
    states2[:, -1] += 5
    b = model(images2, states2, text)
    torch.testing.assert_close(a["stage_logits"][:, :-1], b["stage_logits"][:, :-1])
    assert not torch.allclose(a["stage_logits"][:, -1], b["stage_logits"][:, -1])


def test_frozen_encoder_gets_no_gradient() -> None:
    enc = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12 * 12 * 3, 8))
    model = SARMModel(_config(), frame_encoder=enc)
    out = model(
        torch.rand(2, 5, 12, 12, 3),
        torch.randn(2, 5, 3),
        torch.randn(2, 16),
        stage_condition=torch.zeros(2, 5, dtype=torch.long),
    )
    loss, parts = sarm_loss(out, torch.zeros(2, 5, dtype=torch.long), torch.full((2, 5), 0.5))
    loss.backward()
    assert all(p.grad is None for p in enc.parameters())
    assert model.stage_head[0].weight.grad is not None
    assert set(parts) == {"stage_ce", "tau_mse"}


def test_bad_shapes_raise() -> None:
    model = SARMModel(_config())
    with pytest.raises(ValueError, match="window has 4 frames"):
        model(torch.zeros(1, 4, 12, 12, 3), torch.zeros(1, 4, 3), torch.zeros(1, 16))
    with pytest.raises(ValueError, match="text shape"):
        model(torch.zeros(1, 5, 12, 12, 3), torch.zeros(1, 5, 3), torch.zeros(1, 15))


def test_config_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match="hidden_dim=10 must be divisible by num_heads=4"):
        SARMConfig(num_stages=2, hidden_dim=10, num_heads=4)
    with pytest.raises(ValueError, match="temporal_proportions"):
        SARMConfig(num_stages=2, temporal_proportions=(0.3, 0.3))
    with pytest.raises(ValueError, match="rewind_prob"):
        SARMConfig(num_stages=2, rewind_prob=1.5)


def test_window_and_rewind_indices() -> None:
    assert window_indices(2, 5, 2).tolist() == [0, 0, 0, 0, 2]
    assert window_indices(20, 5, 2).tolist() == [0, 14, 16, 18, 20]
    assert rewind_indices(20, 5, 2, 2).tolist() == [0, 18, 20, 18, 16]
    assert rewind_indices(20, 5, 2, 0).tolist() == window_indices(20, 5, 2).tolist()


def _dataset(lengths=(20, 30)) -> RobotDataset:
    names = ["a", "b", "c"]
    eps = []
    for i, n in enumerate(lengths):
        t = np.arange(n)
        eps.append(Episode(i, "do it", {
            "observation.image": np.repeat((t * 255 // n).astype(np.uint8)[:, None, None, None], 12, 1)
            .repeat(12, 2).repeat(3, 3),
            "observation.state": np.stack([t / n, t / n, t / n], 1).astype(np.float32),
        }, [SubtaskSpan("a", 0, n // 3), SubtaskSpan("b", n // 3, 2 * n // 3),
            SubtaskSpan("c", 2 * n // 3, n)]))  # fmt: skip
    return RobotDataset(eps, 10, {"do it": names, "other task": names})


def test_rewind_labels_follow_the_frames_and_perturbation_zeroes_targets() -> None:
    ds = _dataset()
    proc = SARMProcessor(
        ds, "do it", _config(rewind_prob=1.0, language_perturb_prob=0.0), HashingTextEmbedder(16)
    )
    batch = proc.sample(64, np.random.default_rng(0))
    # within a rewind window, entries after the turning point go down in time
    tau_stage = batch["stage"].float() + batch["tau"]
    assert (tau_stage[:, -1] <= tau_stage[:, -2]).all()
    proc = SARMProcessor(
        ds, "do it", _config(rewind_prob=0.0, language_perturb_prob=1.0), HashingTextEmbedder(16)
    )
    batch = proc.sample(16, np.random.default_rng(0))
    assert (batch["stage"] == 0).all()
    assert (batch["tau"] == 0).all()
    assert not torch.allclose(batch["text"], proc.text_table[0].expand(16, -1))


def test_short_episode_and_unknown_task_raise_naming_them() -> None:
    with pytest.raises(ValueError, match="episode 1: 8 frames, shorter than the frame window"):
        SARMProcessor(_dataset((20, 8)), "do it", _config(frame_gap=3), HashingTextEmbedder(16))
    with pytest.raises(ValueError, match="unknown task 'fly'"):
        SARMProcessor(_dataset(), "fly", _config(), HashingTextEmbedder(16))


def test_tiny_training_run_learns_the_stages() -> None:
    from lc_robotics_reward.training import train_sarm

    ds = _dataset((24, 30, 36))
    proc = SARMProcessor(
        ds,
        "do it",
        _config(rewind_prob=0.3, language_perturb_prob=0.1, lr=3e-3),
        HashingTextEmbedder(16),
    )
    model, history = train_sarm(proc, steps=150, batch_size=16, seed=0, show_progress=False)
    assert np.mean([h["loss"] for h in history[-20:]]) < np.mean([h["loss"] for h in history[:20]])
    ep = ds.episodes[2]
    pred = predict_episode(
        model, ep.frames["observation.image"], ep.frames["observation.state"], proc.text_table[0]
    )
    assert pred["progress"].shape == (36,)
    truth = np.repeat([0, 1, 2], 12)
    assert (pred["stage"] == truth).mean() > 0.8
    assert np.corrcoef(pred["progress"], np.arange(36))[0, 1] > 0.9


def test_non_finite_states_are_rejected_before_the_model() -> None:
    from lc_robotics_reward.modeling_sarm import SARMModel

    ep = _dataset((20, 20)).episodes[0]
    model = SARMModel(_config())
    states = ep.frames["observation.state"].copy()
    states[5, 2] = np.inf
    with pytest.raises(ValueError, match=r"states have non-finite .* frames \[5\]"):
        predict_episode(model, ep.frames["observation.image"], states, torch.zeros(16))
