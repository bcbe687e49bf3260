"""The vending-machine tasks.

A machine takes 5 and 10 coins (balance capped at :data:`BALANCE_CAP`) and sells
coffee (15), a biscuit (20) and soda (25). Its states are the balances; a random walk
picks legal actions (no purchase the balance cannot pay, no coin beyond the cap) with
weights that depend on ``delta``.

* ``vending_machine``: the actions and a claimed final balance; label 1 iff the claim
  is right.
* ``vending_machine_sum``: the actions only; the label is the final balance.
"""

from __future__ import annotations

import numpy as np

from lc_evals.icl.base import NEGATIVE, IclExample, categorical, check_delta, pick_label, resample

ACTIONS: tuple[str, ...] = ("+5", "+10", "coffee", "biscuit", "soda")
PRICES: dict[str, int] = {"coffee": 15, "biscuit": 20, "soda": 25}
COINS: dict[str, int] = {"+5": 5, "+10": 10}
BALANCE_CAP = 30
VM_MIN_ACTIONS = 5
VM_MAX_ACTIONS = 40


def vending_params(delta: float) -> dict[str, float]:
    """Action weights (before legality masking) and the stop probability."""
    return {
        "+5": 0.2 + 0.4 * delta,
        "+10": 0.4 - 0.3 * delta,
        "coffee": 0.15 - 0.05 * delta,
        "biscuit": 0.15 - 0.05 * delta,
        "soda": 0.1,
        "p_stop": 0.1 - 0.05 * delta,
    }


def _walk(rng: np.random.Generator, delta: float) -> tuple[list[str], int, list[int]]:
    prm = vending_params(delta)

    def draw(r: np.random.Generator) -> tuple[list[str], int, list[int]] | None:
        balance, actions, seen = 0, list[str](), [0]
        while len(actions) < VM_MAX_ACTIONS:
            if len(actions) >= VM_MIN_ACTIONS and r.random() < prm["p_stop"]:
                return actions, balance, seen
            weights = []
            for act in ACTIONS:
                if act in COINS:
                    ok = balance + COINS[act] <= BALANCE_CAP
                else:
                    ok = balance >= PRICES[act]
                weights.append(prm[act] if ok else 0.0)
            act = ACTIONS[categorical(r, weights)]
            balance += COINS[act] if act in COINS else -PRICES[act]
            actions.append(act)
            seen.append(balance)
        return None

    return resample(rng, draw, what="vending machine")


def _stats(actions: list[str]) -> dict[str, float]:
    return {
        "n_actions": float(len(actions)),
        "coin5_fraction": actions.count("+5") / len(actions),
    }


def sample_vending_machine(
    rng: np.random.Generator, delta: float, label: str | None = None
) -> IclExample:
    """One vending-machine example ``actions = claimed balance``.

    The wrong claim of a negative is another balance the machine could show
    (a multiple of 5 up to the cap), preferring balances the walk passed through.
    """
    delta = check_delta(delta)
    want = pick_label(rng, label)
    actions, final, seen = _walk(rng, delta)
    claim = final
    if want == NEGATIVE:
        visited = sorted({b for b in seen if b != final})
        if visited and rng.random() < 0.7:
            claim = visited[int(rng.integers(len(visited)))]
        else:
            others = [b for b in range(0, BALANCE_CAP + 5, 5) if b != final]
            claim = others[int(rng.integers(len(others)))]
    text = f"{', '.join(actions)} = {claim}"
    return IclExample("vending_machine", text, want, delta, _stats(actions))


def sample_vending_machine_sum(
    rng: np.random.Generator, delta: float, label: str | None = None
) -> IclExample:
    """One vending-machine-sum example: the actions; the label is the final balance.

    ``label`` must be ``None`` (the answer is a number, not a class).
    """
    delta = check_delta(delta)
    if label is not None:
        raise ValueError(
            f"vending_machine_sum has numeric labels; label must be None, got {label!r}"
        )
    actions, final, _ = _walk(rng, delta)
    return IclExample("vending_machine_sum", ", ".join(actions), str(final), delta, _stats(actions))
