"""The examples in the docstrings run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "lc_bandits",
    "lc_bandits.config",
    "lc_bandits.environment",
    "lc_bandits.estimator",
    "lc_bandits.experiment",
    "lc_bandits.policies",
    "lc_bandits.queue",
    "lc_bandits.regret",
    "lc_bandits.simulator",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no docstring examples"
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
