"""Boundaries of lc-kernels: metadata, public API and the direction of imports."""

from __future__ import annotations

from importlib.metadata import metadata, version

import lc_kernels

# lc-kernels knows nothing of modules, models or training.
ALLOWED_LC_IMPORTS: set[str] = set()


def test_version_is_read_from_installed_metadata() -> None:
    assert lc_kernels.__version__ == version("lc-kernels")
    assert metadata("lc-kernels")["Requires-Python"] == ">=3.11"


def test_every_public_name_resolves() -> None:
    assert "__version__" in lc_kernels.__all__
    missing = [name for name in lc_kernels.__all__ if not hasattr(lc_kernels, name)]
    assert missing == []


def test_imports_follow_the_dependency_direction(lc_imports) -> None:
    static, dynamic = lc_imports("lc_kernels")
    assert static <= ALLOWED_LC_IMPORTS, f"source imports {static - ALLOWED_LC_IMPORTS}"
    assert dynamic <= ALLOWED_LC_IMPORTS, f"import loads {dynamic - ALLOWED_LC_IMPORTS}"
