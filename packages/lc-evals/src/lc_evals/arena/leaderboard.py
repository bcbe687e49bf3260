"""Leaderboard over battle records: per-role win rates, scores and Elo ratings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class Standing:
    """One model's line on the leaderboard.

    Attributes:
        model: the model's name.
        elo: Elo rating (start 1000; a draw counts half a win).
        battles: battles played in either role.
        submitter_battles: battles played as submitter.
        submitter_wins: battles won as submitter.
        reviewer_battles: battles played as reviewer.
        reviewer_wins: battles won as reviewer.
        submitter_score: sum of the per-battle submitter scores (+1/0/-1).
        reviewer_score: sum of the per-battle reviewer scores (+1/0/-1).
        valid_patches: submissions that applied and kept CI green.
        valid_tests: test suites that passed on the gold patch.
        discriminative_tests: valid test suites that failed on the original code.
    """

    model: str
    elo: float = 1000.0
    battles: int = 0
    submitter_battles: int = 0
    submitter_wins: int = 0
    reviewer_battles: int = 0
    reviewer_wins: int = 0
    submitter_score: int = 0
    reviewer_score: int = 0
    valid_patches: int = 0
    valid_tests: int = 0
    discriminative_tests: int = 0

    @property
    def submitter_win_rate(self) -> float:
        return self.submitter_wins / self.submitter_battles if self.submitter_battles else 0.0

    @property
    def reviewer_win_rate(self) -> float:
        return self.reviewer_wins / self.reviewer_battles if self.reviewer_battles else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["elo"] = round(self.elo, 2)
        out["submitter_win_rate"] = round(self.submitter_win_rate, 4)
        out["reviewer_win_rate"] = round(self.reviewer_win_rate, 4)
        return out


def expected_score(rating_a: float, rating_b: float) -> float:
    """Elo's expected score of A against B: ``1 / (1 + 10 ** ((b - a) / 400))``.

    >>> expected_score(1000, 1000)
    0.5
    """
    return 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0))


def leaderboard(records: Iterable[Mapping[str, Any]], *, k: float = 16.0) -> list[Standing]:
    """Standings from battle records (as :func:`~lc_evals.arena.battle.run_battle` returns).

    Elo updates are applied in battle-id order, so the result does not depend on the
    order battles finished in. Self-play battles count for the role statistics but not
    for Elo. Sorted by Elo, then name.

    Args:
        records: battle records.
        k: Elo K-factor.
    """
    if k <= 0:
        raise ValueError(f"k must be > 0, got {k!r}")
    table: dict[str, Standing] = {}

    def get(name: str) -> Standing:
        if name not in table:
            table[name] = Standing(name)
        return table[name]

    for rec in sorted(records, key=lambda r: str(r["id"])):
        sub, rev, v = get(rec["submitter"]), get(rec["reviewer"]), rec["verdict"]
        sub.battles += 1
        sub.submitter_battles += 1
        sub.submitter_score += int(v["submitter_score"])
        sub.valid_patches += bool(v["patch_valid"])
        if rev is not sub:
            rev.battles += 1
        rev.reviewer_battles += 1
        rev.reviewer_score += int(v["reviewer_score"])
        rev.valid_tests += bool(v["tests_valid"])
        rev.discriminative_tests += bool(v["tests_discriminative"])
        if v["winner"] == "submitter":
            sub.submitter_wins += 1
        elif v["winner"] == "reviewer":
            rev.reviewer_wins += 1
        if rev is sub:
            continue
        s = {"submitter": 1.0, "reviewer": 0.0}.get(v["winner"], 0.5)
        e = expected_score(sub.elo, rev.elo)
        sub.elo += k * (s - e)
        rev.elo -= k * (s - e)
    return sorted(table.values(), key=lambda st: (-st.elo, st.model))


def format_leaderboard(standings: Iterable[Standing]) -> str:
    """A plain-text table of the standings."""
    head = f"{'model':<24} {'elo':>7} {'battles':>7} {'sub win':>8} {'rev win':>8} {'valid patch':>11} {'valid tests':>11}"
    lines = [head, "-" * len(head)]
    for s in standings:
        lines.append(
            f"{s.model:<24} {s.elo:>7.1f} {s.battles:>7d} {s.submitter_win_rate:>8.2f} "
            f"{s.reviewer_win_rate:>8.2f} {s.valid_patches:>11d} {s.valid_tests:>11d}"
        )
    return "\n".join(lines)
