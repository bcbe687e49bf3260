"""Test configuration shared by every package's tests and the integration tests.

- Hypothesis profiles: ``ci`` (no deadline, bounded examples; chosen when ``CI`` is set)
  and ``dev``. Pick one with ``HYPOTHESIS_PROFILE``.
- ``lc_imports``: which lc packages a source tree imports (static) and which a fresh
  interpreter has loaded after importing a module (dynamic); packages test the direction
  of their imports with it.
"""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    max_examples=25,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", deadline=None, max_examples=50)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


def _static_lc_imports(src: pathlib.Path, own: str) -> set[str]:
    found: set[str] = set()
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found.update(n.split(".")[0] for n in names if n.startswith("lc_"))
    found.discard(own)
    return found


def _dynamic_lc_imports(module: str) -> set[str]:
    code = (
        f"import sys, {module}\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules if m.startswith('lc_')})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    return set(out) - {module}


@pytest.fixture
def lc_imports() -> Callable[[str], tuple[set[str], set[str]]]:
    """``lc_imports("lc_evals") -> (static, dynamic)`` sets of other lc packages imported."""

    def inspect(module: str) -> tuple[set[str], set[str]]:
        mod = __import__(module)
        src = pathlib.Path(mod.__file__).parent
        return _static_lc_imports(src, module), _dynamic_lc_imports(module)

    return inspect
