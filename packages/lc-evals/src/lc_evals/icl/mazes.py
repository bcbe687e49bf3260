"""The maze tasks.

Mazes are perfect (exactly one simple path between two cells) and built row by row
with Eller's algorithm, whose probability of joining horizontal neighbours is the skew
``0.5 + 0.45 * delta`` (vertical openings get ``1 - skew``); half the mazes are
transposed, so a shift makes mazes more anisotropic rather than more horizontal. The
maze is drawn as text: ``#`` wall, space open, ``S`` start (top-left cell), ``E`` end
(bottom-right cell); cell ``(r, c)`` sits at grid position ``(2r + 1, 2c + 1)``.

* ``maze_solve``: the maze and a move list (``up``/``down``/``left``/``right``, one
  move = one cell); label 1 iff the moves walk from S to E without crossing a wall.
* ``maze_complete``: the maze with its solution drawn as ``*`` except a gap of one or
  two cells shown as ``?``, and candidate "missing moves"; label 1 iff they lead from
  the path cell before the gap through the gap to the path cell after it.
"""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np

from lc_evals.icl.base import NEGATIVE, POSITIVE, IclExample, check_delta, pick_label, resample

MOVES: dict[str, tuple[int, int]] = {
    "up": (-1, 0),
    "down": (1, 0),
    "left": (0, -1),
    "right": (0, 1),
}
SOLVE_SIZES = (3, 4, 5)
COMPLETE_SIZES = (3, 4, 5)


def maze_params(delta: float) -> dict[str, float]:
    """Eller's horizontal-join probability (the skew)."""
    return {"skew": 0.5 + 0.45 * delta}


class _Maze:
    """Cells ``k x k``; ``right[r][c]`` / ``down[r][c]`` say whether that wall is open."""

    def __init__(self, k: int, right: np.ndarray, down: np.ndarray) -> None:
        self.k, self.right, self.down = k, right, down

    def open_between(self, a: tuple[int, int], b: tuple[int, int]) -> bool:
        (r1, c1), (r2, c2) = sorted([a, b])
        if not (0 <= r1 < self.k and 0 <= c1 < self.k and 0 <= r2 < self.k and 0 <= c2 < self.k):
            return False
        if r1 == r2 and c2 == c1 + 1:
            return bool(self.right[r1, c1])
        if c1 == c2 and r2 == r1 + 1:
            return bool(self.down[r1, c1])
        return False

    def transposed(self) -> _Maze:
        return _Maze(self.k, self.down.T.copy(), self.right.T.copy())

    def solve(self) -> list[tuple[int, int]]:
        start, end = (0, 0), (self.k - 1, self.k - 1)
        prev: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
        queue = deque([start])
        while queue:
            cell = queue.popleft()
            for dr, dc in MOVES.values():
                nxt = (cell[0] + dr, cell[1] + dc)
                if nxt not in prev and self.open_between(cell, nxt):
                    prev[nxt] = cell
                    queue.append(nxt)
        path: list[tuple[int, int]] = []
        node: tuple[int, int] | None = end
        while node is not None:
            path.append(node)
            node = prev[node]
        return path[::-1]

    def grid(self) -> list[list[str]]:
        size = 2 * self.k + 1
        g = [["#"] * size for _ in range(size)]
        for r in range(self.k):
            for c in range(self.k):
                g[2 * r + 1][2 * c + 1] = " "
                if c + 1 < self.k and self.right[r, c]:
                    g[2 * r + 1][2 * c + 2] = " "
                if r + 1 < self.k and self.down[r, c]:
                    g[2 * r + 2][2 * c + 1] = " "
        g[1][1] = "S"
        g[2 * self.k - 1][2 * self.k - 1] = "E"
        return g


def _eller(k: int, skew: float, rng: np.random.Generator) -> _Maze:
    right = np.zeros((k, k), dtype=bool)
    down = np.zeros((k, k), dtype=bool)
    sets = list(range(k))
    next_id = k
    for r in range(k):
        last = r == k - 1
        for c in range(k - 1):
            if sets[c] != sets[c + 1] and (last or rng.random() < skew):
                right[r, c] = True
                old = sets[c + 1]
                sets = [sets[c] if s == old else s for s in sets]
        if last:
            break
        new_sets = [-1] * k
        for s in dict.fromkeys(sets):
            members = [c for c in range(k) if sets[c] == s]
            chosen = [c for c in members if rng.random() < 1.0 - skew]
            if not chosen:
                chosen = [members[int(rng.integers(len(members)))]]
            for c in chosen:
                down[r, c] = True
                new_sets[c] = s
        for c in range(k):
            if new_sets[c] < 0:
                new_sets[c] = next_id
                next_id += 1
        sets = new_sets
    return _Maze(k, right, down)


def _make_maze(rng: np.random.Generator, delta: float, sizes: tuple[int, ...]) -> _Maze:
    k = int(sizes[int(rng.integers(len(sizes)))])
    maze = _eller(k, maze_params(delta)["skew"], rng)
    return maze.transposed() if rng.random() < 0.5 else maze


def _moves(path: list[tuple[int, int]]) -> list[str]:
    names = {v: n for n, v in MOVES.items()}
    return [names[(b[0] - a[0], b[1] - a[1])] for a, b in itertools.pairwise(path)]


def _maze_stats(maze: _Maze) -> dict[str, float]:
    horiz = int(maze.right.sum())
    vert = int(maze.down.sum())
    return {"size": float(maze.k), "anisotropy": abs(horiz - vert) / (horiz + vert)}


def _corrupt(rng: np.random.Generator, moves: list[str]) -> list[str]:
    """A move list of a different length or with one move replaced (never equal)."""
    out = list(moves)
    kind = int(rng.integers(3))
    if kind == 0 and len(out) > 1:
        del out[int(rng.integers(len(out)))]
    elif kind == 1:
        out.insert(int(rng.integers(len(out) + 1)), list(MOVES)[int(rng.integers(4))])
    else:
        i = int(rng.integers(len(out)))
        choices = [m for m in MOVES if m != out[i]]
        out[i] = choices[int(rng.integers(3))]
    return out


def _walk_ok(maze: _Maze, moves: list[str]) -> bool:
    cell = (0, 0)
    for m in moves:
        dr, dc = MOVES[m]
        nxt = (cell[0] + dr, cell[1] + dc)
        if not maze.open_between(cell, nxt):
            return False
        cell = nxt
    return cell == (maze.k - 1, maze.k - 1)


def sample_maze_solve(
    rng: np.random.Generator, delta: float, label: str | None = None
) -> IclExample:
    """One maze-solve example: the maze and a move list (the solution or a corruption)."""
    delta = check_delta(delta)
    want = pick_label(rng, label)
    maze = _make_maze(rng, delta, SOLVE_SIZES)
    solution = _moves(maze.solve())
    if want == POSITIVE:
        moves = solution
    else:

        def draw(r: np.random.Generator) -> list[str] | None:
            cand = _corrupt(r, solution)
            return None if _walk_ok(maze, cand) else cand

        moves = resample(rng, draw, what="maze_solve corruption")
    text = "\n".join("".join(row) for row in maze.grid()) + f"\nmoves: {', '.join(moves)}"
    return IclExample("maze_solve", text, want, delta, _maze_stats(maze))


def sample_maze_complete(
    rng: np.random.Generator, delta: float, label: str | None = None
) -> IclExample:
    """One maze-complete example: a drawn solution with a gap and candidate missing moves."""
    delta = check_delta(delta)
    want = pick_label(rng, label)

    def draw(r: np.random.Generator) -> tuple[_Maze, list[tuple[int, int]]] | None:
        maze = _make_maze(r, delta, COMPLETE_SIZES)
        path = maze.solve()
        return (maze, path) if len(path) >= 4 else None

    maze, path = resample(rng, draw, what="maze_complete")
    gap_len = 1 + int(rng.integers(2)) if len(path) >= 5 else 1
    first = int(rng.integers(1, len(path) - gap_len))  # gap = path[first : first + gap_len]
    grid = maze.grid()

    def mark(a: tuple[int, int], b: tuple[int, int] | None, ch: str) -> None:
        if grid[2 * a[0] + 1][2 * a[1] + 1] not in "SE":
            grid[2 * a[0] + 1][2 * a[1] + 1] = ch
        if b is not None:
            grid[a[0] + b[0] + 1][a[1] + b[1] + 1] = ch

    for i, cell in enumerate(path):
        nxt = path[i + 1] if i + 1 < len(path) else None
        mark(cell, nxt, "*")
    for i in range(first, first + gap_len):
        mark(path[i], path[i + 1], "?")
    prev = path[first - 1]
    grid[prev[0] + path[first][0] + 1][prev[1] + path[first][1] + 1] = "?"
    truth = _moves(path[first - 1 : first + gap_len + 1])
    moves = truth if want == POSITIVE else _corrupt(rng, truth)
    if want == NEGATIVE and moves == truth:  # pragma: no cover - _corrupt never returns truth
        raise AssertionError("corruption returned the true moves")
    text = "\n".join("".join(row) for row in grid) + f"\nmissing moves: {', '.join(moves)}"
    return IclExample("maze_complete", text, want, delta, _maze_stats(maze))
