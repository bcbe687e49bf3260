"""Long-context preference optimization: SoLoPO over DPO, SimPO and ORPO rewards."""

from __future__ import annotations

from lc_train.preference.logps import response_logps
from lc_train.preference.losses import (
    ResponseLogps,
    SoLoPOConfig,
    preference_loss,
    reward,
    solopo_loss,
)

__all__ = [
    "ResponseLogps",
    "SoLoPOConfig",
    "preference_loss",
    "response_logps",
    "reward",
    "solopo_loss",
]
