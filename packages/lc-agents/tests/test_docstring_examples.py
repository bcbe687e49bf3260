"""The examples in the docstrings of the embedding modules and their users run as shown.

``python -m pytest --doctest-modules`` is not part of the test command, so modules whose
examples document the embedding contract (and MemAgent's answer extraction) are run
here with :mod:`doctest`.
"""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "lc_agents._removed",
    "lc_agents._validation",
    "lc_agents.ace.dedup",
    "lc_agents.contextnav.pool",
    "lc_agents.memagent.agent",
    "lc_agents.retrieval.embedders",
    "lc_agents.retrieval.store",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_extract_boxed_example_is_a_real_backslash() -> None:
    # the docstring is raw: its example passes "\boxed", not a backspace and "oxed"
    from lc_agents.memagent.agent import extract_boxed

    doc = extract_boxed.__doc__ or ""
    assert "\\boxed{Vessby}" in doc
    assert "\b" not in doc
