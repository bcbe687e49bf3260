"""String tasks recognised by finite-state and pushdown automata.

* ``parity``: binary strings; label 1 iff the number of zeros is even.
* ``pattern_matching``: strings over ``{a, b, c}``; label 1 iff ``abcabb`` occurs.
* ``reversal``: ``w # v`` over five odd tokens; label 1 iff ``v`` is ``w`` reversed.
* ``stack``: an initial binary stack, push/pop operations and a claimed final stack;
  label 1 iff the claim is right.

Each input is produced by a random walk on the task's automaton whose transition
probabilities are functions of the shift ``delta`` (``delta = 0`` gives the training
distribution). The walk for a requested label only stops in an accepting (label 1) or
rejecting (label 0) state, so labels hold by construction; the checkers in
:mod:`lc_evals.icl.checkers` verify them independently from the text alone.
"""

from __future__ import annotations

import itertools

import numpy as np

from lc_evals.icl.base import (
    NEGATIVE,
    POSITIVE,
    IclExample,
    categorical,
    check_delta,
    pick_label,
    resample,
)

# --------------------------------------------------------------------------- PARITY

PARITY_MIN_LEN = 4
PARITY_MAX_LEN = 120


def parity_params(delta: float) -> dict[str, float]:
    """Walk parameters: probability of emitting ``0`` and of stopping when allowed."""
    return {"p_zero": 0.3 + 0.5 * delta, "p_stop": 0.12}


def sample_parity(rng: np.random.Generator, delta: float, label: str | None = None) -> IclExample:
    """One PARITY example: a walk on the two-state even/odd-zeros automaton.

    State 0 = even number of zeros so far, state 1 = odd. Emitting ``0`` toggles the
    state, ``1`` keeps it. The walk may stop only in the state matching ``label``.
    """
    delta = check_delta(delta)
    want = pick_label(rng, label)
    accept_state = 0 if want == POSITIVE else 1
    prm = parity_params(delta)

    def draw(r: np.random.Generator) -> str | None:
        state, tape = 0, list[str]()
        while len(tape) < PARITY_MAX_LEN:
            if state == accept_state and len(tape) >= PARITY_MIN_LEN and r.random() < prm["p_stop"]:
                return "".join(tape)
            if r.random() < prm["p_zero"]:
                tape.append("0")
                state ^= 1
            else:
                tape.append("1")
        return None

    tape = resample(rng, draw, what="parity")
    stats = {"length": float(len(tape)), "zero_fraction": tape.count("0") / len(tape)}
    return IclExample("parity", tape, want, delta, stats)


# ----------------------------------------------------------------- PATTERN MATCHING

PATTERN = "abcabb"
PATTERN_ALPHABET = "abc"
PATTERN_MIN_LEN = 8
PATTERN_MAX_LEN = 400


def _kmp_automaton(pattern: str, alphabet: str) -> list[dict[str, int]]:
    """``delta[state][symbol]`` of the string-matching automaton (state = matched prefix)."""
    m = len(pattern)
    table: list[dict[str, int]] = [dict.fromkeys(alphabet, 0) for _ in range(m + 1)]
    table[0][pattern[0]] = 1
    fallback = 0
    for state in range(1, m + 1):
        for sym in alphabet:
            table[state][sym] = table[fallback][sym]
        if state < m:
            table[state][pattern[state]] = state + 1
            fallback = table[fallback][pattern[state]]
    for sym in alphabet:  # the full match is absorbing: once seen it stays seen
        table[m][sym] = m
    return table


_PM_TABLE = _kmp_automaton(PATTERN, PATTERN_ALPHABET)


def pattern_params(delta: float) -> dict[str, float]:
    """Probability of the symbol that advances the match, and the stop probability."""
    return {"p_advance": 0.75 - 0.3 * delta, "p_stop": 0.08}


def sample_pattern_matching(
    rng: np.random.Generator, delta: float, label: str | None = None
) -> IclExample:
    """One pattern-matching example: a walk on the ``abcabb`` matching automaton.

    In each state the symbol that extends the current match is emitted with probability
    ``p_advance`` and the other two share the rest. Positive walks run until the match
    is complete and may stop afterwards; negative walks never take the last advancing
    transition and may stop anywhere.
    """
    delta = check_delta(delta)
    want = pick_label(rng, label)
    prm = pattern_params(delta)
    final = len(PATTERN)

    def draw(r: np.random.Generator) -> str | None:
        state, tape = 0, list[str]()
        while len(tape) < PATTERN_MAX_LEN:
            may_stop = len(tape) >= PATTERN_MIN_LEN and (want == NEGATIVE or state == final)
            if may_stop and r.random() < prm["p_stop"]:
                return "".join(tape)
            if state == final:
                sym = PATTERN_ALPHABET[int(r.integers(3))]
            else:
                adv = PATTERN[state]
                others = [s for s in PATTERN_ALPHABET if s != adv]
                if want == NEGATIVE and state == final - 1:
                    sym = others[int(r.integers(2))]
                elif r.random() < prm["p_advance"]:
                    sym = adv
                else:
                    sym = others[int(r.integers(2))]
            tape.append(sym)
            state = _PM_TABLE[state][sym]
        return None

    tape = resample(rng, draw, what="pattern_matching")
    stats = {"length": float(len(tape)), "a_fraction": tape.count("a") / len(tape)}
    return IclExample("pattern_matching", tape, want, delta, stats)


# ------------------------------------------------------------------------- REVERSAL

REVERSAL_TOKENS: tuple[str, ...] = ("ka", "%", "zu", "mep", "@")
REVERSAL_SEP = "#"
REVERSAL_MIN_LEN = 4
REVERSAL_MAX_LEN = 30


def reversal_params(delta: float) -> dict[str, float]:
    """Probability of repeating the previous token and of stopping after each token."""
    return {"p_repeat": 0.4 - 0.25 * delta, "p_stop": 0.15 - 0.1 * delta}


def sample_reversal(rng: np.random.Generator, delta: float, label: str | None = None) -> IclExample:
    """One reversal example ``w # v``: ``w`` from a walk over tokens, ``v`` = reversed ``w``
    (label 1) or a corrupted reversal (one deletion, substitution or adjacent swap; label 0).
    """
    delta = check_delta(delta)
    want = pick_label(rng, label)
    prm = reversal_params(delta)
    n_tok = len(REVERSAL_TOKENS)

    def walk(r: np.random.Generator) -> list[int] | None:
        seq = [int(r.integers(n_tok))]
        while len(seq) < REVERSAL_MAX_LEN:
            if len(seq) >= REVERSAL_MIN_LEN and r.random() < prm["p_stop"]:
                return seq
            other = (1.0 - prm["p_repeat"]) / (n_tok - 1)
            weights = [prm["p_repeat"] if t == seq[-1] else other for t in range(n_tok)]
            seq.append(categorical(r, weights))
        return None

    seq = resample(rng, walk, what="reversal")
    target = seq[::-1]
    if want == POSITIVE:
        second = target
    else:

        def corrupt(r: np.random.Generator) -> list[int] | None:
            out = list(target)
            kind = int(r.integers(3))
            i = int(r.integers(len(out)))
            if kind == 0:
                del out[i]
            elif kind == 1:
                out[i] = int(r.integers(n_tok))
            elif i + 1 < len(out):
                out[i], out[i + 1] = out[i + 1], out[i]
            return out if out != target else None

        second = resample(rng, corrupt, what="reversal corruption")
    words = (
        [REVERSAL_TOKENS[t] for t in seq] + [REVERSAL_SEP] + [REVERSAL_TOKENS[t] for t in second]
    )
    repeats = sum(a == b for a, b in itertools.pairwise(seq)) / max(len(seq) - 1, 1)
    stats = {"length": float(len(seq)), "repeat_fraction": float(repeats)}
    return IclExample("reversal", " ".join(words), want, delta, stats)


# ---------------------------------------------------------------------------- STACK

STACK_MIN_OPS = 3
STACK_MAX_OPS = 60


def stack_params(delta: float) -> dict[str, float]:
    """Weights of push / pop / stop and the probability that a push pushes ``0``."""
    return {
        "push": 0.4 + 0.3 * delta,
        "pop": 0.4 - 0.15 * delta,
        "stop": 0.2 - 0.15 * delta,
        "p_zero": 0.5 + 0.25 * delta,
    }


def sample_stack(rng: np.random.Generator, delta: float, label: str | None = None) -> IclExample:
    """One stack example: initial stack, operations, claimed final stack.

    The operations come from a walk on the push/pop/stop automaton (pop is never taken
    on an empty stack). The claim is the true final stack (label 1) or a perturbed one
    (one bit flipped, the top dropped or an extra bit pushed; label 0).
    """
    delta = check_delta(delta)
    want = pick_label(rng, label)
    prm = stack_params(delta)

    def draw(r: np.random.Generator) -> tuple[str, list[str], str] | None:
        start = "".join("01"[int(b)] for b in r.integers(0, 2, size=int(r.integers(2, 9))))
        stack = list(start)
        ops: list[str] = []
        while len(ops) < STACK_MAX_OPS:
            weights = [prm["push"], prm["pop"] if stack else 0.0, prm["stop"]]
            if len(ops) < STACK_MIN_OPS:
                weights[2] = 0.0
            choice = categorical(r, weights)
            if choice == 2:
                return start, ops, "".join(stack)
            if choice == 1:
                stack.pop()
                ops.append("pop")
            else:
                bit = "0" if r.random() < prm["p_zero"] else "1"
                stack.append(bit)
                ops.append(f"push {bit}")
        return None

    start, ops, final = resample(rng, draw, what="stack")
    claim = final
    if want == NEGATIVE:
        kind = int(rng.integers(3))
        if kind == 0 and final:
            i = int(rng.integers(len(final)))
            claim = final[:i] + ("1" if final[i] == "0" else "0") + final[i + 1 :]
        elif kind == 1 and final:
            claim = final[:-1]
        else:
            claim = final + ("0" if rng.random() < 0.5 else "1")
    text = f"stack: {start or 'empty'}\nops: {', '.join(ops)}\nresult: {claim or 'empty'}"
    pushes = [op for op in ops if op.startswith("push")]
    stats = {
        "n_ops": float(len(ops)),
        "push_fraction": len(pushes) / len(ops),
        "final_height": float(len(final)),
    }
    return IclExample("stack", text, want, delta, stats)
