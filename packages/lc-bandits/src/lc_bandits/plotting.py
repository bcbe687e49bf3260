"""Plots of queue lengths and queue-length regret (matplotlib, Agg backend)."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lc_bandits.experiment import PolicySummary

__all__ = ["LABELS", "plot_experiment"]

LABELS: dict[str, str] = {
    "oracle": "oracle",
    "cqb_eps": "CQB-ε",
    "cqb_opt": "CQB-Opt",
    "greedy": "greedy MLE",
    "fifo_ucb": "FIFO + logistic UCB",
    "random": "random",
}


def _pyplot():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_experiment(
    rounds: Sequence[int],
    policies: Mapping[str, PolicySummary],
    path: str | pathlib.Path,
    title: str = "",
) -> pathlib.Path:
    """Two panels: mean queue length (log scale) and regret ``Q_pi - Q_*``, with 95% bands.

    The random policy is left out of the regret panel (it grows linearly and would hide
    the learners).

    Returns:
        The written path.
    """
    plt = _pyplot()
    fig, (ax_q, ax_r) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, s in policies.items():
        label = LABELS.get(name, name)
        (line,) = ax_q.plot(rounds, s.queue_mean, label=label, lw=1.4)
        ax_q.fill_between(rounds, s.queue_low, s.queue_high, color=line.get_color(), alpha=0.2)
        if name not in ("oracle", "random"):
            ax_r.plot(rounds, s.regret_mean, label=label, lw=1.4, color=line.get_color())
            ax_r.fill_between(
                rounds, s.regret_low, s.regret_high, color=line.get_color(), alpha=0.2
            )
    ax_q.set_yscale("log")
    ax_q.set_xlabel("round t")
    ax_q.set_ylabel("mean queue length Q(t)")
    ax_q.legend(fontsize=8)
    ax_r.axhline(0.0, color="k", lw=0.6)
    ax_r.set_yscale("symlog", linthresh=1.0)
    ax_r.set_xlabel("round t")
    ax_r.set_ylabel("queue-length regret Q(t) - Q*(t)")
    ax_r.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = pathlib.Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
