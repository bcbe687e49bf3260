"""Summaries carry standard errors and 95% intervals; two systems compare on paired items."""

from __future__ import annotations

import math

import pytest

from lc_evals import Result, compare, format_table, summarize


def _results(scores, task="t", prefix="i") -> list[Result]:
    return [Result(f"{prefix}{k}", task, "p", float(s), "em", ("a",)) for k, s in enumerate(scores)]


def test_wilson_interval_for_accuracies() -> None:
    (row,) = summarize(_results([1] * 8 + [0] * 2), by=("task",))
    assert row["n"] == 10
    assert row["score"] == pytest.approx(0.8)
    # Wilson 95% for 8/10 (z = 1.96): 0.4902 .. 0.9433
    assert row["ci_low"] == pytest.approx(0.4902, abs=1e-4)
    assert row["ci_high"] == pytest.approx(0.9433, abs=1e-4)
    assert row["se"] == pytest.approx(math.sqrt(0.8 * 0.2 / 10))
    assert row["interval"] == "wilson"
    (perfect,) = summarize(_results([1, 1, 1, 1]), by=("task",))
    assert perfect["ci_high"] == pytest.approx(1.0)
    assert perfect["ci_low"] == pytest.approx(0.5101, abs=1e-4)


def test_normal_interval_for_graded_scores_and_table() -> None:
    (row,) = summarize(_results([0.5, 0.25, 0.75, 1.0]), by=("task",))
    assert row["interval"] == "normal"
    se = math.sqrt(sum((x - 0.625) ** 2 for x in [0.5, 0.25, 0.75, 1.0]) / 3 / 4)
    assert row["se"] == pytest.approx(se)
    assert row["ci_low"] == pytest.approx(0.625 - 1.959964 * se)
    table = format_table([row])
    assert table.splitlines()[0] == "| task | n | score | se | 95% CI |"
    assert "| t | 4 | 62.5 | 16.1 | 30.9-94.1 |" in table


def test_paired_comparison_mcnemar() -> None:
    a = _results([1] * 20 + [0] * 10)
    b = _results([1] * 12 + [0] * 8 + [1] * 2 + [0] * 8)  # a wins 8 items, b wins 2
    out = compare(a, b)
    assert out["n"] == 30
    assert out["a_only"] == 8
    assert out["b_only"] == 2
    assert out["method"] == "mcnemar_exact"
    # two-sided exact binomial on 10 discordant pairs, 2 of one kind: 2 * P(X <= 2) = 0.1094
    assert out["p_value"] == pytest.approx(0.109375)
    assert out["diff"] == pytest.approx(20 / 30 - 14 / 30)
    assert out["ci_low"] < out["diff"] < out["ci_high"]
    with pytest.raises(ValueError, match="no item in common"):
        compare(a, _results([1], prefix="other"))


def test_paired_comparison_with_equal_differences_keeps_an_interval() -> None:
    """Equal paired differences leave no spread; the interval must not shrink to a point."""
    base = [0.2, 0.35, 0.5, 0.6, 0.45, 0.3, 0.25, 0.4, 0.55, 0.7]
    out = compare(_results(base), _results([x + 0.1 for x in base]))  # B 0.1 better everywhere
    assert out["method"] == "sign_flip"
    assert out["diff"] == pytest.approx(-0.1)
    # Agresti-Min pseudo-pairs: mean -1/12, variance 1.1/12 - (1/12)**2 over 12 observations
    se = math.sqrt((1.1 / 12 - (1 / 12) ** 2) / 12)
    assert out["se"] == pytest.approx(se)
    assert out["ci_low"] == pytest.approx(-1 / 12 - 1.959964 * se)
    assert out["ci_high"] == pytest.approx(-1 / 12 + 1.959964 * se)
    assert out["ci_low"] < out["diff"] < out["ci_high"]

    same = compare(_results([1] * 6 + [0] * 4), _results([1] * 6 + [0] * 4))
    assert same["method"] == "mcnemar_exact"
    assert same["diff"] == 0.0
    # no discordant item: 0 +- 1.96 / (n + 2)
    assert same["ci_low"] == pytest.approx(-1.959964 / 12)
    assert same["ci_high"] == pytest.approx(1.959964 / 12)

    wins = compare(_results([1] * 10), _results([0] * 10))  # A right, B wrong on every item
    assert wins["diff"] == 1.0
    assert 0.5 < wins["ci_low"] < 1.0
    assert wins["ci_high"] == 1.0

    one = compare(_results([0.8]), _results([0.3]))  # a single item: finite, within [-1, 1]
    assert -1.0 <= one["ci_low"] < one["diff"] < one["ci_high"] <= 1.0
