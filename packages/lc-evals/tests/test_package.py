"""Boundaries of lc-evals: metadata, public API and the direction of imports."""

from __future__ import annotations

from importlib.metadata import metadata, version

import lc_evals

# lc-evals imports no other lc package.
ALLOWED_LC_IMPORTS: set[str] = set()


def test_version_is_read_from_installed_metadata() -> None:
    assert lc_evals.__version__ == version("lc-evals")
    assert metadata("lc-evals")["Requires-Python"] == ">=3.11"


def test_every_public_name_resolves() -> None:
    assert "__version__" in lc_evals.__all__
    missing = [name for name in lc_evals.__all__ if not hasattr(lc_evals, name)]
    assert missing == []


def test_imports_follow_the_dependency_direction(lc_imports) -> None:
    static, dynamic = lc_imports("lc_evals")
    assert static <= ALLOWED_LC_IMPORTS, f"source imports {static - ALLOWED_LC_IMPORTS}"
    assert dynamic <= ALLOWED_LC_IMPORTS, f"import loads {dynamic - ALLOWED_LC_IMPORTS}"
