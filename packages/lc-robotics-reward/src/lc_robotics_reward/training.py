"""Training loop of the SARM reward model.

Example:
    >>> from lc_robotics_reward.training import train_sarm  # doctest: +SKIP
    >>> model, history = train_sarm(processor, steps=500, batch_size=32, seed=0)  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from lc_robotics_reward.modeling_sarm import SARMModel, sarm_loss
from lc_robotics_reward.processor_sarm import SARMProcessor


def train_sarm(
    processor: SARMProcessor,
    steps: int,
    batch_size: int,
    seed: int,
    frame_encoder: nn.Module | None = None,
    show_progress: bool = True,
) -> tuple[SARMModel, list[dict[str, float]]]:
    """Train a :class:`SARMModel` on the processor's windows with AdamW and cosine decay.

    Args:
        processor: episodes, labels and augmentations (its config sizes the model).
        steps: optimiser steps.
        batch_size: windows per step.
        seed: seeds the model initialisation and the batch sampling.
        frame_encoder: optional frozen pretrained frame encoder.
        show_progress: show a progress bar.

    Returns:
        The trained model (in eval mode) and the per-step losses.
    """
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps={steps}, batch_size={batch_size}; allowed: >= 1")
    cfg = processor.config
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = SARMModel(cfg, frame_encoder)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=cfg.lr, total_steps=steps, pct_start=0.1
    )
    history: list[dict[str, float]] = []
    model.train()
    for _ in tqdm(range(steps), desc="SARM", disable=not show_progress, leave=False):
        batch = processor.sample(batch_size, rng)
        out = model(batch["images"], batch["states"], batch["text"], stage_condition=batch["stage"])
        loss, parts = sarm_loss(out, batch["stage"], batch["tau"], cfg.stage_loss_weight)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        history.append({"loss": float(loss.detach()), **parts})
    model.eval()
    return model, history
