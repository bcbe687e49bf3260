"""LDAR: a learned, distraction-aware choice of which retrieved passages to pass on.

:class:`LdarRetriever` pairs an :class:`~lc_agents.ldar.LdarHead` with an action set of
bands (:func:`~lc_agents.ldar.default_bands`). At inference it ranks passages by
similarity, scores every band from the similarity profile and returns the passages of
the best band. Training (:meth:`LdarRetriever.fit`) maximises the expected reward of the
band policy ``pi(band | profile) = softmax(logits)``:

``J = mean_q sum_a pi(a | q) * (correct(q, a) - token_penalty * tokens(q, a) / tokens(q, full))
+ entropy * H(pi(. | q))``

where ``correct`` and ``tokens`` come from running the downstream model offline on every
band (:func:`~lc_agents.ldar.label_examples`). The paper trains its retriever with a
reward for downstream correctness and fewer tokens; because every band's outcome is
cached here, the expectation is computed exactly rather than from sampled bands.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from lc_agents._validation import check_fields
from lc_agents.ldar.bands import Band
from lc_agents.ldar.data import LdarExample
from lc_agents.ldar.features import N_FEATURES, similarity_features, sort_similarities
from lc_agents.ldar.model import LdarHead

__all__ = ["LdarConfig", "LdarRetriever"]

FORMAT = "lc-ldar-1"


@dataclass(frozen=True)
class LdarConfig:
    """Head size and training settings.

    Attributes:
        hidden, heads, layers: head architecture (``hidden % heads == 0``).
        token_penalty: reward lost for passing every passage (scaled by the band's share
            of the full context's tokens), >= 0.
        entropy: entropy bonus weight, >= 0.
        epochs: full-batch Adam steps, >= 1.
        lr: learning rate, > 0.
        weight_decay: Adam weight decay, >= 0.
        seed: initialisation seed.
    """

    hidden: int = 32
    heads: int = 2
    layers: int = 1
    token_penalty: float = 0.1
    entropy: float = 0.01
    epochs: int = 300
    lr: float = 1e-2
    weight_decay: float = 1e-4
    seed: int = 0

    def __post_init__(self) -> None:
        checks = [
            (
                "hidden",
                self.hidden,
                self.hidden >= 1 and self.hidden % max(self.heads, 1) == 0,
                "a positive multiple of heads",
            ),
            ("heads", self.heads, self.heads >= 1, ">= 1"),
            ("layers", self.layers, self.layers >= 0, ">= 0"),
            ("token_penalty", self.token_penalty, self.token_penalty >= 0, ">= 0"),
            ("entropy", self.entropy, self.entropy >= 0, ">= 0"),
            ("epochs", self.epochs, self.epochs >= 1, ">= 1"),
            ("lr", self.lr, self.lr > 0, "> 0"),
            ("weight_decay", self.weight_decay, self.weight_decay >= 0, ">= 0"),
        ]
        check_fields("LdarConfig", checks)


def _batch(profiles: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    n_max = max(len(p) for p in profiles)
    feats = torch.zeros(len(profiles), n_max, N_FEATURES)
    mask = torch.zeros(len(profiles), n_max, dtype=torch.bool)
    for i, p in enumerate(profiles):
        feats[i, : len(p)] = torch.from_numpy(similarity_features(p))
        mask[i, : len(p)] = True
    return feats, mask


class LdarRetriever:
    """Chooses a band of the similarity ranking per query (see the module docs).

    Args:
        bands: the action set.
        config: head and training settings.

    Examples:
        >>> from lc_agents.ldar import default_bands
        >>> r = LdarRetriever(default_bands(4))
        >>> sorted(r.select([0.2, 0.9, 0.5, 0.1]))  # indices into the passages  # doctest: +SKIP
    """

    def __init__(self, bands: Sequence[Band], config: LdarConfig | None = None) -> None:
        self.bands = list(bands)
        if not self.bands:
            raise ValueError("bands must not be empty")
        if len(set(self.bands)) != len(self.bands):
            raise ValueError("bands must be distinct")
        self.config = config or LdarConfig()
        torch.manual_seed(self.config.seed)
        self.head = LdarHead(
            self.bands,
            hidden=self.config.hidden,
            heads=self.config.heads,
            layers=self.config.layers,
        )
        self.head.eval()

    # ------------------------------------------------------------------ training

    def rewards(self, examples: Sequence[LdarExample]) -> np.ndarray:
        """Reward matrix ``[len(examples), len(bands)]`` (NaN for bands past a list)."""
        out = np.full((len(examples), len(self.bands)), np.nan)
        for i, e in enumerate(examples):
            if e.correct.shape != (len(self.bands),):
                raise ValueError(
                    f"example {e.id!r} has {e.correct.shape[0]} band outcomes, retriever has {len(self.bands)} bands"
                )
            full = np.nanmax(e.tokens)
            share = e.tokens / full if full > 0 else np.zeros_like(e.tokens)
            out[i] = e.correct - self.config.token_penalty * share
        return out

    def fit(self, examples: Sequence[LdarExample]) -> list[float]:
        """Train the head on labelled examples; returns the loss per epoch."""
        if not examples:
            raise ValueError("no training examples")
        cfg = self.config
        torch.manual_seed(cfg.seed)
        feats, mask = _batch([e.similarities for e in examples])
        r = self.rewards(examples)
        valid = torch.from_numpy(~np.isnan(r))
        reward = torch.from_numpy(np.nan_to_num(r, nan=0.0)).float()
        opt = torch.optim.Adam(self.head.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        losses = []
        self.head.train()
        for _ in range(cfg.epochs):
            logits = self.head(feats, mask)
            logits = logits.masked_fill(~valid, float("-inf"))
            logp = torch.log_softmax(logits, dim=-1)
            p = logp.exp()
            safe_logp = logp.masked_fill(~valid, 0.0)
            expected = (p * reward).sum(-1)
            entropy = -(p * safe_logp).sum(-1)
            loss = -(expected + cfg.entropy * entropy).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        self.head.eval()
        return losses

    # ------------------------------------------------------------------ inference

    @torch.no_grad()
    def band_probabilities(self, sorted_similarities: Sequence[float] | np.ndarray) -> np.ndarray:
        """``pi(band | profile)`` ``[len(bands)]`` for similarities sorted best first."""
        feats, mask = _batch([np.asarray(sorted_similarities, dtype=np.float64)])
        return torch.softmax(self.head(feats, mask)[0], dim=-1).numpy()

    def choose(self, sorted_similarities: Sequence[float] | np.ndarray) -> Band:
        """The most probable band."""
        return self.bands[int(np.argmax(self.band_probabilities(sorted_similarities)))]

    def select(self, similarities: Sequence[float] | np.ndarray) -> list[int]:
        """Indices of the passages to keep (in rank order), from unsorted similarities."""
        sims, order = sort_similarities(similarities)
        band = self.choose(sims)
        return [int(order[r]) for r in band.ranks(len(order))]

    def policy_value(self, examples: Sequence[LdarExample]) -> dict[str, float]:
        """Accuracy and mean passage tokens of the greedy band choice on labelled examples."""
        acc, tok = [], []
        for e in examples:
            a = self.bands.index(self.choose(e.similarities))
            acc.append(e.correct[a])
            tok.append(e.tokens[a])
        return {"accuracy": float(np.mean(acc)), "tokens": float(np.mean(tok))}

    # ------------------------------------------------------------------ persistence

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write bands, config and weights (``torch.save``; loadable with weights_only)."""
        torch.save(
            {
                "format": FORMAT,
                "bands": [[b.start, b.end] for b in self.bands],
                "config": asdict(self.config),
                "state": self.head.state_dict(),
            },
            os.fspath(path),
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LdarRetriever:
        """Read a retriever written by :meth:`save`."""
        blob: dict[str, Any] = torch.load(os.fspath(path), weights_only=True)
        if blob.get("format") != FORMAT:
            raise ValueError(f"{path} is not an LDAR checkpoint (format {blob.get('format')!r})")
        r = cls([Band(int(s), int(e)) for s, e in blob["bands"]], LdarConfig(**blob["config"]))
        r.head.load_state_dict(blob["state"])
        r.head.eval()
        return r
