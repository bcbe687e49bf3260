"""The question-scoring benchmark script: bad options are refused before any model loads."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _load import load_script  # the scripts' folder, on the path above

bench = load_script("question_scoring")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sentences", "abc"], "comma-separated integers"),
        (["--sentences", "0"], "at least 1"),
        (["--sentences", ""], "at least 1"),
        (["--repeats", "0"], "--repeats must be >= 1"),
    ],
)
def test_bad_options_are_refused(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        bench.main(argv)
    assert message in capsys.readouterr().err


def test_sentences_are_prose_of_bounded_length() -> None:
    texts = bench.sentences(40)
    assert len(texts) == len(set(texts)) == 40
    assert all(8 <= len(t.split()) <= 60 for t in texts)
    assert all("\n" not in t for t in texts)
    with pytest.raises(SystemExit, match="fewer than"):
        bench.sentences(10**7)
