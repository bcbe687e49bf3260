"""Independent checkers: the correct label of a task input, computed from its text alone.

The generators produce labels by construction (where a random walk is allowed to stop,
which corruption was applied); these functions re-derive the label with a different
method (counting, substring search, simulation, a fresh maze solver on the drawn grid)
so that tests can assert the two agree. They are also handy for scoring free-form
model outputs against a task definition rather than a stored label.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Callable

_PRICES = {"coffee": 15, "biscuit": 20, "soda": 25}
_COINS = {"+5": 5, "+10": 10}
_STEPS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def _yes(flag: bool) -> str:
    return "1" if flag else "0"


def check_parity(text: str) -> str:
    """``"1"`` iff the binary string has an even number of zeros."""
    if not text or set(text) - {"0", "1"}:
        raise ValueError(f"parity input must be a non-empty binary string, got {text!r}")
    return _yes(text.count("0") % 2 == 0)


def check_pattern_matching(text: str) -> str:
    """``"1"`` iff ``abcabb`` is a substring."""
    if set(text) - set("abc"):
        raise ValueError(f"pattern-matching input must be over 'abc', got {text!r}")
    return _yes(text.find("abcabb") >= 0)


def check_reversal(text: str) -> str:
    """``"1"`` iff the tokens after ``#`` are those before it in reverse order."""
    words = text.split(" ")
    if words.count("#") != 1:
        raise ValueError(f"reversal input needs exactly one '#', got {text!r}")
    cut = words.index("#")
    left, right = words[:cut], words[cut + 1 :]
    return _yes(len(left) == len(right) and all(a == b for a, b in zip(left, reversed(right))))


def check_stack(text: str) -> str:
    """Simulate the operations on the initial stack and compare with the claimed result."""
    m = re.fullmatch(r"stack: (\S+)\nops: (.*)\nresult: (\S+)", text)
    if m is None:
        raise ValueError(f"malformed stack input {text!r}")
    start, ops, claim = m.groups()
    stack = "" if start == "empty" else start
    for op in ops.split(", "):
        if op == "pop":
            if not stack:
                raise ValueError(f"pop on an empty stack in {text!r}")
            stack = stack[:-1]
        elif op in ("push 0", "push 1"):
            stack += op[-1]
        else:
            raise ValueError(f"unknown stack operation {op!r}")
    return _yes((stack or "empty") == claim)


def _balance(actions: str) -> int:
    balance = 0
    for act in actions.split(", "):
        if act in _COINS:
            balance += _COINS[act]
        elif act in _PRICES:
            if balance < _PRICES[act]:
                raise ValueError(f"purchase of {act} with balance {balance}")
            balance -= _PRICES[act]
        else:
            raise ValueError(f"unknown vending-machine action {act!r}")
    return balance


def check_vending_machine(text: str) -> str:
    """``"1"`` iff the claimed balance after ``=`` equals the sum of coins minus prices."""
    actions, sep, claim = text.rpartition(" = ")
    if not sep:
        raise ValueError(f"vending-machine input needs ' = <balance>', got {text!r}")
    return _yes(_balance(actions) == int(claim))


def check_vending_machine_sum(text: str) -> str:
    """The final balance (decimal string)."""
    return str(_balance(text))


def check_hamiltonian(text: str) -> str:
    """``"1"`` iff ``path`` visits every vertex once along edges and closes the cycle."""
    m = re.fullmatch(r"vertices: 0-(\d+)\nedges: ([\d\- ]*)\npath: ([\d,]+)", text)
    if m is None:
        raise ValueError(f"malformed hamiltonian input {text!r}")
    n = int(m.group(1)) + 1
    matrix = [[False] * n for _ in range(n)]
    for edge in m.group(2).split():
        u, v = (int(x) for x in edge.split("-"))
        matrix[u][v] = matrix[v][u] = True
    order = [int(x) for x in m.group(3).split(",")]
    if sorted(order) != list(range(n)):
        return "0"
    closed = [*order, order[0]]
    return _yes(all(matrix[a][b] for a, b in itertools.pairwise(closed)))


def _parse_grid(text: str, tail: str) -> tuple[list[str], list[str]]:
    lines = text.split("\n")
    if len(lines) < 4 or not lines[-1].startswith(tail):
        raise ValueError(f"maze input must end with a '{tail}' line")
    moves = [m for m in lines[-1][len(tail) :].strip().split(", ") if m]
    if any(m not in _STEPS for m in moves):
        raise ValueError(f"unknown move in {lines[-1]!r}")
    return lines[:-1], moves


def _find(grid: list[str], ch: str) -> tuple[int, int]:
    for r, row in enumerate(grid):
        if ch in row:
            return r, row.index(ch)
    raise ValueError(f"maze has no {ch!r}")


def check_maze_solve(text: str) -> str:
    """Walk the moves on the drawn grid (two characters per move, walls are ``#``)."""
    grid, moves = _parse_grid(text, "moves:")
    pos = _find(grid, "S")
    for m in moves:
        dr, dc = _STEPS[m]
        wall = (pos[0] + dr, pos[1] + dc)
        if not (0 <= wall[0] < len(grid) and 0 <= wall[1] < len(grid[0])):
            return "0"
        if grid[wall[0]][wall[1]] == "#":
            return "0"
        pos = (pos[0] + 2 * dr, pos[1] + 2 * dc)
    return _yes(pos == _find(grid, "E"))


def check_maze_complete(text: str) -> str:
    """Locate the ``?`` gap, orient it by BFS distance from S, replay the moves across it."""
    grid, moves = _parse_grid(text, "missing moves:")
    rows, cols = len(grid), len(grid[0])
    start = _find(grid, "S")
    dist = {start: 0}
    queue = deque([start])
    while queue:  # BFS over grid characters, one character per step
        r, c = queue.popleft()
        for dr, dc in _STEPS.values():
            nr, nc = r + dr, c + dc
            if 0 <= nr < rows and 0 <= nc < cols and grid[nr][nc] != "#" and (nr, nc) not in dist:
                dist[(nr, nc)] = dist[(r, c)] + 1
                queue.append((nr, nc))
    ends = []
    for r in range(1, rows, 2):
        for c in range(1, cols, 2):
            if grid[r][c] not in "*SE":
                continue
            for dr, dc in _STEPS.values():
                if grid[r + dr][c + dc] == "?":
                    ends.append((r, c))
    if len(ends) != 2:
        raise ValueError(f"maze must show one gap between two path cells, found ends {ends}")
    before, after = sorted(ends, key=lambda cell: dist[cell])
    pos = before
    for i, m in enumerate(moves):
        dr, dc = _STEPS[m]
        wall = (pos[0] + dr, pos[1] + dc)
        nxt = (pos[0] + 2 * dr, pos[1] + 2 * dc)
        if not (0 <= nxt[0] < rows and 0 <= nxt[1] < cols) or grid[wall[0]][wall[1]] != "?":
            return "0"
        pos = nxt
        last = i == len(moves) - 1
        if not last and grid[pos[0]][pos[1]] != "?":
            return "0"
    return _yes(pos == after)


CHECKERS: dict[str, Callable[[str], str]] = {
    "parity": check_parity,
    "pattern_matching": check_pattern_matching,
    "reversal": check_reversal,
    "stack": check_stack,
    "hamiltonian": check_hamiltonian,
    "maze_complete": check_maze_complete,
    "maze_solve": check_maze_solve,
    "vending_machine": check_vending_machine,
    "vending_machine_sum": check_vending_machine_sum,
}


def check_label(task: str, text: str) -> str:
    """The correct label of ``text`` for ``task``, derived from the text alone.

    Example:
        >>> check_label("parity", "0110")
        '1'
        >>> check_label("vending_machine_sum", "+10, +10, coffee")
        '5'
    """
    try:
        checker = CHECKERS[task]
    except KeyError:
        raise ValueError(f"unknown ICL task {task!r}; known: {sorted(CHECKERS)}") from None
    return checker(text)
