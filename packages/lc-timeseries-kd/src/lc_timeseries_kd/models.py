"""Time-series classifiers that expose a feature extractor and a linear head.

Every model maps ``[batch, channels, length]`` to logits ``[batch, n_classes]`` and
splits into ``features(x) -> [batch, feature_dim]`` and ``head(f) -> logits``, which is
what feature distillation and GDPD need: the student's head can classify a feature
that did not come from its own encoder.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["FCNClassifier", "LSTMClassifier", "SeriesClassifier", "build_model"]


class SeriesClassifier(nn.Module):
    """Base class: ``forward(x) = head(features(x))``.

    Attributes:
        feature_dim: size ``D`` of the feature vector.
        head: linear classifier ``[batch, D] -> [batch, n_classes]``.
    """

    feature_dim: int
    head: nn.Linear

    def features(self, x: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        """Feature vector ``[batch, D]`` of ``x`` ``[batch, channels, length]``."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[batch, n_classes]`` of ``x`` ``[batch, channels, length]``."""
        return self.head(self.features(x))

    @staticmethod
    def _check(x: torch.Tensor, channels: int) -> None:
        if x.ndim != 3 or x.shape[1] != channels:
            raise ValueError(
                f"expected input of shape [batch, {channels} channels, length], got {tuple(x.shape)}"
            )


class LSTMClassifier(SeriesClassifier):
    """Stacked LSTM over time; the feature is the last hidden state of the top layer.

    The paper's model is 3 layers of 100 units.

    Args:
        in_channels: channels ``C`` of the input.
        n_classes: number of classes.
        hidden: units per layer (paper: 100).
        layers: stacked layers (paper: 3).

    Example:
        >>> m = LSTMClassifier(2, 3, hidden=8, layers=1)
        >>> m(torch.zeros(4, 2, 10)).shape
        torch.Size([4, 3])
    """

    def __init__(self, in_channels: int, n_classes: int, hidden: int = 100, layers: int = 3):
        super().__init__()
        self.in_channels = in_channels
        self.lstm = nn.LSTM(in_channels, hidden, num_layers=layers, batch_first=True)
        self.feature_dim = hidden
        self.head = nn.Linear(hidden, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Last top-layer hidden state ``[batch, hidden]``."""
        self._check(x, self.in_channels)
        out, _ = self.lstm(x.transpose(1, 2))
        return out[:, -1]


class FCNClassifier(SeriesClassifier):
    """Fully convolutional network (Wang et al., 2017): three conv-BN-ReLU blocks + GAP.

    Args:
        in_channels: channels ``C`` of the input.
        n_classes: number of classes.
        widths: output channels of the three blocks (default 128, 256, 128).
        kernels: kernel sizes of the three blocks (default 8, 5, 3).

    Example:
        >>> m = FCNClassifier(1, 2, widths=(8, 16, 8))
        >>> m.features(torch.zeros(4, 1, 30)).shape
        torch.Size([4, 8])
    """

    def __init__(
        self,
        in_channels: int,
        n_classes: int,
        widths: tuple[int, int, int] = (128, 256, 128),
        kernels: tuple[int, int, int] = (8, 5, 3),
    ):
        super().__init__()
        self.in_channels = in_channels
        blocks: list[nn.Module] = []
        prev = in_channels
        for width, k in zip(widths, kernels):
            blocks += [
                nn.Conv1d(prev, width, k, padding=k // 2),
                nn.BatchNorm1d(width),
                nn.ReLU(),
            ]
            prev = width
        self.body = nn.Sequential(*blocks)
        self.feature_dim = prev
        self.head = nn.Linear(prev, n_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Global-average-pooled last block ``[batch, widths[-1]]``."""
        self._check(x, self.in_channels)
        return self.body(x).mean(dim=-1)  # even kernels add one step; pooling absorbs it


def build_model(
    arch: str,
    in_channels: int,
    n_classes: int,
    *,
    hidden: int = 100,
    layers: int = 3,
    widths: tuple[int, int, int] = (128, 256, 128),
) -> SeriesClassifier:
    """Build ``"lstm"`` (``hidden`` x ``layers``) or ``"fcn"`` (``widths``) by name.

    Example:
        >>> build_model("fcn", 1, 2).feature_dim
        128
    """
    if arch == "lstm":
        return LSTMClassifier(in_channels, n_classes, hidden=hidden, layers=layers)
    if arch == "fcn":
        return FCNClassifier(in_channels, n_classes, widths=tuple(widths))  # type: ignore[arg-type]
    raise ValueError(f"arch must be one of 'lstm', 'fcn', got {arch!r}")
