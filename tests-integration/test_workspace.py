"""The workspace as a whole: dependency direction, versions, changelogs, docs coverage."""

from __future__ import annotations

import pathlib
import re
import tomllib
from importlib.metadata import requires, version

import pytest
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").exists())

# Which lc packages each package may depend on (DESIGN: imports run one way only).
ALLOWED = {
    "lc-kernels": set(),
    "lc-attention": {"lc-kernels"},
    "lc-train": {"lc-kernels", "lc-attention", "lc-agents"},
    "lc-agents": {"lc-evals", "lc-attention"},
    "lc-evals": set(),
    "lc-robotics-reward": set(),
    "lc-bandits": set(),
    "lc-timeseries-kd": set(),
}


def _pyproject(package: str) -> dict:
    return tomllib.loads((ROOT / "packages" / package / "pyproject.toml").read_text())


def test_the_workspace_has_the_eight_packages() -> None:
    assert PACKAGES == sorted(ALLOWED)


@pytest.mark.parametrize("package", PACKAGES)
def test_lc_dependencies_point_one_way(package: str) -> None:
    declared = {
        Requirement(r).name
        for r in requires(package) or []
        if Requirement(r).name.startswith("lc-")
    }
    assert declared <= ALLOWED[package], (
        f"{package} may not depend on {declared - ALLOWED[package]}"
    )


def test_dependency_graph_is_acyclic() -> None:
    graph = {p: {Requirement(r).name for r in requires(p) or []} & set(PACKAGES) for p in PACKAGES}
    done: set[str] = set()

    def visit(node: str, stack: tuple[str, ...]) -> None:
        assert node not in stack, f"cycle: {' -> '.join((*stack, node))}"
        if node not in done:
            for dep in graph[node]:
                visit(dep, (*stack, node))
            done.add(node)

    for p in PACKAGES:
        visit(p, ())


@pytest.mark.parametrize("package", PACKAGES)
def test_installed_version_has_a_changelog_entry(package: str) -> None:
    declared = _pyproject(package)["project"]["version"]
    assert version(package) == declared
    changelog = (ROOT / "packages" / package / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[{re.escape(declared)}\]", changelog, re.M), (
        f"{package} {declared} has no CHANGELOG entry"
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_has_a_guide_and_an_api_page(package: str) -> None:
    module = package.replace("-", "_")
    nav = (ROOT / "mkdocs.yml").read_text()
    assert f"packages/{package}.md" in nav
    assert f"::: {module}" in (ROOT / "docs" / "api" / f"{module}.md").read_text()
