"""Boundaries of lc-train: metadata, public API and the direction of imports."""

from __future__ import annotations

from importlib.metadata import metadata, version

import lc_train

# lc-train may use lc-attention, lc-kernels and (extra) lc-agents.
ALLOWED_LC_IMPORTS: set[str] = {"lc_kernels", "lc_attention", "lc_agents", "lc_evals"}


def test_version_is_read_from_installed_metadata() -> None:
    assert lc_train.__version__ == version("lc-train")
    assert metadata("lc-train")["Requires-Python"] == ">=3.11"


def test_every_public_name_resolves() -> None:
    assert "__version__" in lc_train.__all__
    missing = [name for name in lc_train.__all__ if not hasattr(lc_train, name)]
    assert missing == []


def test_imports_follow_the_dependency_direction(lc_imports) -> None:
    static, dynamic = lc_imports("lc_train")
    assert static <= ALLOWED_LC_IMPORTS, f"source imports {static - ALLOWED_LC_IMPORTS}"
    assert dynamic <= ALLOWED_LC_IMPORTS, f"import loads {dynamic - ALLOWED_LC_IMPORTS}"
