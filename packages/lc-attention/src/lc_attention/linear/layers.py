"""``nn.Module`` layers: gated linear attention and mLSTM, each with a decoding step.

Both take and return hidden states ``[batch, seq, d_model]``; internally heads use the
``[batch, seq, heads, head_dim]`` layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from lc_attention.linear.gla import gated_linear_attention
from lc_attention.linear.mlstm import MLSTMState, mlstm, mlstm_parallel, mlstm_recurrent
from lc_kernels.backend import Backend

__all__ = ["GLAConfig", "GatedLinearAttention", "MLSTMConfig", "MLSTMLayer"]

GATE_KINDS = ("gla", "none")


def _positive(name: str, value: int) -> None:
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


@dataclass(frozen=True)
class GLAConfig:
    """Configuration of [GatedLinearAttention][lc_attention.linear.layers.GatedLinearAttention].

    Attributes:
        d_model: hidden size.
        n_heads: heads; ``key_dim`` and ``d_model`` must divide by it.
        key_dim: total query/key width (GLA uses ``d_model / 2``); ``None`` means that.
        gate: ``"gla"`` (data-dependent per-key-dim decay) or ``"none"`` (linear attention).
        gate_low_rank: rank of the gate projection ``d_model -> r -> key_dim``.
        gate_logit_normalizer: ``g = logsigmoid(logits) / normalizer`` (16 in GLA),
            which keeps decays near 1 at initialisation.
        output_gate: multiply the normalised output by ``silu(W_g x)``.
        chunk_size: chunk length of the training form.
        backend: kernel backend passed to the operator.
    """

    d_model: int = 64
    n_heads: int = 4
    key_dim: int | None = None
    gate: str = "gla"
    gate_low_rank: int = 16
    gate_logit_normalizer: float = 16.0
    output_gate: bool = True
    chunk_size: int = 16
    backend: Backend | str = "auto"

    def __post_init__(self) -> None:
        _positive("d_model", self.d_model)
        _positive("n_heads", self.n_heads)
        _positive("gate_low_rank", self.gate_low_rank)
        _positive("chunk_size", self.chunk_size)
        kd = self.d_model // 2 if self.key_dim is None else self.key_dim
        _positive("key_dim", kd)
        if kd % self.n_heads or self.d_model % self.n_heads:
            raise ValueError(
                f"key_dim ({kd}) and d_model ({self.d_model}) must divide by n_heads ({self.n_heads})"
            )
        if self.gate not in GATE_KINDS:
            raise ValueError(f"gate must be one of {GATE_KINDS}, got {self.gate!r}")
        if not self.gate_logit_normalizer > 0:
            raise ValueError(f"gate_logit_normalizer must be > 0, got {self.gate_logit_normalizer}")

    @property
    def resolved_key_dim(self) -> int:
        """Total key width after applying the ``d_model / 2`` default."""
        return self.d_model // 2 if self.key_dim is None else self.key_dim


def _check_hidden(x: torch.Tensor, d_model: int) -> None:
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must be [batch, seq, {d_model}], got {tuple(x.shape)}")


class GatedLinearAttention(nn.Module):
    """Gated linear attention layer (GLA): projections, low-rank decay gate, output norm.

    ``g = logsigmoid(W2 W1 x + b) / normalizer`` gives per-key-dim log-decays in
    ``(-inf, 0)``; ``gate="none"`` drops the gate and is plain linear attention.

    Example:
        >>> import torch
        >>> layer = GatedLinearAttention(GLAConfig(d_model=32, n_heads=2, backend="torch"))
        >>> x = torch.randn(2, 10, 32)
        >>> y, state = layer(x)
        >>> y_step, _ = layer(x[:, -1:], state=layer(x[:, :-1])[1])
        >>> torch.allclose(y[:, -1:], y_step, atol=1e-5)
        True
    """

    def __init__(self, config: GLAConfig) -> None:
        super().__init__()
        self.config = c = config
        kd = c.resolved_key_dim
        self.q_proj = nn.Linear(c.d_model, kd, bias=False)
        self.k_proj = nn.Linear(c.d_model, kd, bias=False)
        self.v_proj = nn.Linear(c.d_model, c.d_model, bias=False)
        self.gate_proj: nn.Sequential | None = None
        if c.gate == "gla":
            self.gate_proj = nn.Sequential(
                nn.Linear(c.d_model, c.gate_low_rank, bias=False),
                nn.Linear(c.gate_low_rank, kd, bias=True),
            )
        self.g_proj = nn.Linear(c.d_model, c.d_model, bias=False) if c.output_gate else None
        self.norm = nn.RMSNorm(c.d_model // c.n_heads, eps=1e-6)
        self.o_proj = nn.Linear(c.d_model, c.d_model, bias=False)

    def log_decay(self, x: torch.Tensor) -> torch.Tensor | None:
        """Per-key-dim log-decays ``[B, T, H, K/H]`` (``<= 0``), or ``None`` without a gate."""
        if self.gate_proj is None:
            return None
        c = self.config
        g = F.logsigmoid(self.gate_proj(x)) / c.gate_logit_normalizer
        return g.view(*x.shape[:2], c.n_heads, -1)

    def forward(
        self, x: torch.Tensor, state: torch.Tensor | None = None, mode: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Map ``x [B, T, d_model]`` to ``(y [B, T, d_model], state [B, H, K/H, d_model/H])``.

        ``mode`` defaults to ``"recurrent"`` for single-step inputs and ``"chunk"`` otherwise;
        pass the returned state back in to continue a sequence.
        """
        c = self.config
        _check_hidden(x, c.d_model)
        b, t, _ = x.shape
        h = c.n_heads
        q = self.q_proj(x).view(b, t, h, -1)
        k = self.k_proj(x).view(b, t, h, -1)
        v = self.v_proj(x).view(b, t, h, -1)
        mode = mode or ("recurrent" if t == 1 else "chunk")
        o, new_state = gated_linear_attention(
            q,
            k,
            v,
            self.log_decay(x),
            initial_state=state,
            mode=mode,
            chunk_size=c.chunk_size,
            backend=c.backend,
        )
        o = self.norm(o).reshape(b, t, c.d_model)
        if self.g_proj is not None:
            o = o * F.silu(self.g_proj(x))
        return self.o_proj(o), new_state


@dataclass(frozen=True)
class MLSTMConfig:
    """Configuration of [MLSTMLayer][lc_attention.linear.layers.MLSTMLayer].

    Attributes:
        d_model: hidden size.
        n_heads: heads; ``d_model`` must divide by it.
        forget_gate: ``"sigmoid"`` (xLSTM default) or ``"exp"``.
        forget_bias_range: the forget-gate biases are spread linearly over this range
            across heads (xLSTM: 3 to 6, i.e. a slow forgetting at initialisation).
        input_bias: initial input-gate bias (xLSTM: -10).
        eps: normalizer epsilon.
        backend: kernel backend for the parallel form.
    """

    d_model: int = 64
    n_heads: int = 4
    forget_gate: str = "sigmoid"
    forget_bias_range: tuple[float, float] = (3.0, 6.0)
    input_bias: float = -10.0
    eps: float = 1e-6
    backend: Backend | str = "auto"

    def __post_init__(self) -> None:
        _positive("d_model", self.d_model)
        _positive("n_heads", self.n_heads)
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must divide by n_heads ({self.n_heads})")
        if self.forget_gate not in ("sigmoid", "exp"):
            raise ValueError(f"forget_gate must be 'sigmoid' or 'exp', got {self.forget_gate!r}")
        lo, hi = self.forward_bias_checked()
        if lo > hi:
            raise ValueError(
                f"forget_bias_range must be (low, high) with low <= high, got {(lo, hi)}"
            )

    def forward_bias_checked(self) -> tuple[float, float]:
        """The forget-bias range as two floats."""
        if len(self.forget_bias_range) != 2:
            raise ValueError(
                f"forget_bias_range must hold two numbers, got {self.forget_bias_range}"
            )
        return float(self.forget_bias_range[0]), float(self.forget_bias_range[1])


class MLSTMLayer(nn.Module):
    """mLSTM layer: q/k/v projections, exponential input gate, forget gate, per-head norm,
    sigmoid output gate and output projection.

    Example:
        >>> import torch
        >>> layer = MLSTMLayer(MLSTMConfig(d_model=32, n_heads=2, backend="torch"))
        >>> x = torch.randn(2, 10, 32)
        >>> y, _ = layer(x)
        >>> _, state = layer(x[:, :-1], return_state=True)
        >>> y_step, _ = layer(x[:, -1:], state=state)
        >>> torch.allclose(y[:, -1:], y_step, atol=1e-5)
        True
    """

    def __init__(self, config: MLSTMConfig) -> None:
        super().__init__()
        self.config = c = config
        d, h = c.d_model, c.n_heads
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.i_proj = nn.Linear(d, h)
        self.f_proj = nn.Linear(d, h)
        self.o_gate = nn.Linear(d, d, bias=False)
        self.norm = nn.RMSNorm(d // h, eps=1e-6)
        self.out_proj = nn.Linear(d, d, bias=False)
        lo, hi = c.forward_bias_checked()
        with torch.no_grad():
            self.i_proj.weight.zero_()
            self.i_proj.bias.fill_(c.input_bias)
            self.f_proj.weight.zero_()
            self.f_proj.bias.copy_(torch.linspace(lo, hi, h))

    def forward(
        self,
        x: torch.Tensor,
        state: MLSTMState | None = None,
        mode: str | None = None,
        return_state: bool = False,
    ) -> tuple[torch.Tensor, MLSTMState | None]:
        """Map ``x [B, T, d_model]`` to ``(y [B, T, d_model], state or None)``.

        With a ``state`` (or ``mode="recurrent"``) the recurrent form runs and returns the
        new state; otherwise the parallel form runs, returning the state if asked.
        """
        c = self.config
        _check_hidden(x, c.d_model)
        b, t, _ = x.shape
        h = c.n_heads
        q = self.q_proj(x).view(b, t, h, -1)
        k = self.k_proj(x).view(b, t, h, -1)
        v = self.v_proj(x).view(b, t, h, -1)
        i, f = self.i_proj(x), self.f_proj(x)
        if c.forget_gate == "exp":
            f = -F.softplus(-f)  # a log-gate <= 0
        if mode not in (None, "parallel", "recurrent"):
            raise ValueError(f"mode must be 'parallel' or 'recurrent', got {mode!r}")
        new_state: MLSTMState | None
        if state is not None or mode == "recurrent":
            out, new_state = mlstm_recurrent(
                q, k, v, i, f, forget_gate=c.forget_gate, eps=c.eps, initial_state=state
            )
        elif not return_state:
            out, new_state = (
                mlstm(q, k, v, i, f, forget_gate=c.forget_gate, eps=c.eps, backend=c.backend),
                None,
            )
        else:
            out, new_state = mlstm_parallel(
                q, k, v, i, f, forget_gate=c.forget_gate, eps=c.eps, return_state=return_state
            )
        out = self.norm(out).reshape(b, t, c.d_model) * torch.sigmoid(self.o_gate(x))
        return self.out_proj(out), new_state
