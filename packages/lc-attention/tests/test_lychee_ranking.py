"""LycheeDecode role selection: averaged gate scores, lexicographic budget selection, the
annealed budget, and KV-group views of a role map (hand-computed values)."""

from __future__ import annotations

import pytest
import torch

from lc_attention.lychee import RoleMap
from lc_attention.lychee.ranking import ScoreAverage, annealed_target, select_by_rank


def test_score_average_windows_match_hand_computed_means() -> None:
    avg = ScoreAverage((2,), steps=5, score_from=0.6)  # late window: steps 3 and 4
    for step, s in enumerate([[1.0, 0.0], [1.0, 0.0], [1.0, 4.0], [0.0, 2.0], [2.0, 0.0]]):
        avg.update(step, torch.tensor(s))
    assert avg.start == 3
    assert avg.overall().tolist() == [1.0, 1.2]
    assert avg.late().tolist() == [1.0, 1.0]
    # score_from=1 still averages the last step; score_from=0 equals the overall mean
    last = ScoreAverage((1,), steps=3, score_from=1.0)
    every = ScoreAverage((1,), steps=3, score_from=0.0)
    for step, v in enumerate([3.0, 5.0, 7.0]):
        last.update(step, torch.tensor([v]))
        every.update(step, torch.tensor([v]))
    assert last.late().tolist() == [7.0]
    assert every.late().tolist() == every.overall().tolist() == [5.0]
    with pytest.raises(ValueError, match="score_from"):
        ScoreAverage((1,), steps=3, score_from=1.5)
    with pytest.raises(ValueError, match="steps"):
        ScoreAverage((1,), steps=0)


def test_select_by_rank_breaks_saturated_ties_with_the_overall_mean() -> None:
    # all four free units end tied (pinned at one bound); the overall means differ
    primary = torch.tensor([[9.0, 9.0], [-1.0, -1.0], [-1.0, -1.0]])
    secondary = torch.tensor([[0.0, 0.0], [0.1, 0.7], [0.5, 0.3]])
    fixed = torch.tensor([[True, True], [False, False], [False, False]])
    keep = select_by_rank(primary, secondary, 4, fixed)
    assert keep.tolist() == [[True, True], [False, True], [True, False]]
    # the primary key wins over the secondary one
    primary2 = primary.clone()
    primary2[1, 0] = 0.0
    assert select_by_rank(primary2, secondary, 3, fixed).tolist() == [
        [True, True],
        [True, False],
        [False, False],
    ]
    # full ties go to the lower flat index; fixed units are kept whatever their score
    flat = torch.zeros(3, 2)
    low_fixed = torch.tensor([[False, True], [False, False], [False, False]])
    flat[0, 1] = -100.0
    assert select_by_rank(flat, flat, 2, low_fixed).tolist() == [
        [True, True],
        [False, False],
        [False, False],
    ]
    with pytest.raises(ValueError, match="budget"):
        select_by_rank(primary, secondary, 1, fixed)
    with pytest.raises(ValueError, match="budget"):
        select_by_rank(primary, secondary, 7, fixed)
    with pytest.raises(ValueError, match="one shape"):
        select_by_rank(primary, secondary[:2], 3, fixed)


def test_annealed_target_is_linear_then_constant() -> None:
    values = [annealed_target(s, 1.0, 0.25, 4) for s in range(7)]
    assert values == [1.0, 0.8125, 0.625, 0.4375, 0.25, 0.25, 0.25]
    assert annealed_target(0, 1.0, 0.25, 0) == 0.25


def test_role_map_kv_heads_read_and_group_expansion() -> None:
    fp = {"num_layers": 3, "num_heads": 6, "num_kv_heads": 2}
    rows = (
        (True,) * 6,
        (False, True, False, False, False, False),
        (False, False, False, True, False, True),
    )
    rm = RoleMap(rows, fp)
    assert rm.num_retrieval == 9
    assert rm.kv_heads_read() == 2 + 1 + 1
    assert rm.kv_heads_read(6) == 6 + 1 + 2  # one KV head per query head: every head counts
    assert rm.kv_heads_read(1) == 3
    big = rm.expand_to_kv_groups()
    assert big.retrieval == (
        (True,) * 6,
        (True, True, True, False, False, False),
        (False, False, False, True, True, True),
    )
    assert big.kv_heads_read() == rm.kv_heads_read()
    assert big.num_retrieval == 12
    assert big.meta["expanded_to_kv_groups"] is True
    assert rm.expand_to_kv_groups(6) == rm  # groups of one change nothing
    with pytest.raises(ValueError, match="divisor"):
        rm.kv_heads_read(4)
    with pytest.raises(ValueError, match="num_kv_heads is needed"):
        RoleMap(rows).kv_heads_read()
