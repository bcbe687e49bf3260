"""Boundaries of lc-attention: metadata, public API and the direction of imports."""

from __future__ import annotations

from importlib.metadata import metadata, version

import lc_attention

# lc-attention sits on lc-kernels only.
ALLOWED_LC_IMPORTS: set[str] = {"lc_kernels"}


def test_version_is_read_from_installed_metadata() -> None:
    assert lc_attention.__version__ == version("lc-attention")
    assert metadata("lc-attention")["Requires-Python"] == ">=3.11"


def test_every_public_name_resolves() -> None:
    assert "__version__" in lc_attention.__all__
    missing = [name for name in lc_attention.__all__ if not hasattr(lc_attention, name)]
    assert missing == []


def test_imports_follow_the_dependency_direction(lc_imports) -> None:
    static, dynamic = lc_imports("lc_attention")
    assert static <= ALLOWED_LC_IMPORTS, f"source imports {static - ALLOWED_LC_IMPORTS}"
    assert dynamic <= ALLOWED_LC_IMPORTS, f"import loads {dynamic - ALLOWED_LC_IMPORTS}"
