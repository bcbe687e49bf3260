"""k-shot prompts for the formal tasks, in several styles, as :class:`~lc_evals.TaskItem`.

Styles (after the prompt families compared in "Is In-Context Learning Learning?"):

* ``plain``: exemplars only, no instruction (the n-shot baseline).
* ``description``: a natural-language statement of the task and the answer format.
* ``automaton``: a formal statement: the automaton, grammar or rule that decides it.
* ``word_salad``: the description with every word replaced by a made-up word, so
  the prompt keeps its shape but carries no meaning; it isolates what the exemplars
  alone teach.

Exemplars are always drawn from the training distribution (``delta = 0``); the query
is drawn at the requested shift. A prompt is ``context`` (preamble, exemplars, query
input) followed by ``question`` (``"Output:"``); :func:`item_prompt` joins them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lc_evals.icl.base import NEGATIVE, POSITIVE, IclExample, check_delta
from lc_evals.icl.tasks import ICL_TASKS, get_task, task_rng
from lc_evals.types import TaskItem, Tokenizer

PROMPT_STYLES: tuple[str, ...] = ("plain", "description", "automaton", "word_salad")
MAX_SHOTS = 100
QUESTION = "Output:"

_MAZE_CELLS = (
    "Cells sit two characters apart in the drawing: a move goes from one cell to the "
    "next, two characters up, down, left or right, and the character between the two "
    "cells is # where a wall separates them."
)
_BINARY_FORMAT = "Answer 1 if it does and 0 if it does not."

DESCRIPTIONS: dict[str, str] = {
    "parity": "Each input is a string of 0s and 1s. Decide whether it contains an even "
    "number of 0s. " + _BINARY_FORMAT,
    "pattern_matching": "Each input is a string over the letters a, b and c. Decide whether "
    "the substring abcabb appears in it. " + _BINARY_FORMAT,
    "reversal": "Each input is a sequence of tokens, a # sign, and a second sequence. Decide "
    "whether the second sequence is the first one written backwards. " + _BINARY_FORMAT,
    "stack": "Each input gives a starting stack of bits (top on the right), a list of push "
    "and pop operations, and a claimed final stack. Decide whether the claim is what "
    "the operations produce. " + _BINARY_FORMAT,
    "hamiltonian": "Each input is an undirected graph, given by its vertices and edges, and a "
    "path. Decide whether the path visits every vertex exactly once, moving only along "
    "edges, and returns to its first vertex through an edge. " + _BINARY_FORMAT,
    "maze_complete": "Each input is a maze (# is a wall) whose route from S to E is marked "
    "with *, except a few cells marked ?. "
    + _MAZE_CELLS
    + " Decide whether the missing moves lead from "
    "the marked cell before the ? cells through them to the marked cell after them, "
    "one cell per move. " + _BINARY_FORMAT,
    "maze_solve": "Each input is a maze (# is a wall) and a list of moves. " + _MAZE_CELLS + " "
    "Decide whether the moves, one cell each, lead from S to E without crossing a wall. "
    + _BINARY_FORMAT,
    "vending_machine": "A vending machine accepts coins of 5 and 10 and sells coffee for 15, "
    "a biscuit for 20 and soda for 25. Each input lists what happened, starting from a "
    "balance of 0, followed by = and a balance. Decide whether that is the balance "
    "left. " + _BINARY_FORMAT,
    "vending_machine_sum": "A vending machine accepts coins of 5 and 10 and sells coffee for "
    "15, a biscuit for 20 and soda for 25. Each input lists what happened, starting "
    "from a balance of 0. Answer with the balance left, as a number.",
}

AUTOMATA: dict[str, str] = {
    "parity": "Deterministic automaton over {0, 1}. States: E (start, accepting), O. "
    "Transitions: E -0-> O, E -1-> E, O -0-> E, O -1-> O. Output 1 if the input ends in "
    "an accepting state, else 0.",
    "pattern_matching": "Deterministic automaton over {a, b, c} with states q0..q6 (q0 "
    "start, q6 accepting and absorbing), where qi means the last i letters equal the first "
    "i letters of abcabb. Reading the next letter of abcabb moves qi to q(i+1); any other "
    "letter moves to the longest prefix of abcabb that ends the text read so far. Output "
    "1 if the run ends in q6, else 0.",
    "reversal": "Pushdown automaton: push every token before #; after #, pop one token per "
    "input token and require it to be equal. Output 1 if every pop matches and the "
    "stack is empty at the end, else 0.",
    "stack": "Stack machine: start from the given stack; 'push b' appends bit b to the top "
    "(right end), 'pop' removes the top bit. Output 1 if the final stack equals the "
    "result line ('empty' for no bits), else 0.",
    "hamiltonian": "Let G = (V, E) and path p = (v1, ..., vn). Output 1 if p is a "
    "permutation of V and {vi, v(i+1)} is in E for i = 1..n-1 and {vn, v1} is in E, else 0.",
    "maze_complete": "Grid automaton: the state is a cell position; up, down, left and right "
    "move two characters and are legal only through a ? character. Start in the path cell "
    "next to the ? cells that is closer to S. Output 1 if every move is legal, all "
    "intermediate cells are ? and the last move reaches the path cell on the other side, "
    "else 0.",
    "maze_solve": "Grid automaton: the state is a cell position, starting at S; up, down, "
    "left and right move two characters and are legal only if the character in between "
    "is not #. Output 1 if every move is legal and the final state is E, else 0.",
    "vending_machine": "Counter automaton: balance b starts at 0; +5 and +10 add, coffee "
    "subtracts 15, biscuit 20, soda 25 (only if b is large enough). Output 1 if the final "
    "b equals the number after =, else 0.",
    "vending_machine_sum": "Counter automaton: balance b starts at 0; +5 and +10 add, coffee "
    "subtracts 15, biscuit 20, soda 25. Output the final b.",
}

SALAD_WORDS: tuple[str, ...] = (
    "wumble", "tarnish", "quopple", "fendrel", "ostic", "brimwax", "lurral", "spandle",
    "gorrow", "vimble", "chastry", "dolpen", "yarrick", "muzzet", "plinth", "orvane",
    "skerrow", "tumpet", "haddle", "zorrin", "crumpet", "fennow", "glavis", "jastle",
    "kimber", "lottow", "marrish", "nubbet", "pellow", "quince", "rastle", "sorrel",
    "trundle", "umber", "vesper", "wickle", "yonder", "zestle", "ambry", "bollard",
)  # fmt: skip


def word_salad(text: str, rng: np.random.Generator) -> str:
    """``text`` with each whitespace-separated word replaced by a random made-up word."""
    return " ".join(SALAD_WORDS[int(rng.integers(len(SALAD_WORDS)))] for _ in text.split())


def preamble(task: str, style: str, seed: int = 0) -> str:
    """The instruction text of ``style`` for ``task`` (empty for ``plain``)."""
    get_task(task)
    if style == "plain":
        return ""
    if style == "description":
        return DESCRIPTIONS[task]
    if style == "automaton":
        return AUTOMATA[task]
    if style == "word_salad":
        return word_salad(DESCRIPTIONS[task], task_rng(seed, task, 3))
    raise ValueError(f"prompt_style must be one of {PROMPT_STYLES}, got {style!r}")


def format_input(text: str) -> str:
    """``Input: x`` for one-line inputs, ``Input:`` and the block below it otherwise."""
    return f"Input:\n{text}" if "\n" in text else f"Input: {text}"


def build_prompt(query: IclExample, shots: list[IclExample], preamble_text: str) -> str:
    """The context string: preamble, exemplars (each with its output), the query input."""
    parts = [preamble_text] if preamble_text else []
    parts += [f"{format_input(s.input)}\n{QUESTION} {s.label}" for s in shots]
    parts.append(format_input(query.input))
    return "\n\n".join(parts)


def item_prompt(item: TaskItem) -> str:
    """The full prompt of an ICL item: ``context``, a newline, ``question``."""
    return f"{item.context}\n{item.question}"


def _check_args(task: str, n: int, shots: int, style: str) -> None:
    get_task(task)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if isinstance(shots, bool) or not isinstance(shots, int):
        raise ValueError(f"shots must be an integer in [0, {MAX_SHOTS}], got {shots!r}")
    if not 0 <= shots <= MAX_SHOTS:
        raise ValueError(f"shots must lie in [0, {MAX_SHOTS}], got {shots}")
    if style not in PROMPT_STYLES:
        raise ValueError(f"prompt_style must be one of {PROMPT_STYLES}, got {style!r}")


def make_icl_items(
    task: str,
    n: int,
    shots: int,
    delta: float = 0.0,
    seed: int = 0,
    prompt_style: str = "description",
    *,
    shared_exemplars: bool = False,
) -> list[TaskItem]:
    """``n`` k-shot evaluation items of a formal task.

    Query ``i`` is drawn at shift ``delta`` from its own stream of ``seed``; binary
    tasks alternate query labels (``"1"`` for even ``i``), so a constant answer scores
    exactly 50 %. Exemplar ``j`` of query ``i`` comes from the training distribution
    with a fair-coin label, and depends only on ``(seed, task, i, j)``: the exemplars
    of a ``k``-shot prompt are the first ``k`` of the ``k + 1``-shot prompt. With
    ``shared_exemplars`` every query gets the same exemplars (those depend on
    ``(seed, task, j)`` only), a fixed k-shot prompt whose prefix a model can cache.

    Args:
        task: one of :data:`lc_evals.icl.ICL_TASKS`.
        n: number of items.
        shots: exemplars per prompt, 0 to 100.
        delta: shift of the queries (0 = in distribution; the paper uses
            :data:`lc_evals.icl.DELTAS`).
        seed: non-negative seed.
        prompt_style: one of :data:`PROMPT_STYLES`.
        shared_exemplars: use one exemplar list for all queries instead of one per query.

    Returns:
        Items with ``context`` (preamble + exemplars + query input), ``question``
        (``"Output:"``) and ``answers`` (the label). ``metadata`` records the task,
        shift, shot count, style, seed, the query input, its label, shift statistics and
        ``scorer="exact_match"`` (so the harness scores the items without a registry
        entry).

    Example:
        >>> items = make_icl_items("parity", n=2, shots=3, delta=0.2, seed=0)
        >>> items[0].answers, items[0].context.count("Output:")
        (('1',), 3)
    """
    _check_args(task, n, shots, prompt_style)
    delta = check_delta(delta)
    spec = get_task(task)
    text = preamble(task, prompt_style, seed)
    items = []
    for i in range(n):
        want = (POSITIVE if i % 2 == 0 else NEGATIVE) if spec.binary else None
        query = spec.sample(task_rng(seed, task, 1, i), delta, want)
        demo = [
            spec.sample(
                task_rng(seed, task, 4, j) if shared_exemplars else task_rng(seed, task, 2, i, j),
                0.0,
                None,
            )
            for j in range(shots)
        ]
        meta: dict[str, Any] = {
            "family": "icl",
            "scorer": "exact_match",
            "icl_task": task,
            "delta": delta,
            "shots": shots,
            "prompt_style": prompt_style,
            "shared_exemplars": shared_exemplars,
            "seed": seed,
            "index": i,
            "query": query.input,
            "label": query.label,
            "shot_labels": [s.label for s in demo],
            "stats": dict(query.stats),
        }
        items.append(
            TaskItem(
                id=f"icl-{task}-{prompt_style}{'-shared' if shared_exemplars else ''}"
                f"-d{delta:g}-k{shots}-s{seed}-{i}",
                task=f"icl_{task}",
                context=build_prompt(query, demo, text),
                question=QUESTION,
                answers=(query.label,),
                metadata=meta,
            )
        )
    return items


def fit_shots(
    task: str,
    tokenizer: Tokenizer,
    window: int,
    *,
    prompt_style: str = "description",
    delta: float = 0.85,
    seed: int = 0,
    n_probe: int = 8,
    reserve: int = 16,
    max_shots: int = MAX_SHOTS,
) -> int:
    """The largest shot count whose prompts fit a token window.

    Builds ``n_probe`` items and binary-searches the largest ``k <= max_shots`` such
    that every probe prompt (:func:`item_prompt`) plus ``reserve`` tokens (chat
    template, answer) fits in ``window`` tokens. Prompts grow with ``k`` because the
    exemplars of ``k`` shots are a prefix of those of ``k + 1``. The default ``delta``
    is the largest paper shift, whose queries are the longest.

    Args:
        task: task name.
        tokenizer: anything with ``encode(text) -> list[int]``.
        window: context window in tokens.
        prompt_style: as in :func:`make_icl_items`.
        delta: as in :func:`make_icl_items`.
        seed: as in :func:`make_icl_items`.
        n_probe: items measured (the longest decides).
        reserve: tokens kept free for the template and the answer.
        max_shots: upper bound of the search (<= 100).

    Raises:
        ValueError: even a 0-shot prompt does not fit.

    Example:
        >>> class Chars:
        ...     def encode(self, text):
        ...         return list(text.encode())
        >>> fit_shots("parity", Chars(), window=400, prompt_style="plain", reserve=0)
        7
    """
    _check_args(task, n_probe, max_shots, prompt_style)
    if window <= reserve:
        raise ValueError(f"window ({window}) must exceed reserve ({reserve})")

    def fits(k: int) -> bool:
        items = make_icl_items(task, n_probe, k, delta=delta, seed=seed, prompt_style=prompt_style)
        return all(len(tokenizer.encode(item_prompt(it))) + reserve <= window for it in items)

    if not fits(0):
        raise ValueError(f"{task}: even a 0-shot prompt exceeds a {window}-token window")
    lo, hi = 0, max_shots
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


__all__ = [
    "AUTOMATA",
    "DESCRIPTIONS",
    "ICL_TASKS",
    "PROMPT_STYLES",
    "build_prompt",
    "fit_shots",
    "item_prompt",
    "make_icl_items",
    "preamble",
    "word_salad",
]
