"""Boundaries of lc-robotics-reward: metadata, public API and the direction of imports."""

from __future__ import annotations

from importlib.metadata import metadata, version

import lc_robotics_reward

# lc-robotics-reward stands alone.
ALLOWED_LC_IMPORTS: set[str] = set()


def test_version_is_read_from_installed_metadata() -> None:
    assert lc_robotics_reward.__version__ == version("lc-robotics-reward")
    assert metadata("lc-robotics-reward")["Requires-Python"] == ">=3.11"


def test_every_public_name_resolves() -> None:
    assert "__version__" in lc_robotics_reward.__all__
    missing = [name for name in lc_robotics_reward.__all__ if not hasattr(lc_robotics_reward, name)]
    assert missing == []


def test_imports_follow_the_dependency_direction(lc_imports) -> None:
    static, dynamic = lc_imports("lc_robotics_reward")
    assert static <= ALLOWED_LC_IMPORTS, f"source imports {static - ALLOWED_LC_IMPORTS}"
    assert dynamic <= ALLOWED_LC_IMPORTS, f"import loads {dynamic - ALLOWED_LC_IMPORTS}"
