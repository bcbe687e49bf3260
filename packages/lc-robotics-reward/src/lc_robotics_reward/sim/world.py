"""A small 2-D multi-stage manipulation world with stateful, physics-free dynamics.

The world is the unit square seen from above. A point gripper moves with bounded speed
and has an aperture in ``[0, 1]`` (0 open, 1 closed). Blocks are grasped by a closed
gripper next to them and follow it until the aperture drops below one half. Pucks cannot be
grasped; a *closed* gripper (think of a lowered tool) pushes them out of its way, an open
one passes over them. Everything is vectorised over a batch of ``N`` worlds, so a policy
can be rolled out in hundreds of worlds at once on a CPU.

Why not MuJoCo / Meta-World: their multi-stage tasks need offscreen OpenGL rendering
(OSMesa or EGL system libraries) and take seconds per episode on a shared CPU; this world
renders and steps thousands of frames per second with numpy alone, and its stage
structure (and the ground truth for it) is exact by construction.

Example:
    >>> import numpy as np
    >>> from lc_robotics_reward.sim import TASKS, World
    >>> world = World(TASKS["pick-place-push"], num_envs=4, seed=0)
    >>> obs = world.reset()
    >>> obs.shape
    (4, 13)
    >>> obs, success = world.step(np.full((4, 3), 0.5))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_SPEED = 0.035  # largest gripper displacement per step (unit-square lengths)
APERTURE_RATE = 0.34  # aperture change per step at |grip command| = 1
GRASP_RADIUS = 0.06  # a closed gripper grasps a free block closer than this
PUSH_RADIUS = 0.06  # a closed gripper keeps pucks at least this far away


@dataclass(frozen=True)
class Region:
    """A goal region: an axis-aligned square (``half`` = half side) or a disk (radius).

    Args:
        kind: ``"square"`` or ``"disk"``.
        centre: ``(x, y)`` in the unit square.
        size: half side of the square or radius of the disk.
        name: words used in subtask texts, e.g. ``"the bin"``.
    """

    kind: str
    centre: tuple[float, float]
    size: float
    name: str

    def __post_init__(self) -> None:
        if self.kind not in ("square", "disk"):
            raise ValueError(f"Region.kind={self.kind!r}; allowed: 'square', 'disk'")
        if not 0 < self.size < 0.5:
            raise ValueError(f"Region.size={self.size}; allowed: 0 < size < 0.5")

    def contains(self, xy: np.ndarray) -> np.ndarray:
        """Whether points ``xy`` (shape ``[..., 2]``) lie inside; returns ``[...]`` bool."""
        d = xy - np.asarray(self.centre)
        if self.kind == "square":
            return np.all(np.abs(d) <= self.size, axis=-1)
        return np.linalg.norm(d, axis=-1) <= self.size


@dataclass(frozen=True)
class ObjectSpec:
    """A movable object: ``kind`` ``"block"`` (graspable) or ``"puck"`` (pushable).

    ``spawn`` is ``(xmin, ymin, xmax, ymax)``: where it starts, uniformly at random.
    ``colour`` is an RGB triple used by the renderer.
    """

    name: str
    kind: str
    spawn: tuple[float, float, float, float]
    colour: tuple[int, int, int]

    def __post_init__(self) -> None:
        if self.kind not in ("block", "puck"):
            raise ValueError(f"ObjectSpec.kind={self.kind!r}; allowed: 'block', 'puck'")


@dataclass(frozen=True)
class Step:
    """One step of a task: ``"pick_place"`` a block into a region or ``"push"`` a puck."""

    kind: str
    obj: int
    goal: Region

    def __post_init__(self) -> None:
        if self.kind not in ("pick_place", "push"):
            raise ValueError(f"Step.kind={self.kind!r}; allowed: 'pick_place', 'push'")


@dataclass(frozen=True)
class TaskSpec:
    """A multi-stage task: objects, the ordered steps and the rollout horizon.

    ``subtasks`` lists the natural-language subtask names, in order; a pick-and-place step
    has four (reach, grasp, carry, release) and a push step two (move behind, push).
    """

    name: str
    text: str
    objects: tuple[ObjectSpec, ...]
    steps: tuple[Step, ...]
    horizon: int
    gripper_spawn: tuple[float, float, float, float] = (0.4, 0.85, 0.6, 0.95)

    def __post_init__(self) -> None:
        for step in self.steps:
            if not 0 <= step.obj < len(self.objects):
                raise ValueError(f"TaskSpec {self.name!r}: step object {step.obj} out of range")
            want = "block" if step.kind == "pick_place" else "puck"
            if self.objects[step.obj].kind != want:
                raise ValueError(f"TaskSpec {self.name!r}: {step.kind} needs a {want}")
        if self.horizon < 10:
            raise ValueError(f"TaskSpec.horizon={self.horizon}; allowed: >= 10")

    @property
    def subtasks(self) -> tuple[str, ...]:
        names: list[str] = []
        for step in self.steps:
            obj = self.objects[step.obj].name
            if step.kind == "pick_place":
                names += [
                    f"reach the {obj}",
                    f"grasp the {obj}",
                    f"carry the {obj} to {step.goal.name}",
                    f"release the {obj}",
                ]
            else:
                names += [f"move behind the {obj}", f"push the {obj} onto {step.goal.name}"]
        return tuple(names)

    @property
    def obs_dim(self) -> int:
        """Policy observation size: grip xy, aperture, held one-hot, object xy and offsets."""
        return 3 + 5 * len(self.objects)


_BIN = Region("square", (0.25, 0.78), 0.1, "the bin")
_TARGET = Region("disk", (0.8, 0.22), 0.08, "the target")
_MID_BIN = Region("square", (0.5, 0.78), 0.1, "the bin")

TASKS: dict[str, TaskSpec] = {
    "pick-place-push": TaskSpec(
        name="pick-place-push",
        text="put the red block in the bin, then push the yellow puck onto the target",
        objects=(
            ObjectSpec("red block", "block", (0.12, 0.12, 0.35, 0.35), (220, 40, 40)),
            ObjectSpec("yellow puck", "puck", (0.48, 0.42, 0.62, 0.58), (230, 210, 40)),
        ),
        steps=(Step("pick_place", 0, _BIN), Step("push", 1, _TARGET)),
        horizon=200,
    ),
    "two-blocks": TaskSpec(
        name="two-blocks",
        text="put the red block in the bin, then put the blue block in the bin",
        objects=(
            ObjectSpec("red block", "block", (0.1, 0.1, 0.35, 0.3), (220, 40, 40)),
            ObjectSpec("blue block", "block", (0.65, 0.1, 0.9, 0.3), (50, 80, 230)),
        ),
        steps=(Step("pick_place", 0, _MID_BIN), Step("pick_place", 1, _MID_BIN)),
        horizon=220,
    ),
}


class World:
    """``num_envs`` copies of one task, stepped together.

    State: ``grip [N, 2]``, ``aperture [N]``, ``objects [N, K, 2]``, ``held [N]`` (index of
    the held block or -1). Actions are ``[N, 3]``: a target position in the unit square,
    which the gripper approaches by at most ``MAX_SPEED`` per step (end-effector position
    control), and a grip command whose sign closes (+) or opens (-) the gripper by
    ``APERTURE_RATE`` per step.
    """

    def __init__(self, task: TaskSpec, num_envs: int, seed: int) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs={num_envs}; allowed: >= 1")
        self.task = task
        self.num_envs = num_envs
        self.rng = np.random.default_rng(seed)
        k = len(task.objects)
        self.grip = np.zeros((num_envs, 2))
        self.aperture = np.zeros(num_envs)
        self.objects = np.zeros((num_envs, k, 2))
        self.held = np.full(num_envs, -1)
        self._is_block = np.array([o.kind == "block" for o in task.objects])

    def reset(self) -> np.ndarray:
        """Sample start states; returns the policy observation ``[N, obs_dim]``."""
        n = self.num_envs
        gx0, gy0, gx1, gy1 = self.task.gripper_spawn
        self.grip = self.rng.uniform((gx0, gy0), (gx1, gy1), size=(n, 2))
        self.aperture = np.zeros(n)
        for i, spec in enumerate(self.task.objects):
            x0, y0, x1, y1 = spec.spawn
            self.objects[:, i] = self.rng.uniform((x0, y0), (x1, y1), size=(n, 2))
        self.held = np.full(n, -1)
        return self.observation()

    def observation(self) -> np.ndarray:
        """Policy observation ``[N, 3 + 5K]``: grip xy, aperture, held one-hot, object xy,
        object xy relative to the gripper."""
        k = len(self.task.objects)
        onehot = np.zeros((self.num_envs, k))
        rows = np.nonzero(self.held >= 0)[0]
        onehot[rows, self.held[rows]] = 1.0
        rel = self.objects - self.grip[:, None, :]
        return np.concatenate(
            [
                self.grip,
                self.aperture[:, None],
                onehot,
                self.objects.reshape(self.num_envs, -1),
                rel.reshape(self.num_envs, -1),
            ],
            axis=1,
        )

    def proprio(self) -> np.ndarray:
        """Robot state seen by the reward model ``[N, 3]``: grip xy and aperture."""
        return np.concatenate([self.grip, self.aperture[:, None]], axis=1)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Apply ``action [N, 3]``; returns ``(observation, success [N] bool)``."""
        action = np.asarray(action, dtype=float)
        if action.shape != (self.num_envs, 3):
            raise ValueError(f"action shape {action.shape}; expected ({self.num_envs}, 3)")
        delta = np.clip(action[:, :2], 0.0, 1.0) - self.grip
        dist = np.linalg.norm(delta, axis=1, keepdims=True)
        self.grip = self.grip + delta * np.minimum(1.0, MAX_SPEED / np.maximum(dist, 1e-9))
        self.aperture = np.clip(self.aperture + APERTURE_RATE * np.sign(action[:, 2]), 0.0, 1.0)
        # release
        self.held[(self.held >= 0) & (self.aperture < 0.5)] = -1
        # grasp: a closed gripper next to a free block takes it
        closing = (self.held < 0) & (self.aperture >= 0.99)
        if closing.any():
            dist = np.linalg.norm(self.objects - self.grip[:, None, :], axis=-1)
            dist[:, ~self._is_block] = np.inf
            nearest = dist.argmin(axis=1)
            ok = closing & (dist[np.arange(self.num_envs), nearest] < GRASP_RADIUS)
            self.held[ok] = nearest[ok]
        rows = np.nonzero(self.held >= 0)[0]
        self.objects[rows, self.held[rows]] = self.grip[rows]
        # push pucks out of a closed gripper's way
        lowered = self.aperture >= 0.5
        for i, spec in enumerate(self.task.objects):
            if spec.kind != "puck":
                continue
            d = self.objects[:, i] - self.grip
            r = np.linalg.norm(d, axis=1)
            hit = lowered & (r < PUSH_RADIUS)
            if hit.any():
                u = d[hit] / np.maximum(r[hit, None], 1e-9)
                self.objects[hit, i] = np.clip(self.grip[hit] + PUSH_RADIUS * u, 0.0, 1.0)
        return self.observation(), self.success()

    def set_state(
        self, grip: np.ndarray, aperture: np.ndarray, objects: np.ndarray, held: np.ndarray
    ) -> np.ndarray:
        """Put every world in a given state; returns the observation ``[N, obs_dim]``.

        Args:
            grip: ``[N, 2]`` gripper positions.
            aperture: ``[N]`` apertures in ``[0, 1]``.
            objects: ``[N, K, 2]`` object positions.
            held: ``[N]`` index of the held block or -1.
        """
        n, k = self.num_envs, len(self.task.objects)
        grip = np.asarray(grip, dtype=float).reshape(n, 2)
        aperture = np.asarray(aperture, dtype=float).reshape(n)
        objects = np.asarray(objects, dtype=float).reshape(n, k, 2)
        held = np.asarray(held).astype(int).reshape(n)
        if ((held < -1) | (held >= k)).any():
            raise ValueError(f"held={held.tolist()}; allowed: -1 or an object index < {k}")
        self.grip, self.aperture = grip.copy(), aperture.copy()
        self.objects, self.held = objects.copy(), held.copy()
        return self.observation()

    def state_from_observation(
        self, obs: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Invert :meth:`observation`: ``(grip, aperture, objects, held)`` from ``[N, obs_dim]``."""
        obs = np.asarray(obs, dtype=float)
        k = len(self.task.objects)
        if obs.ndim != 2 or obs.shape[1] != self.task.obs_dim:
            raise ValueError(f"obs shape {obs.shape}; expected [N, {self.task.obs_dim}]")
        onehot = obs[:, 3 : 3 + k]
        held = np.where(onehot.max(1) > 0.5, onehot.argmax(1), -1)
        objects = obs[:, 3 + k : 3 + 3 * k].reshape(-1, k, 2)
        return obs[:, :2], obs[:, 2], objects, held

    def steps_done(self) -> np.ndarray:
        """How many of the task's steps are complete now, in order ``[N]`` int.

        Step ``j`` counts only if steps ``0..j-1`` count too; ``steps_done() ==
        len(task.steps)`` is :meth:`success` except that it ignores a held block.
        """
        ok = np.ones(self.num_envs, dtype=bool)
        count = np.zeros(self.num_envs, dtype=int)
        for step in self.task.steps:
            ok = ok & step.goal.contains(self.objects[:, step.obj])
            if step.kind == "pick_place":
                ok = ok & (self.held != step.obj)
            count += ok
        return count

    def success(self) -> np.ndarray:
        """Whether every step's goal holds now (and nothing is held) ``[N]`` bool."""
        ok = self.held < 0
        for step in self.task.steps:
            ok = ok & step.goal.contains(self.objects[:, step.obj])
            if step.kind == "pick_place":
                ok = ok & (self.held != step.obj)
        return ok
