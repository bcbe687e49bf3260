"""Scripted demonstrations of mixed quality, with subtask annotations from the script's phases.

A scripted expert walks through the task's phases (one per subtask). Each demonstration
draws a *style*:

- ``"good"``: the expert with target noise and, at a rate drawn per demonstrator,
  hesitations (pauses of 2-8 frames before moving to the next object).
- ``"regress"``: while carrying a block it turns round part-way and carries it back to
  where it was grasped; then either recovers (carries it to the goal after all) or
  gives up (drops it and idles until the operator stops recording).
- ``"fail"``: it drops the block while carrying it (or stops pushing), then idles.

Every frame records its phase (the annotated stage) and what the demonstrator was doing
(``BEHAVIOURS``), which the evaluation uses as ground truth for regressions.

Example:
    >>> from lc_robotics_reward.sim import TASKS, generate_demos
    >>> demos = generate_demos(TASKS["two-blocks"], 2, seed=0, styles={"good": 1.0})
    >>> demos[0].success, demos[0].images.shape[1:]
    (True, (40, 40, 3))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lc_robotics_reward.dataset import Episode, RobotDataset
from lc_robotics_reward.labels import spans_from_stages
from lc_robotics_reward.sim.render import IMAGE_SIZE, render
from lc_robotics_reward.sim.world import PUSH_RADIUS, TaskSpec, World

BEHAVIOURS = ("expert", "pause", "regress", "drop", "idle")
STYLES = ("good", "regress", "fail")


@dataclass
class Demo:
    """One demonstration; arrays are per frame (``T`` frames, action taken after the obs).

    Attributes:
        task: task name.
        text: task instruction.
        style: ``"good"``, ``"regress"`` or ``"fail"``.
        obs: policy observations ``[T, obs_dim]`` float32.
        proprio: robot state ``[T, 3]`` float32 (grip xy, aperture).
        images: top-down frames ``[T, H, W, 3]`` uint8.
        actions: actions ``[T, 3]`` float32 (target xy, grip command).
        stage: scripted phase index per frame ``[T]`` int (the annotation).
        behaviour: index into ``BEHAVIOURS`` per frame ``[T]`` int.
        success: whether the task was complete at the end.
    """

    task: str
    text: str
    style: str
    obs: np.ndarray
    proprio: np.ndarray
    images: np.ndarray
    actions: np.ndarray
    stage: np.ndarray
    behaviour: np.ndarray
    success: bool

    @property
    def length(self) -> int:
        return int(self.actions.shape[0])


def _phases(task: TaskSpec) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for j, step in enumerate(task.steps):
        names = (
            ("reach", "grasp", "carry", "release")
            if step.kind == "pick_place"
            else ("behind", "push")
        )
        out += [(n, j) for n in names]
    return out


def _demo(task: TaskSpec, style: str, rng: np.random.Generator, seed: int) -> Demo:
    world = World(task, 1, seed=seed)
    world.reset()
    phases = _phases(task)
    pause_prob = rng.uniform(0.0, 0.5)  # how hesitant this demonstrator is
    noise = 0.015  # target-position noise
    goal_jitter = {j: rng.uniform(-0.03, 0.03, size=2) for j in range(len(task.steps))}
    move_phases = [i for i, (n, _) in enumerate(phases) if n in ("carry", "push")]
    carry_phases = [i for i, (n, _) in enumerate(phases) if n == "carry"]
    bad_phase = -1
    if style == "regress":
        bad_phase = int(rng.choice(carry_phases))
    elif style == "fail":
        bad_phase = int(rng.choice(move_phases))
    trigger = rng.uniform(0.4, 0.85) if style == "regress" else rng.uniform(0.15, 0.85)
    recover = style == "regress" and rng.random() < 0.5

    grips: list[np.ndarray] = []
    apertures: list[float] = []
    objects: list[np.ndarray] = []
    obs: list[np.ndarray] = []
    proprio: list[np.ndarray] = []
    actions: list[np.ndarray] = []
    stages: list[int] = []
    behaviours: list[int] = []
    phase = 0
    pause = int(rng.integers(2, 9)) if rng.random() < pause_prob else 0
    phase_start = world.grip[0].copy()
    phase_dist0 = 1.0
    mode = "expert"  # expert | regress | drop | idle
    idle_left = 0
    done_frames = 0

    while len(actions) < int(task.horizon * 1.5):
        grip = world.grip[0].copy()
        name, j = phases[min(phase, len(phases) - 1)]
        stage = min(phase, len(phases) - 1)
        step = task.steps[j]
        obj = world.objects[0, step.obj]
        goal = np.asarray(step.goal.centre) + goal_jitter[j]
        holding = bool(world.held[0] >= 0)
        act = np.concatenate([grip, [1.0 if holding else -1.0]])
        beh = 0
        if phase >= len(phases):  # finished: a few still frames, then stop
            act[2] = -1.0
            done_frames += 1
            if done_frames > 3:
                break
        elif mode == "idle":
            act[:2] = grip + rng.normal(0, 0.01, size=2)
            beh = 4
            idle_left -= 1
            if idle_left <= 0:
                break
        elif pause > 0:
            if name == "push":
                act[2] = 1.0
            beh = 1
            pause -= 1
        elif mode == "regress":
            act[:2] = phase_start + rng.normal(0, noise, size=2)
            act[2] = 1.0
            beh = 2
            if np.linalg.norm(grip - phase_start) < 0.03:
                mode = "expert" if recover else "drop"
                bad_phase = -1
        elif mode == "drop":
            act[2] = -1.0
            beh = 3
            if world.aperture[0] <= 0.0:
                mode = "idle"
                idle_left = int(rng.integers(15, 50))
        else:
            if name == "reach":
                act[:2], act[2] = obj, -1.0
                if np.linalg.norm(grip - obj) < 0.05:
                    phase += 1
            elif name == "grasp":
                act[:2], act[2] = obj, 1.0
                if world.held[0] == step.obj:
                    phase += 1
                    phase_start = grip.copy()
                    phase_dist0 = max(float(np.linalg.norm(goal - grip)), 1e-6)
            elif name == "carry":
                act[:2], act[2] = goal, 1.0
                frac = 1.0 - float(np.linalg.norm(goal - grip)) / phase_dist0
                if phase == bad_phase and frac >= trigger:
                    mode = "regress" if style == "regress" else "drop"
                    act[:2] = grip
                    beh = 2 if style == "regress" else 3
                elif np.linalg.norm(grip - goal) < 0.06:
                    phase += 1
            elif name == "release":
                act[:2], act[2] = goal, -1.0
                if world.aperture[0] <= 0.0:
                    phase += 1
            elif name == "behind":
                u = np.asarray(step.goal.centre) - obj
                u = u / max(float(np.linalg.norm(u)), 1e-9)
                spot = obj - (PUSH_RADIUS + 0.025) * u
                act[:2], act[2] = spot, -1.0
                if np.linalg.norm(grip - spot) < 0.02:
                    phase += 1
                    dist0 = float(np.linalg.norm(np.asarray(step.goal.centre) - obj))
                    phase_dist0 = max(dist0, 1e-6)
            elif name == "push":
                centre = np.asarray(step.goal.centre)
                u = centre - obj
                dist = float(np.linalg.norm(u))
                u = u / max(dist, 1e-9)
                act[:2], act[2] = obj - (PUSH_RADIUS - 0.015) * u, 1.0
                if phase == bad_phase and 1.0 - dist / phase_dist0 >= trigger:
                    mode = "idle"
                    idle_left = int(rng.integers(15, 50))
                    act[:2] = grip
                    beh = 4
                elif dist < 0.025:
                    phase += 1
            if beh == 0:
                act[:2] += rng.normal(0, noise, size=2)
            starts_move = phase < len(phases) and phases[phase][0] in ("reach", "behind")
            if phase != stage and starts_move and rng.random() < pause_prob:
                pause = int(rng.integers(2, 9))
        obs.append(world.observation()[0])
        proprio.append(world.proprio()[0])
        grips.append(grip)
        apertures.append(float(world.aperture[0]))
        objects.append(world.objects[0].copy())
        stages.append(stage)
        behaviours.append(beh)
        act[:2] = np.clip(act[:2], 0.0, 1.0)
        actions.append(act)
        world.step(act[None])

    images = render(task, np.stack(grips), np.asarray(apertures), np.stack(objects), IMAGE_SIZE)
    return Demo(
        task=task.name,
        text=task.text,
        style=style,
        obs=np.stack(obs).astype(np.float32),
        proprio=np.stack(proprio).astype(np.float32),
        images=images,
        actions=np.stack(actions).astype(np.float32),
        stage=np.asarray(stages, dtype=np.int64),
        behaviour=np.asarray(behaviours, dtype=np.int64),
        success=bool(world.success()[0]),
    )


def generate_demos(
    task: TaskSpec,
    num: int,
    seed: int,
    styles: Mapping[str, float] | None = None,
) -> list[Demo]:
    """Generate ``num`` demonstrations of ``task`` with styles drawn from ``styles``.

    Args:
        task: the task to demonstrate.
        num: how many demonstrations.
        seed: random seed (start states, speeds, styles, noise).
        styles: probabilities of ``"good"``, ``"regress"`` and ``"fail"``; they are
            normalised. Default: only good demonstrations.

    Returns:
        The demonstrations, in generation order.
    """
    if num < 1:
        raise ValueError(f"num={num}; allowed: >= 1")
    styles = dict(styles or {"good": 1.0})
    unknown = set(styles) - set(STYLES)
    if unknown:
        raise ValueError(f"styles has {sorted(unknown)}; allowed: {STYLES}")
    names = list(styles)
    p = np.asarray([styles[n] for n in names], dtype=float)
    if (p < 0).any() or p.sum() <= 0:
        raise ValueError(f"styles={styles}; probabilities must be >= 0 with a positive sum")
    rng = np.random.default_rng(seed)
    out = []
    for i in range(num):
        style = names[int(rng.choice(len(names), p=p / p.sum()))]
        out.append(_demo(task, style, rng, seed=int(rng.integers(2**31)) + i))
    return out


def replay_demo(task: TaskSpec, demo: Demo) -> bool:
    """Replay a demonstration's actions open loop from its first state.

    The world is put in the state of ``demo.obs[0]`` and stepped with ``demo.actions``.
    Returns whether the task is complete at any step (the criterion of the policy
    rollouts). Every good demonstration passes: the simulator is deterministic, so this
    checks that the recorded actions, not the script's internal state, solve the task.
    """
    if demo.task != task.name:
        raise ValueError(f"demo of task {demo.task!r} replayed in task {task.name!r}")
    world = World(task, 1, seed=0)
    world.set_state(*world.state_from_observation(demo.obs[:1]))
    done = False
    for act in demo.actions:
        _, success = world.step(act[None].astype(float))
        done = done or bool(success[0])
    return done


def demos_to_dataset(
    demos: Sequence[Demo], tasks: Mapping[str, TaskSpec], fps: float = 10.0
) -> RobotDataset:
    """Pack demonstrations into a :class:`~lc_robotics_reward.dataset.RobotDataset`.

    Features: ``observation.image`` ``[40, 40, 3]`` uint8, ``observation.state`` (robot
    state, ``[3]``), ``observation.environment_state`` (policy observation), ``action``
    and ``behaviour``; annotations come from the script's phases; ``meta`` records the
    style and the success.
    """
    episodes = []
    for i, d in enumerate(demos):
        spec = tasks[d.task]
        episodes.append(
            Episode(
                index=i,
                task=d.text,
                frames={
                    "observation.image": d.images,
                    "observation.state": d.proprio,
                    "observation.environment_state": d.obs,
                    "action": d.actions,
                    "behaviour": d.behaviour,
                },
                subtasks=spans_from_stages(d.stage, spec.subtasks),
                meta={"style": d.style, "success": d.success, "task_name": d.task},
            )
        )
    subtasks = {
        tasks[name].text: list(tasks[name].subtasks)
        for name in dict.fromkeys(d.task for d in demos)
    }
    return RobotDataset(episodes, fps=fps, subtasks=subtasks)
