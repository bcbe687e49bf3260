"""Run many battles, persist each record as it finishes, resume, and rank the models."""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

from rich.progress import Progress

from lc_evals.arena.battle import BattleConfig, baseline_runs, battle_id, run_battle
from lc_evals.arena.issue import Issue
from lc_evals.arena.leaderboard import Standing, leaderboard
from lc_evals.arena.prompts import Retriever
from lc_evals.arena.sandbox import RunResult, require_isolation
from lc_evals.errors import ResultsFileError
from lc_evals.types import ChatModel


class ArenaStore:
    """Battle records in a JSON Lines file, one per line, appended as battles finish.

    A line cut short by a crash (the last one) is ignored; any other bad line raises
    :class:`~lc_evals.errors.ResultsFileError`.

    Args:
        path: the ``.jsonl`` file (created with its parent directory on first write).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = pathlib.Path(path)

    def records(self) -> list[dict[str, Any]]:
        """Every complete record, in file order (a later duplicate id replaces an earlier)."""
        if not self.path.exists():
            return []
        lines = self.path.read_text().splitlines()
        by_id: dict[str, dict[str, Any]] = {}
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict) or "id" not in rec or "verdict" not in rec:
                    raise ValueError("not a battle record")
            except ValueError as exc:
                if n == len(lines):
                    break  # interrupted write
                raise ResultsFileError(str(self.path), n, str(exc)) from exc
            by_id[str(rec["id"])] = rec
        return list(by_id.values())

    def done(self) -> set[str]:
        """Ids of the battles already recorded."""
        return {str(r["id"]) for r in self.records()}

    def append(self, record: Mapping[str, Any]) -> None:
        """Append one record and flush it to disk."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        cut = False
        if self.path.exists() and self.path.stat().st_size:
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                cut = f.read(1) != b"\n"
        with open(self.path, "a") as f:
            if cut:
                f.write("\n")  # do not glue onto a line cut short by a crash
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())


def pairings(names: Sequence[str], *, self_play: bool | None = None) -> list[tuple[str, str]]:
    """Ordered (submitter, reviewer) pairs; each model plays each role against each other.

    ``self_play`` adds (a, a) pairs; by default only when there is a single model.

    >>> pairings(["a", "b"])
    [('a', 'b'), ('b', 'a')]
    """
    if not names:
        raise ValueError("at least one model is needed")
    if len(set(names)) != len(names):
        raise ValueError(f"model names must be unique, got {list(names)}")
    play_self = len(names) == 1 if self_play is None else self_play
    return [(a, b) for a in names for b in names if a != b or play_self]


def run_arena(
    issues: Sequence[Issue],
    models: Mapping[str, ChatModel],
    store: ArenaStore | str | os.PathLike[str],
    *,
    retrievers: Mapping[str, Retriever] | None = None,
    config: BattleConfig | None = None,
    rounds: int = 1,
    self_play: bool | None = None,
    progress: bool = True,
    baselines: Mapping[str, Mapping[str, RunResult]] | None = None,
) -> list[Standing]:
    """Play every pairing on every issue, skipping battles already in ``store``.

    Args:
        issues: the tasks.
        models: name -> chat model.
        store: where records go (an :class:`ArenaStore` or a path).
        retrievers: issue id -> retriever (default: whole small files of the repo).
        config: battle settings.
        rounds: battles per pairing and issue.
        self_play: see :func:`pairings`.
        progress: show a progress bar.
        baselines: issue id -> runs of :func:`~lc_evals.arena.battle.baseline_runs`
            already made (computed on first use otherwise).

    Returns:
        The leaderboard over every record in the store (old and new).

    Raises:
        IsolationUnavailable: bubblewrap cannot run here and ``config`` does not set
            ``unsafe_no_isolation``.
    """
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds!r}")
    st = store if isinstance(store, ArenaStore) else ArenaStore(store)
    cfg = config or BattleConfig()
    if not cfg.unsafe_no_isolation:
        require_isolation()  # before any model is asked
    done = st.done()
    plan = [
        (issue, sub, rev, r)
        for issue in issues
        for sub, rev in pairings(list(models), self_play=self_play)
        for r in range(rounds)
        if battle_id(issue, sub, rev, r) not in done
    ]
    cache: dict[str, Mapping[str, RunResult]] = dict(baselines or {})
    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task("battles", total=len(plan))
        for issue, sub, rev, r in plan:
            if issue.id not in cache:
                cache[issue.id] = baseline_runs(
                    issue, cfg.limits, unsafe_no_isolation=cfg.unsafe_no_isolation
                )
            record = run_battle(
                issue,
                models[sub],
                models[rev],
                submitter_name=sub,
                reviewer_name=rev,
                retriever=(retrievers or {}).get(issue.id),
                config=cfg,
                baseline=cache[issue.id],
                round_index=r,
            )
            st.append(record)
            bar.advance(task)
    return leaderboard(st.records())
