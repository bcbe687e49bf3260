"""Top-down RGB rendering of :class:`~lc_robotics_reward.sim.world.World` states (numpy only)."""

from __future__ import annotations

import numpy as np

from lc_robotics_reward.sim.world import TaskSpec

IMAGE_SIZE = 40  # pixels per side
_OBJECT_RADIUS = 0.045
_GRIP_RADIUS = 0.03


def render(
    task: TaskSpec,
    grip: np.ndarray,
    aperture: np.ndarray,
    objects: np.ndarray,
    size: int = IMAGE_SIZE,
) -> np.ndarray:
    """Render ``T`` states to ``[T, size, size, 3]`` uint8 images (y axis points up).

    Args:
        task: the task (goal regions and object colours).
        grip: gripper positions ``[T, 2]``.
        aperture: gripper apertures ``[T]`` in ``[0, 1]``.
        objects: object positions ``[T, K, 2]``.
        size: image side in pixels.

    Example:
        >>> import numpy as np
        >>> from lc_robotics_reward.sim import TASKS
        >>> img = render(TASKS["two-blocks"], np.full((1, 2), 0.5), np.zeros(1),
        ...              np.full((1, 2, 2), 0.2))
        >>> img.shape, img.dtype
        ((1, 40, 40, 3), dtype('uint8'))
    """
    t = grip.shape[0]
    centres = (np.arange(size) + 0.5) / size
    px = np.stack(np.meshgrid(centres, centres[::-1], indexing="xy"), axis=-1)  # [H, W, 2]
    img = np.full((t, size, size, 3), 30, dtype=np.uint8)
    seen: set[tuple[str, tuple[float, float]]] = set()
    for step in task.steps:
        key = (step.goal.kind, step.goal.centre)
        if key in seen:
            continue
        seen.add(key)
        mask = step.goal.contains(px)
        img[:, mask] = (90, 90, 90) if step.goal.kind == "square" else (40, 140, 60)
    for i, spec in enumerate(task.objects):
        d = np.linalg.norm(px[None] - objects[:, i, None, None, :], axis=-1)  # [T, H, W]
        img[d <= _OBJECT_RADIUS] = spec.colour
    d = np.linalg.norm(px[None] - grip[:, None, None, :], axis=-1)
    ring = (d <= _GRIP_RADIUS) & (d >= _GRIP_RADIUS * 0.45)
    shade = (255 - 135 * np.clip(aperture, 0, 1)).astype(np.uint8)  # closed -> darker
    colour = np.stack([shade, shade, np.full_like(shade, 255)], axis=-1)  # [T, 3]
    tt = np.nonzero(ring)[0]
    img[ring] = colour[tt]
    return img
