"""The RULER examples page is what its script generates today."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

import lc_evals

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "ruler_examples.py"


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("ruler_examples", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_page_has_one_example_per_config_with_needles_shown() -> None:
    page = _script().render_page()
    sections = re.findall(r"^## (\S+)\n\n.*?\n\n```text\n(.*?)\n```$", page, re.S | re.M)
    assert [name for name, _ in sections] == list(lc_evals.RULER_CONFIGS)
    for name, prompt in sections:
        (item,) = lc_evals.ruler_suite([4096], n=1, seed=0, configs=[name])
        assert prompt.endswith(item.metadata["answer_prefix"])
        if name.startswith(("niah", "vt")):  # the needles survive the cut
            assert all(needle in prompt for needle in item.metadata["needles"])
        assert len(prompt) < len(lc_evals.render_prompt(item))


@pytest.mark.skipif(not _script().PAGE.parent.exists(), reason="no docs tree beside this checkout")
def test_page_is_up_to_date() -> None:
    module = _script()
    assert module.PAGE.read_text() == module.render_page(), (
        "docs/benchmarks/lc-evals-ruler.md is stale: run "
        "packages/lc-evals/benchmarks/ruler_examples.py"
    )
