"""The 2-D world's mechanics and the mixed-quality demonstration generator."""

from __future__ import annotations

import numpy as np
import pytest

from lc_robotics_reward.labels import validate_spans
from lc_robotics_reward.sim import (
    BEHAVIOURS,
    TASKS,
    World,
    demos_to_dataset,
    generate_demos,
    replay_demo,
)


def test_grasp_carry_release() -> None:
    world = World(TASKS["two-blocks"], 1, seed=0)
    world.reset()
    block = world.objects[0, 0].copy()
    for _ in range(40):
        world.step(np.array([[*block, -1.0]]))
    for _ in range(3):
        world.step(np.array([[*block, 1.0]]))
    assert world.held[0] == 0
    goal = np.array(TASKS["two-blocks"].steps[0].goal.centre)
    for _ in range(40):
        world.step(np.array([[*goal, 1.0]]))
    np.testing.assert_allclose(world.objects[0, 0], goal, atol=1e-9)
    world.step(np.array([[*goal, -1.0]]))
    world.step(np.array([[*goal, -1.0]]))
    assert world.held[0] == -1
    assert world.aperture[0] < 0.5


def test_speed_is_bounded_and_open_gripper_passes_over_pucks() -> None:
    world = World(TASKS["pick-place-push"], 1, seed=0)
    world.reset()
    start = world.grip[0].copy()
    world.step(np.array([[0.0, 0.0, -1.0]]))
    assert np.linalg.norm(world.grip[0] - start) == pytest.approx(0.035)
    puck = world.objects[0, 1].copy()
    world.grip[0] = puck + np.array([0.1, 0.0])
    for _ in range(6):  # open: passes over the puck
        world.step(np.array([[puck[0] - 0.1, puck[1], -1.0]]))
    np.testing.assert_allclose(world.objects[0, 1], puck)
    world.grip[0] = puck + np.array([0.1, 0.0])
    world.aperture[:] = 1.0
    for _ in range(6):  # closed: pushes it along -x
        world.step(np.array([[puck[0] - 0.1, puck[1], 1.0]]))
    assert world.objects[0, 1, 0] < puck[0] - 0.05
    assert world.objects[0, 1, 1] == pytest.approx(puck[1])


@pytest.mark.parametrize("name", list(TASKS))
def test_good_demos_succeed_and_annotations_tile_the_episode(name) -> None:
    task = TASKS[name]
    demos = generate_demos(task, 3, seed=1, styles={"good": 1.0})
    for d in demos:
        assert d.success
        assert d.style == "good"
        assert set(np.unique(d.behaviour)) <= {0, 1}
        assert np.all(np.diff(d.stage) >= 0)
        assert d.stage[-1] == len(task.subtasks) - 1
    ds = demos_to_dataset(demos, TASKS)
    for ep in ds.episodes:
        validate_spans(ep.subtasks, ep.length, task.subtasks, ep.index)
    assert ds.temporal_proportions(task.text).sum() == pytest.approx(1.0)


def test_bad_styles_regress_or_fail() -> None:
    task = TASKS["two-blocks"]
    regress = generate_demos(task, 6, seed=2, styles={"regress": 1.0})
    assert all(BEHAVIOURS.index("regress") in d.behaviour for d in regress)
    fail = generate_demos(task, 6, seed=3, styles={"fail": 1.0})
    assert not any(d.success for d in fail)
    for d in regress:  # a regression carries the block away from the bin
        seg = d.behaviour == BEHAVIOURS.index("regress")
        goal = np.array(task.steps[0].goal.centre)
        dist = np.linalg.norm(d.proprio[seg, :2] - goal, axis=1)
        assert (
            dist[-1] > dist[0]
            or np.linalg.norm(d.proprio[seg, :2] - np.array(task.steps[1].goal.centre), axis=1)[-1]
            > 0
        )


def test_generator_rejects_unknown_styles() -> None:
    with pytest.raises(ValueError, match="allowed"):
        generate_demos(TASKS["two-blocks"], 1, seed=0, styles={"sloppy": 1.0})


@pytest.mark.parametrize("name", list(TASKS))
def test_good_demos_replay_open_loop_and_failed_ones_do_not(name) -> None:
    task = TASKS[name]
    for d in generate_demos(task, 3, seed=4, styles={"good": 1.0}):
        assert replay_demo(task, d)
    fails = generate_demos(task, 4, seed=4, styles={"fail": 1.0})
    # a push stopped early can still leave the puck on the target: replay agrees
    assert [replay_demo(task, d) for d in fails] == [d.success for d in fails]
    assert not all(d.success for d in fails)
    d = fails[0]
    other = next(t for t in TASKS.values() if t.name != name)
    with pytest.raises(ValueError, match="replayed in task"):
        replay_demo(other, d)


def test_state_round_trip_and_steps_done() -> None:
    task = TASKS["two-blocks"]
    world = World(task, 3, seed=0)
    obs = world.reset()
    world.held[1] = 0
    world.objects[1, 0] = world.grip[1]
    obs = world.observation()
    copy = World(task, 3, seed=99)
    np.testing.assert_allclose(copy.set_state(*copy.state_from_observation(obs)), obs)
    np.testing.assert_array_equal(copy.held, [-1, 0, -1])
    bin_centre = np.asarray(task.steps[0].goal.centre)
    copy.objects[0, 0] = bin_centre  # first block placed
    copy.objects[2, 1] = bin_centre  # only the second: steps count in order
    np.testing.assert_array_equal(copy.steps_done(), [1, 0, 0])
    copy.objects[0, 1] = bin_centre
    assert copy.steps_done()[0] == 2
    assert copy.success()[0]
    copy.held[0] = 1  # a held block does not count as placed
    assert copy.steps_done()[0] == 1
    with pytest.raises(ValueError, match="held"):
        copy.set_state(copy.grip, copy.aperture, copy.objects, np.array([5, -1, -1]))
