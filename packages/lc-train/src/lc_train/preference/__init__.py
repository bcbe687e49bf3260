"""Long-context preference optimization: SoLoPO over DPO, SimPO and ORPO rewards.

The losses, log-probabilities and data construction need only torch; the trainer
(:class:`~lc_train.preference.trainer.SoLoPOTrainer`, a subclass of TRL's
``DPOTrainer``) needs the ``trl`` extra and is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lc_train.preference.data import PreferencePair, build_pairs, pad_context, pair_records
from lc_train.preference.logps import response_logps
from lc_train.preference.losses import (
    ResponseLogps,
    SoLoPOConfig,
    preference_loss,
    reward,
    solopo_loss,
)

if TYPE_CHECKING:
    from lc_train.preference.trainer import SoLoPODataCollator, SoLoPOTrainer

_LAZY = {"SoLoPOTrainer", "SoLoPODataCollator"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from lc_train.preference import trainer

        return getattr(trainer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "PreferencePair",
    "ResponseLogps",
    "SoLoPOConfig",
    "SoLoPODataCollator",
    "SoLoPOTrainer",
    "build_pairs",
    "pad_context",
    "pair_records",
    "preference_loss",
    "response_logps",
    "reward",
    "solopo_loss",
]
