"""Copy-constrained decoding: the model may only write spans of given source texts.

A small model asked to take notes invents plausible numbers instead of copying them.
:class:`SpanCopyConstraint` removes that failure mode at decoding time: every token the
model emits must continue a contiguous span of one of the *sources* (for a memory agent:
the current chunk and the previous memory), a *separator* token (a newline) closes a span
and opens the next one, and an *end* token stops. So every maximal separator-free run of
the output is, token for token, a contiguous span of some source; a 7-digit number can
only be written if it is in the text.

The state is the set of source positions that the current span could continue from;
each step keeps the positions whose token was chosen and advances them by one, so a step
costs O(total source tokens) with numpy and no index structure is needed for sources of a
few thousand tokens.

Example:
    >>> c = SpanCopyConstraint([[5, 6, 7], [6, 9]], separator_ids=[0], end_ids=[1])
    >>> sorted(c.allowed())           # a span may start at any source token
    [5, 6, 7, 9]
    >>> c.advance(6); sorted(c.allowed())   # after 6 come 7 or 9, or close the span
    [0, 1, 7, 9]
    >>> c.advance(9); sorted(c.allowed())   # source 2 ends here: only close
    [0, 1]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["CopyLogitsProcessor", "SpanCopyConstraint", "is_span_concatenation"]

_GAP = -1  # sentinel between sources: no span crosses it


class SpanCopyConstraint:
    """Incremental state of copy-constrained decoding for one sequence.

    Args:
        sources: token-id sequences whose contiguous spans may be copied.
        separator_ids: tokens that close the current span and open a new one.
        end_ids: tokens that end the output (for example the chat end-of-turn token).
        max_spans: at most this many spans (``None``: unlimited); after the last span
            only continuing it or ending is allowed.
        boundary_ids: if given, spans are whole units (for example sentences): a span may
            start only at the start of a source or right after one of these tokens, and
            may end only right after one of them or at the end of a source.

    Raises:
        ValueError: no source tokens, or a separator/end id that is negative.
    """

    def __init__(
        self,
        sources: Sequence[Sequence[int]],
        *,
        separator_ids: Sequence[int] = (),
        end_ids: Sequence[int] = (),
        max_spans: int | None = None,
        boundary_ids: Sequence[int] | None = None,
    ) -> None:
        parts: list[int] = []
        for src in sources:
            if len(src):
                parts.extend(int(t) for t in src)
                parts.append(_GAP)
        if not parts:
            raise ValueError("sources must hold at least one token")
        if any(t < 0 for t in [*separator_ids, *end_ids]):
            raise ValueError("separator_ids and end_ids must be non-negative token ids")
        if max_spans is not None and max_spans < 1:
            raise ValueError(f"max_spans must be >= 1 or None, got {max_spans}")
        self.text = np.asarray(parts, dtype=np.int64)
        self.separators = frozenset(int(t) for t in separator_ids)
        self.ends = frozenset(int(t) for t in end_ids)
        self.max_spans = max_spans
        real = self.text != _GAP
        if boundary_ids is None:
            self._starts = np.flatnonzero(real)
            self._can_end = np.ones(len(self.text), dtype=bool)
        else:
            bounds = np.isin(self.text, np.asarray(sorted(set(boundary_ids)), dtype=np.int64))
            prev = np.concatenate([[True], (self.text == _GAP)[:-1] | bounds[:-1]])
            self._starts = np.flatnonzero(real & prev)
            # a span whose next position is p is complete if token p-1 is a boundary
            # or p is the end of its source
            self._can_end = np.zeros(len(self.text), dtype=bool)
            self._can_end[1:] = bounds[:-1]
            self._can_end |= ~real
        self._free_ends = boundary_ids is None
        self._positions = self._starts
        self._span_len = 0
        self._spans = 0
        self.finished = False

    def allowed(self) -> set[int]:
        """Token ids allowed as the next token."""
        if self.finished:
            return set(self.ends)
        nxt = self.text[self._positions]
        allowed = {int(t) for t in np.unique(nxt[nxt != _GAP])}
        if self._span_len > 0 and (self._free_ends or self._can_end[self._positions].any()):
            allowed |= self.ends
            if self.max_spans is None or self._spans < self.max_spans:
                allowed |= self.separators
        return allowed

    def advance(self, token: int) -> None:
        """Consume ``token``; raises ValueError if it was not allowed."""
        token = int(token)
        if self.finished:
            if token in self.ends:
                return
            raise ValueError(f"token {token} after the end of a constrained output")
        closable = self._span_len > 0 and (
            self._free_ends or bool(self._can_end[self._positions].any())
        )
        if closable and token in self.ends:
            self.finished = True
            return
        spans_left = self.max_spans is None or self._spans < self.max_spans
        if closable and token in self.separators and spans_left:
            self._positions = self._starts
            self._span_len = 0
            return
        keep = self._positions[self.text[self._positions] == token]
        if keep.size == 0:
            raise ValueError(f"token {token} does not continue any source span")
        if self._span_len == 0:
            self._spans += 1
        self._positions = keep + 1
        self._span_len += 1


def is_span_concatenation(
    output: Sequence[int], sources: Sequence[Sequence[int]], separator_ids: Sequence[int]
) -> bool:
    """Whether every separator-free run of ``output`` is a contiguous span of a source.

    The reference check for :class:`SpanCopyConstraint` (quadratic; for tests).
    """
    seps = set(separator_ids)
    runs: list[list[int]] = [[]]
    for t in output:
        if t in seps:
            runs.append([])
        else:
            runs[-1].append(int(t))
    for run in runs:
        if not run:
            continue
        n = len(run)
        if not any(list(src[i : i + n]) == run for src in sources for i in range(len(src) - n + 1)):
            return False
    return True


class CopyLogitsProcessor:
    """A transformers ``LogitsProcessor`` that applies :class:`SpanCopyConstraint`.

    Tokens the constraint forbids get ``-inf``; the constraint state advances by the token
    appended since the previous call. Works with ``model.generate(...,
    logits_processor=LogitsProcessorList([proc]))`` for a batch of one sequence.

    Args:
        constraint: fresh constraint state for the sequence.
        prompt_length: number of prompt tokens (the generated part starts after them).
    """

    def __init__(self, constraint: SpanCopyConstraint, prompt_length: int) -> None:
        self.constraint = constraint
        self.prompt_length = prompt_length
        self._consumed = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if input_ids.shape[0] != 1:
            raise ValueError("CopyLogitsProcessor handles one sequence at a time")
        generated = input_ids[0, self.prompt_length :].tolist()
        for tok in generated[self._consumed :]:
            self.constraint.advance(tok)
        self._consumed = len(generated)
        allowed = sorted(self.constraint.allowed())
        mask = torch.full_like(scores, float("-inf"))
        if allowed:
            idx = torch.tensor(allowed, dtype=torch.long, device=scores.device)
            idx = idx[idx < scores.shape[-1]]
            mask[:, idx] = 0.0
        return scores + mask
