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
