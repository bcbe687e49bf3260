"""lc-train's declared TRL floor is the version CI tests.

``SoLoPOTrainer`` needs TRL's fused LM-head log-probabilities; the floor in
``packages/lc-train/pyproject.toml`` is the first release whose trainer tests pass. The
lock pins TRL exactly at that floor, so ``tests(lc-train)`` runs the trainer tests against
it. Raising the lock without the floor (or the floor without the lock) fails here.
"""

from __future__ import annotations

import pathlib
import tomllib

from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _declared_floor(package: str, dist: str) -> str:
    meta = tomllib.loads((ROOT / "packages" / package / "pyproject.toml").read_text())["project"]
    specs = list(meta.get("dependencies", []))
    for extra in meta.get("optional-dependencies", {}).values():
        specs.extend(extra)
    floors = [
        s.version
        for req in map(Requirement, specs)
        if req.name == dist
        for s in req.specifier
        if s.operator == ">="
    ]
    assert len(floors) == 1, f"{package} should declare one '>=' floor for {dist}, got {floors}"
    return floors[0]


def _locked_version(dist: str) -> str:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    versions = {p["version"] for p in lock["package"] if p["name"] == dist}
    assert len(versions) == 1, f"uv.lock should pin one {dist} version, got {versions}"
    return versions.pop()


def _release(version: str) -> tuple[int, ...]:
    parts = [int(p) for p in version.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def test_the_lock_pins_trl_at_lc_trains_declared_floor() -> None:
    floor, locked = _declared_floor("lc-train", "trl"), _locked_version("trl")
    assert _release(locked) == _release(floor), (
        f"lc-train declares trl>={floor} but uv.lock pins {locked}: the trainer tests run "
        "against the lock, so the floor would go untested"
    )
