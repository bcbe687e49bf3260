"""Write a small real arena task: a Python package with a bug, its tests, an issue file.

The package ``mathx`` (three modules, a pytest suite) has a bug in ``clamp``: values
above the upper bound are returned unchanged. The issue JSON names the gold patch and the
repository's test command (pytest), so the task runs as is with ``lc-agents arena``.

Run:  uv run python packages/lc-evals/benchmarks/arena_task.py /tmp/arena-demo
Then: uv run lc-agents arena --repo /tmp/arena-demo/mathx \\
          --issue /tmp/arena-demo/issue.json --out /tmp/arena-demo/results
"""

from __future__ import annotations

import json
import pathlib
import sys

from lc_evals.arena import make_diff

CORE = '''"""Small numeric helpers."""


def clamp(x, lo, hi):
    """Limit x to the closed interval [lo, hi]."""
    if lo > hi:
        raise ValueError("lo must not exceed hi")
    if x < lo:
        return lo
    return x


def lerp(a, b, t):
    """Linear interpolation between a and b at fraction t."""
    return a + (b - a) * t
'''
FIXED = CORE.replace(
    "    if x < lo:\n        return lo\n    return x\n",
    "    if x < lo:\n        return lo\n    if x > hi:\n        return hi\n    return x\n",
)
STATS = '''"""Summary statistics."""

from mathx.core import clamp


def mean(xs):
    """Arithmetic mean of a non-empty sequence."""
    if not xs:
        raise ValueError("mean of an empty sequence")
    return sum(xs) / len(xs)


def normalized(xs, lo=0.0, hi=1.0):
    """Each value clamped into [lo, hi]."""
    return [clamp(x, lo, hi) for x in xs]
'''
TESTS = """import pytest

from mathx.core import clamp, lerp
from mathx.stats import mean


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_clamp_below():
    assert clamp(-3, 0, 10) == 0


def test_clamp_bad_interval():
    with pytest.raises(ValueError):
        clamp(1, 2, 0)


def test_lerp():
    assert lerp(0.0, 10.0, 0.25) == 2.5


def test_mean():
    assert mean([1, 2, 3]) == 2
"""
ISSUE = (
    "clamp() ignores the upper bound: clamp(15, 0, 10) returns 15 instead of 10, so "
    "mathx.stats.normalized([0.5, 2.0]) gives [0.5, 2.0] instead of [0.5, 1.0]."
)
# the test a careful reviewer would add (used by the oracle run of the benchmark)
REVIEW_TESTS = """from mathx.core import clamp
from mathx.stats import normalized


def test_clamp_above():
    assert clamp(15, 0, 10) == 10


def test_normalized_caps_at_one():
    assert normalized([0.5, 2.0]) == [0.5, 1.0]
"""


def write_task(dest: str | pathlib.Path) -> pathlib.Path:
    """Create ``dest/mathx`` (the repository), ``dest/gold.diff`` and ``dest/issue.json``;
    return the issue file's path."""
    root = pathlib.Path(dest)
    repo = root / "mathx"
    (repo / "mathx").mkdir(parents=True, exist_ok=True)
    (repo / "tests").mkdir(exist_ok=True)
    (repo / "mathx" / "__init__.py").write_text('"""mathx: small numeric helpers."""\n')
    (repo / "mathx" / "core.py").write_text(CORE)
    (repo / "mathx" / "stats.py").write_text(STATS)
    (repo / "tests" / "test_mathx.py").write_text(TESTS)
    (repo / "README.md").write_text("# mathx\n\nSmall numeric helpers. Run `pytest`.\n")
    (root / "gold.diff").write_text(make_diff("mathx/core.py", CORE, FIXED))
    issue = {
        "id": "mathx-clamp-upper",
        "repo": "mathx",
        "description": ISSUE,
        "gold_patch_file": "gold.diff",
        "test_command": ["{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    }
    path = root / "issue.json"
    path.write_text(json.dumps(issue, indent=2) + "\n")
    return path


if __name__ == "__main__":
    print(write_task(sys.argv[1] if len(sys.argv) > 1 else "arena-demo"))
