r"""One-layer attention in-context regressors: linear attention, GLA and softmax attention.

Each reads the prompt tokens ``z_t = [x_t, y_t]`` (query label zeroed), projects them to
queries, keys and values per head, and predicts the query label from the last position:

* ``"linear"``: ``o = s q_{n+1} \sum_t k_t^\top v_t`` (causal linear attention);
* ``"gla"``: ``o = s q_{n+1} \sum_t \lambda_h^{n+1-t} k_t^\top v_t`` with one learned forgetting
  factor ``lambda_h = sigmoid(theta_h)`` per head (a learnable recency bias; ``lambda = 1`` is
  linear attention);
* ``"softmax"``: causal softmax attention (a reference; it has no notion of position).

The linear forms compute the GLA state after the last token in closed form; tests check it
against :func:`lc_attention.linear.gla_chunk`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["KINDS", "ICLRegressor"]

KINDS = ("linear", "gla", "softmax")


class ICLRegressor(nn.Module):
    """A one-layer attention model that predicts the query label of a regression prompt.

    Args:
        kind: ``"linear"``, ``"gla"`` or ``"softmax"``.
        dim: input dimension ``d`` (tokens have ``d + 1`` features).
        n_heads: attention heads.
        head_dim: per-head width, default ``d + 1``.
        n_context: prompt length ``n``; linear forms scale their sum by ``1 / n``.
        init_decay: initial forgetting factor of ``"gla"`` heads, in ``(0, 1)``.
        seed: initialisation seed.

    Example:
        >>> import torch
        >>> m = ICLRegressor("gla", dim=3, n_context=8, seed=0)
        >>> m(torch.randn(4, 9, 4)).shape, m.decay().shape
        (torch.Size([4]), torch.Size([1]))
    """

    def __init__(
        self,
        kind: str,
        dim: int,
        n_heads: int = 1,
        head_dim: int | None = None,
        n_context: int = 30,
        init_decay: float = 0.9,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if not 0.0 < init_decay < 1.0:
            raise ValueError(f"init_decay must be in (0, 1), got {init_decay}")
        self.kind, self.n_heads, self.n_context = kind, n_heads, n_context
        self.head_dim = head_dim or dim + 1
        width = n_heads * self.head_dim
        gen = torch.Generator().manual_seed(seed)
        std = 0.1 / (dim + 1) ** 0.5

        def init(rows: int, cols: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(rows, cols, generator=gen) * std)

        self.w_q, self.w_k, self.w_v = (
            init(dim + 1, width),
            init(dim + 1, width),
            init(dim + 1, width),
        )
        self.readout = init(width, 1)
        logit = torch.log(torch.tensor(init_decay) / (1 - init_decay))
        self.decay_logit = nn.Parameter(logit.repeat(n_heads)) if kind == "gla" else None

    def decay(self) -> torch.Tensor:
        """Forgetting factor per head ``[H]`` (ones for linear and softmax attention)."""
        if self.decay_logit is None:
            return torch.ones(self.n_heads)
        return torch.sigmoid(self.decay_logit.detach())

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Predicted query labels ``[B]`` for prompt tokens ``[B, n+1, d+1]``."""
        if tokens.dim() != 3 or tokens.shape[-1] != self.w_q.shape[0]:
            raise ValueError(
                f"tokens must be [batch, n+1, {self.w_q.shape[0]}], got {tuple(tokens.shape)}"
            )
        b, t, _ = tokens.shape
        h, e = self.n_heads, self.head_dim
        q = (tokens @ self.w_q).view(b, t, h, e)
        k = (tokens @ self.w_k).view(b, t, h, e)
        v = (tokens @ self.w_v).view(b, t, h, e)
        if self.kind == "softmax":
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
            ).transpose(1, 2)
            last = o[:, -1]
        else:
            # Only the query position is read, so form the GLA state after the last token
            # directly: S = sum_t lambda^(T - t) k_t^T v_t (equal to gla_chunk's final state).
            ages = torch.arange(t - 1, -1, -1, dtype=tokens.dtype, device=tokens.device)
            weights = (ages[:, None] * self.log_decay()[None, :]).exp()  # [T, H]
            state = torch.einsum("th,bthk,bthv->bhkv", weights, k, v)
            last = torch.einsum("bhk,bhkv->bhv", q[:, -1], state) / self.n_context
        return (last.reshape(b, h * e) @ self.readout)[:, 0]

    def log_decay(self) -> torch.Tensor:
        """Per-head log forgetting factor ``[H]`` (zeros without a gate), differentiable."""
        if self.decay_logit is None:
            return torch.zeros(self.n_heads, device=self.w_q.device)
        return F.logsigmoid(self.decay_logit)
