"""The scoring-logits benchmark script: bad options are refused before any model loads."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _load import load_script  # the scripts' folder, on the path above

bench = load_script("scoring_logits")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--lengths", "abc"], "comma-separated integers"),
        (["--lengths", "64"], "at least 128 tokens"),
        (["--lengths", ""], "at least 128 tokens"),
        (["--repeats", "0"], "--repeats must be >= 1"),
    ],
)
def test_bad_options_are_refused(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        bench.main(argv)
    assert message in capsys.readouterr().err


def test_prose_is_cut_to_the_asked_length() -> None:
    class Words:  # one token per word
        def encode(self, text: str, **_: object) -> list[str]:
            return text.split()

        def decode(self, ids: list[str]) -> str:
            return " ".join(ids)

    text = bench.prose(Words(), 300)
    assert len(text.split()) == 300
    with pytest.raises(SystemExit, match="fewer than"):
        bench.prose(Words(), 10**9)
