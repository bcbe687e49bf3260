"""A small 2-D multi-stage manipulation simulator and a generator of mixed-quality demos."""

from __future__ import annotations

from lc_robotics_reward.sim.demos import (
    BEHAVIOURS,
    STYLES,
    Demo,
    demos_to_dataset,
    generate_demos,
    replay_demo,
)
from lc_robotics_reward.sim.render import IMAGE_SIZE, render
from lc_robotics_reward.sim.world import TASKS, ObjectSpec, Region, Step, TaskSpec, World

__all__ = [
    "BEHAVIOURS",
    "IMAGE_SIZE",
    "STYLES",
    "TASKS",
    "Demo",
    "ObjectSpec",
    "Region",
    "Step",
    "TaskSpec",
    "World",
    "demos_to_dataset",
    "generate_demos",
    "render",
    "replay_demo",
]
