"""Turning annotated episodes into SARM training windows (with augmentations) and back.

A window for frame ``t`` holds the episode's first frame and ``F - 1`` frames ``gap``
apart ending at ``t`` (indices below 0 clamp to 0). Two augmentations follow the paper:

- **rewind**: the window plays ``F - 1 - r`` frames forward up to ``t`` and then ``r``
  frames backward (``t - gap``, ..., ``t - r * gap``); every entry keeps the labels of
  the frame it shows, so the model sees progress go down.
- **language perturbation**: the window gets another task's text and the targets become
  stage 0, tau 0: frames that do not belong to the instruction show no progress on it.

Example:
    >>> window_indices(10, num_frames=5, gap=3).tolist()
    [0, 1, 4, 7, 10]
    >>> rewind_indices(10, num_frames=5, gap=3, rewind=2).tolist()
    [0, 7, 10, 7, 4]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from lc_robotics_reward.configuration_sarm import SARMConfig
from lc_robotics_reward.dataset import Episode, RobotDataset
from lc_robotics_reward.errors import AnnotationError
from lc_robotics_reward.labels import derive_labels
from lc_robotics_reward.modeling_sarm import SARMModel
from lc_robotics_reward.text import TextEmbedder, _embed_texts

IMAGE_KEY = "observation.image"
STATE_KEY = "observation.state"
DISTRACTOR_TEXTS = (
    "open the drawer",
    "wipe the table with the sponge",
    "fold the towel in half",
    "stack the cups",
)


def resize_frames(images: np.ndarray, size: int, batch: int = 256) -> np.ndarray:
    """Resize camera frames ``[T, H, W, 3]`` uint8 to ``[T, size, size, 3]`` uint8.

    Bilinear with antialiasing (so a large LeRobot camera frame, e.g. 480x640, becomes
    the model's square input); frames already of that size are returned unchanged.

    Example:
        >>> resize_frames(np.zeros((2, 48, 64, 3), np.uint8), 16).shape
        (2, 16, 16, 3)
    """
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[3] != 3:
        raise ValueError(f"images have shape {images.shape}; expected [T, H, W, 3]")
    if images.shape[1:3] == (size, size):
        return images.astype(np.uint8, copy=False)
    out = []
    for i in range(0, images.shape[0], batch):
        x = torch.from_numpy(np.ascontiguousarray(images[i : i + batch])).permute(0, 3, 1, 2)
        y = torch.nn.functional.interpolate(
            x.float(), size=(size, size), mode="bilinear", antialias=True, align_corners=False
        )
        out.append(y.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy())
    return np.concatenate(out)


def window_indices(t: int, num_frames: int, gap: int) -> np.ndarray:
    """``[num_frames]`` frame indices: the first frame, then ``num_frames - 1`` ending at ``t``."""
    recent = t - gap * np.arange(num_frames - 2, -1, -1)
    return np.concatenate([[0], np.maximum(recent, 0)]).astype(np.int64)


def rewind_indices(t: int, num_frames: int, gap: int, rewind: int) -> np.ndarray:
    """Window that plays forward to ``t`` and then ``rewind`` entries back (clamped at 0)."""
    if not 0 <= rewind <= num_frames - 2:
        raise ValueError(f"rewind={rewind}; allowed: 0..{num_frames - 2}")
    forward = t - gap * np.arange(num_frames - 2 - rewind, -1, -1)
    backward = t - gap * np.arange(1, rewind + 1)
    return np.maximum(np.concatenate([[0], forward, backward]), 0).astype(np.int64)


@dataclass
class _Prepared:
    images: np.ndarray  # [T, H, W, 3] uint8
    states: np.ndarray  # [T, S] float32
    stage: np.ndarray  # [T] int64
    tau: np.ndarray  # [T] float32
    text: int  # row in the text table


class SARMProcessor:
    """Holds a dataset's episodes of one task, their labels and the text embeddings.

    Args:
        dataset: annotated episodes.
        task: which task's episodes to use (its subtasks are the stages).
        config: the model config (window size, augmentations).
        embedder: a :class:`~lc_robotics_reward.TextEmbedder` (``embed_texts``; any
            lc-agents ``Embedder`` fits too) for the task and the perturbation texts; a
            plain callable is deprecated.
        alpha: temporal proportions; default: computed from ``dataset``.
        distractors: texts for language perturbation (other tasks in the dataset are
            added to them).
        image_key: the camera feature (``uint8 [T, H, W, 3]``; e.g. LeRobot's
            ``observation.images.top``); frames are resized to ``config.image_size``.
        state_key: the robot-state feature (``[T, S]``, or ``[T]`` for a scalar).

    Raises:
        AnnotationError: unknown task, or annotations that do not tile an episode.
        ValueError: an episode shorter than the frame window (named in the message), or
            text vectors whose shape is not ``[n, config.text_dim]``.
        TypeError: ``embedder`` has no ``embed_texts`` and is not callable.
    """

    def __init__(
        self,
        dataset: RobotDataset,
        task: str,
        config: SARMConfig,
        embedder: TextEmbedder,
        alpha: np.ndarray | None = None,
        distractors: Sequence[str] = DISTRACTOR_TEXTS,
        image_key: str = IMAGE_KEY,
        state_key: str = STATE_KEY,
    ) -> None:
        if task not in dataset.subtasks:
            raise AnnotationError(f"unknown task {task!r}; known: {dataset.tasks}")
        self.task = task
        self.subtasks = dataset.subtasks[task]
        if len(self.subtasks) != config.num_stages:
            raise ValueError(
                f"task {task!r} has {len(self.subtasks)} subtasks; config.num_stages="
                f"{config.num_stages}"
            )
        self.config = config
        self.image_key = image_key
        self.state_key = state_key
        self.alpha = dataset.temporal_proportions(task) if alpha is None else np.asarray(alpha)
        others = [t for t in dataset.tasks if t != task] + [d for d in distractors if d != task]
        texts = [task, *dict.fromkeys(others)]
        self.text_table = torch.from_numpy(_embed_texts(embedder, texts))
        if self.text_table.shape[1] != config.text_dim:
            raise ValueError(
                f"text embedder gives {self.text_table.shape[1]}-d vectors; "
                f"config.text_dim={config.text_dim}"
            )
        self.episodes: list[_Prepared] = []
        for ep in dataset.episodes:
            if ep.task != task:
                continue
            self.episodes.append(self._prepare(ep))
        if not self.episodes:
            raise AnnotationError(f"no episode of task {task!r}")
        self._lengths = np.array([len(e.stage) for e in self.episodes])

    def _prepare(self, ep: Episode) -> _Prepared:
        if ep.length < self.config.window_span:
            raise ValueError(
                f"episode {ep.index}: {ep.length} frames, shorter than the frame window "
                f"({self.config.window_span} frames = ({self.config.num_frames} - 2) * "
                f"{self.config.frame_gap} + 1)"
            )
        for key in (self.image_key, self.state_key):
            if key not in ep.frames:
                raise ValueError(
                    f"episode {ep.index}: feature {key!r} is missing; features: {sorted(ep.frames)}"
                )
        states = np.asarray(ep.frames[self.state_key], dtype=np.float32)
        states = states.reshape(ep.length, -1)
        if states.shape[1] != self.config.state_dim:
            raise ValueError(
                f"episode {ep.index}: {self.state_key!r} has {states.shape[1]} values per "
                f"frame; config.state_dim={self.config.state_dim}"
            )
        labels = derive_labels(ep.subtasks, ep.length, self.subtasks, self.alpha, ep.index)
        return _Prepared(
            images=resize_frames(ep.frames[self.image_key], self.config.image_size),
            states=states,
            stage=labels.stage,
            tau=labels.tau.astype(np.float32),
            text=0,
        )

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        """A training batch with augmentations: images ``[B, F, H, W, 3]`` uint8, states
        ``[B, F, S]``, text ``[B, D]``, stage ``[B, F]``, tau ``[B, F]``."""
        cfg = self.config
        ep_ids = rng.choice(
            len(self.episodes), size=batch_size, p=self._lengths / self._lengths.sum()
        )
        images, states, stages, taus, texts = [], [], [], [], []
        for e in ep_ids:
            ep = self.episodes[int(e)]
            t = int(rng.integers(len(ep.stage)))
            if rng.random() < cfg.rewind_prob and cfg.max_rewind > 0:
                idx = rewind_indices(
                    t, cfg.num_frames, cfg.frame_gap, int(rng.integers(1, cfg.max_rewind + 1))
                )
            else:
                idx = window_indices(t, cfg.num_frames, cfg.frame_gap)
            images.append(ep.images[idx])
            states.append(ep.states[idx])
            if rng.random() < cfg.language_perturb_prob and len(self.text_table) > 1:
                texts.append(int(rng.integers(1, len(self.text_table))))
                stages.append(np.zeros(cfg.num_frames, dtype=np.int64))
                taus.append(np.zeros(cfg.num_frames, dtype=np.float32))
            else:
                texts.append(ep.text)
                stages.append(ep.stage[idx])
                taus.append(ep.tau[idx])
        return {
            "images": torch.from_numpy(np.stack(images)),
            "states": torch.from_numpy(np.stack(states)),
            "text": self.text_table[torch.as_tensor(texts)],
            "stage": torch.from_numpy(np.stack(stages)),
            "tau": torch.from_numpy(np.stack(taus)),
        }


@torch.no_grad()
def predict_episode(
    model: SARMModel,
    images: np.ndarray,
    states: np.ndarray,
    text: np.ndarray | torch.Tensor,
    batch_size: int = 256,
) -> dict[str, np.ndarray]:
    """Per-frame predictions for one episode (each frame at the end of its own window).

    Args:
        model: a trained model (put in eval mode here).
        images: ``[T, H, W, 3]`` uint8 frames (resized to the model's ``image_size``).
        states: ``[T, S]`` robot states (``[T]`` for a scalar state).
        text: ``[D]`` task-text embedding.

    Returns:
        ``stage [T]`` (argmax), ``stage_probs [T, K]``, ``tau [T]`` and ``progress [T]``.

    Raises:
        ValueError: frame and state counts differ, or a state holds NaN or inf.
    """
    cfg = model.config
    t_len = images.shape[0]
    images = resize_frames(images, cfg.image_size)
    states = np.asarray(states, dtype=np.float32)
    if states.ndim == 0 or states.shape[0] != t_len:
        raise ValueError(f"{t_len} frames but states of shape {states.shape}")
    states = states.reshape(t_len, -1)
    bad = ~np.isfinite(np.asarray(states, dtype=np.float64))
    if bad.any():
        rows = np.nonzero(bad.reshape(t_len, -1).any(1))[0]
        raise ValueError(
            f"states have non-finite values (NaN or inf) at frames {rows[:5].tolist()}"
        )
    model.eval()
    feats = torch.cat(
        [
            model.encode_frames(torch.from_numpy(np.ascontiguousarray(images[i : i + batch_size])))
            for i in range(0, t_len, batch_size)
        ]
    )
    st = torch.from_numpy(np.asarray(states, dtype=np.float32))
    txt = torch.as_tensor(np.asarray(text, dtype=np.float32))
    idx = torch.from_numpy(
        np.stack([window_indices(t, cfg.num_frames, cfg.frame_gap) for t in range(t_len)])
    )
    out: dict[str, list[torch.Tensor]] = {"stage": [], "stage_probs": [], "tau": [], "progress": []}
    for i in range(0, t_len, batch_size):
        w = idx[i : i + batch_size]
        res = model.forward_features(feats[w], st[w], txt.expand(len(w), -1))
        out["stage"].append(res["stage"][:, -1])
        out["stage_probs"].append(res["stage_logits"][:, -1].softmax(-1))
        out["tau"].append(res["tau"][:, -1])
        out["progress"].append(res["progress"][:, -1])
    return {k: torch.cat(v).numpy() for k, v in out.items()}


def text_embedding(processor: SARMProcessor) -> torch.Tensor:
    """The embedding ``[D]`` of the processor's own task text."""
    return processor.text_table[0]


def episode_arrays(ep: Episode) -> Mapping[str, np.ndarray]:
    """The image and state arrays SARM reads from an episode."""
    return {"images": ep.frames[IMAGE_KEY], "states": ep.frames[STATE_KEY]}
