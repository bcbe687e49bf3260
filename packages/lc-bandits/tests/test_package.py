"""Boundaries of lc-bandits: metadata, public API and the direction of imports."""

from __future__ import annotations

from importlib.metadata import metadata, version

import lc_bandits

# lc-bandits stands alone.
ALLOWED_LC_IMPORTS: set[str] = set()


def test_version_is_read_from_installed_metadata() -> None:
    assert lc_bandits.__version__ == version("lc-bandits")
    assert metadata("lc-bandits")["Requires-Python"] == ">=3.11"


def test_every_public_name_resolves() -> None:
    assert "__version__" in lc_bandits.__all__
    missing = [name for name in lc_bandits.__all__ if not hasattr(lc_bandits, name)]
    assert missing == []


def test_imports_follow_the_dependency_direction(lc_imports) -> None:
    static, dynamic = lc_imports("lc_bandits")
    assert static <= ALLOWED_LC_IMPORTS, f"source imports {static - ALLOWED_LC_IMPORTS}"
    assert dynamic <= ALLOWED_LC_IMPORTS, f"import loads {dynamic - ALLOWED_LC_IMPORTS}"
