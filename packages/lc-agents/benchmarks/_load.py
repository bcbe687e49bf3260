"""Import a benchmark script of this folder as a module, for its tests.

The scripts are not a package (each runs as ``python benchmarks/<name>.py``), so tests
load them by path. The module is registered in ``sys.modules`` before it runs, which
dataclasses need to resolve their annotations.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent


def load_script(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported as module ``<name>_bench``."""
    path = HERE / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_bench", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load benchmark script {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
