"""The scoring-logits benchmark script: bad options are refused before any model loads."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "scoring_logits.py"
_spec = importlib.util.spec_from_file_location("scoring_logits_bench", _PATH)
assert _spec is not None
assert _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules["scoring_logits_bench"] = bench
_spec.loader.exec_module(bench)


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
