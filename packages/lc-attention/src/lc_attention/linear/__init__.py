"""Linear recurrent attention: gated linear attention (GLA), plain linear attention, the
mLSTM of xLSTM, and the SWAX hybrid of sliding-window attention and mLSTM.

Operators take ``[batch, seq, heads, head_dim]`` tensors and come in a parallel (training)
and a recurrent (decoding) form that compute the same function. Optional GPU kernels
(flash-linear-attention, ``mlstm_kernels``) are used only when installed and on CUDA.
"""

from __future__ import annotations

from lc_attention.linear.gla import (
    gated_linear_attention,
    gla_chunk,
    gla_recurrent,
    linear_attention,
)
from lc_attention.linear.layers import GatedLinearAttention, GLAConfig, MLSTMConfig, MLSTMLayer
from lc_attention.linear.mlstm import MLSTMState, mlstm, mlstm_parallel, mlstm_recurrent
from lc_attention.linear.swax import (
    SlidingWindowAttention,
    StochasticWindow,
    SWAXConfig,
    SWAXModel,
    sliding_window_attention,
)

__all__ = [
    "GLAConfig",
    "GatedLinearAttention",
    "MLSTMConfig",
    "MLSTMLayer",
    "MLSTMState",
    "SWAXConfig",
    "SWAXModel",
    "SlidingWindowAttention",
    "StochasticWindow",
    "gated_linear_attention",
    "gla_chunk",
    "gla_recurrent",
    "linear_attention",
    "mlstm",
    "mlstm_parallel",
    "mlstm_recurrent",
    "sliding_window_attention",
]
