"""The Hamiltonian-cycle task.

An input is an undirected graph on ``n`` vertices (edge list) and a candidate vertex
order starting at 0; label 1 iff the order is a Hamiltonian cycle (every vertex once,
consecutive vertices adjacent, last adjacent to first). Edges appear independently with
a probability that grows with ``delta``, and the vertex count is drawn from a set that
shifts to larger graphs, so shifted graphs are larger and denser.
"""

from __future__ import annotations

import numpy as np

from lc_evals.icl.base import POSITIVE, IclExample, check_delta, pick_label, resample


def hamiltonian_params(delta: float) -> dict[str, float]:
    """Edge probability and the probability of drawing the larger vertex counts."""
    return {"p_edge": 0.5 + 0.3 * delta, "p_large": 0.3 + 0.6 * delta}


SMALL_SIZES = (5, 6)
LARGE_SIZES = (7, 8)


def _find_cycle(n: int, adj: list[set[int]], rng: np.random.Generator) -> list[int] | None:
    """A Hamiltonian cycle through vertex 0 by randomised backtracking, or ``None``."""
    path, used = [0], {0}

    def extend() -> bool:
        if len(path) == n:
            return 0 in adj[path[-1]]
        nbrs = sorted(adj[path[-1]] - used)
        for v in (nbrs[i] for i in rng.permutation(len(nbrs))):
            path.append(v)
            used.add(v)
            if extend():
                return True
            used.discard(v)
            path.pop()
        return False

    return list(path) if extend() else None


def _is_cycle(n: int, adj: list[set[int]], order: list[int]) -> bool:
    if len(order) != n or set(order) != set(range(n)):
        return False
    return all(order[(i + 1) % n] in adj[order[i]] for i in range(n))


def sample_hamiltonian(
    rng: np.random.Generator, delta: float, label: str | None = None
) -> IclExample:
    """One Hamiltonian-cycle example: ``vertices``, ``edges`` and a candidate ``path``.

    Positives use a cycle found by backtracking in a graph that has one. Negatives are,
    with equal chance, a random vertex order in any graph or a corrupted cycle (a vertex
    dropped, a vertex repeated, or two vertices swapped) that fails the cycle test.
    """
    delta = check_delta(delta)
    want = pick_label(rng, label)
    prm = hamiltonian_params(delta)

    def draw(r: np.random.Generator) -> tuple[int, list[tuple[int, int]], list[int]] | None:
        sizes = LARGE_SIZES if r.random() < prm["p_large"] else SMALL_SIZES
        n = int(sizes[int(r.integers(len(sizes)))])
        edges = [(u, v) for u in range(n) for v in range(u + 1, n) if r.random() < prm["p_edge"]]
        adj: list[set[int]] = [set() for _ in range(n)]
        for u, v in edges:
            adj[u].add(v)
            adj[v].add(u)
        cycle = _find_cycle(n, adj, r)
        if want == POSITIVE:
            return (n, edges, cycle) if cycle is not None else None
        if cycle is None or r.random() < 0.5:
            order = [0, *(int(v) + 1 for v in r.permutation(n - 1))]
        else:
            order = list(cycle)
            kind = int(r.integers(3))
            i = int(r.integers(1, n))
            if kind == 0:
                del order[i]
            elif kind == 1:
                order.insert(int(r.integers(1, n + 1)), order[i])
            else:
                j = int(r.integers(1, n))
                order[i], order[j] = order[j], order[i]
        return None if _is_cycle(n, adj, order) else (n, edges, order)

    n, edges, order = resample(rng, draw, what="hamiltonian")
    text = (
        f"vertices: 0-{n - 1}\n"
        f"edges: {' '.join(f'{u}-{v}' for u, v in edges)}\n"
        f"path: {','.join(str(v) for v in order)}"
    )
    stats = {"n_vertices": float(n), "density": len(edges) / (n * (n - 1) / 2)}
    return IclExample("hamiltonian", text, want, delta, stats)
