"""Exception types of lc-evals."""

from __future__ import annotations


class ResultsFileError(ValueError):
    """A results (or suite) JSON Lines file has a line that cannot be read.

    Attributes:
        path: the file.
        line: 1-based line number of the bad line.
        reason: what is wrong with it.
    """

    def __init__(self, path: str, line: int, reason: str) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        super().__init__(f"{path}, line {line}: {reason}")


_STALE_REASONS = {
    "item": "were made for other items (task, seed, options, tokenizer or text differ)",
    "system": "were produced by another system or settings "
    "(identity, prompt template, generation options or scorer differ)",
    "no fingerprint": "carry no fingerprint (written before lc-evals 0.6), "
    "so what produced them is unknown",
}


class StaleResultsError(ValueError):
    """A results file holds results that were not produced by this item and system.

    Every result line records a fingerprint of its item (task, context, question,
    answers, options, seed, tokenizer) and of the run (system identity, prompt template,
    generation options, scorer). Resuming reuses a line only when both match; otherwise
    the run stops with this error rather than report another run's scores.

    Attributes:
        path: the results file.
        stale: ids of the results that do not match.
        reason: what differs (``"item"``, ``"system"`` or ``"no fingerprint"``) for the
            first of them.
    """

    def __init__(self, path: str, stale: list[str], reason: str) -> None:
        self.path = path
        self.stale = stale
        self.reason = reason
        shown = ", ".join(repr(s) for s in stale[:3]) + (", ..." if len(stale) > 3 else "")
        what = _STALE_REASONS.get(reason, reason)
        super().__init__(
            f"{path}: {len(stale)} result(s) {what} (first: {shown}); they are not "
            "reused. Write to a new results file, or "
            "pass on_mismatch='rerun' (CLI: --rerun-stale) to evaluate them again "
            "(the old lines are moved to a .stale.jsonl file beside it)"
        )


class ResultsFileWarning(UserWarning):
    """A results file needed a repair that loses nothing finished (a torn last line)."""
