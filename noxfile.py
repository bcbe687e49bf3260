"""Nox sessions of the lc workspace. ``uv run nox`` runs every default session.

Each package is tested in an environment of its own that holds only the package, its
declared dependencies and its ``test`` dependency group, so an undeclared dependency
(including an undeclared sibling package) fails its tests.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import nox

ROOT = pathlib.Path(__file__).parent
PACKAGES = sorted(p.name for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").exists())

nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "types", "tests", "integration", "docs", "build"]


def _sync(session: nox.Session, *args: str) -> None:
    """Install into the session's venv exactly what ``uv.lock`` pins for ``args``."""
    session.run_install(
        "uv",
        "sync",
        "--locked",
        "--inexact",
        *args,
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        silent=True,
    )


@nox.session(python=False)
def lint(session: nox.Session) -> None:
    """ruff lint and format check over the whole tree."""
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def types(session: nox.Session) -> None:
    """mypy over every package's ``src/``."""
    _sync(session, "--all-packages", "--all-extras", "--group", "dev")
    session.run("mypy", *[f"packages/{p}/src" for p in PACKAGES])


@nox.session
@nox.parametrize("package", PACKAGES, ids=PACKAGES)
def tests(session: nox.Session, package: str) -> None:
    """One package's unit tests, in an environment holding only what it declares
    (its dependencies, all of its optional extras and its `test` group)."""
    _sync(session, "--package", package, "--all-extras", "--no-default-groups", "--group", "test")
    session.run(
        "pytest",
        f"packages/{package}/tests",
        "-p",
        "no:cacheprovider",
        *session.posargs,
    )


@nox.session
def integration(session: nox.Session) -> None:
    """Tests that cross packages or load a real pretrained model."""
    _sync(session, "--all-packages", "--all-extras", "--group", "dev")
    session.run("pytest", "tests-integration", "-p", "no:cacheprovider", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site; warnings are errors."""
    _sync(session, "--all-packages", "--group", "dev")
    session.run("mkdocs", "build", "--strict", "--site-dir", str(ROOT / "site"))


@nox.session(python=False)
def build(session: nox.Session) -> None:
    """Build every wheel, then install each one ALONE into a fresh venv and import it.

    Sibling wheels come from the local ``dist/`` and every other dependency is pinned to
    the versions in ``uv.lock``, so this proves that a user can install one piece.
    """
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.run("uv", "build", "--all-packages", "--out-dir", str(dist), "--quiet")
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != len(PACKAGES):
        session.error(f"expected {len(PACKAGES)} wheels, got {[w.name for w in wheels]}")
    with tempfile.TemporaryDirectory() as tmp:
        pins = pathlib.Path(tmp) / "pins.txt"
        session.run(
            "uv",
            "export",
            "--locked",
            "--all-packages",
            "--all-extras",
            "--no-hashes",
            "--no-emit-workspace",
            "--no-header",
            "--output-file",
            str(pins),
            "--quiet",
        )
        for wheel in wheels:
            dist_name = wheel.name.split("-")[0]
            module = dist_name.replace("-", "_")
            venv = pathlib.Path(tmp) / dist_name
            session.run("uv", "venv", "--quiet", str(venv))
            python = str(venv / "bin" / "python")
            session.run(
                "uv",
                "pip",
                "install",
                "--quiet",
                "--python",
                python,
                "--find-links",
                str(dist),
                "--constraints",
                str(pins),
                str(wheel),
            )
            session.run(
                python, "-c", f"import {module}; print({module}.__name__, {module}.__version__)"
            )


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Run every benchmark script (writes JSON + PNG under docs/benchmarks/)."""
    _sync(session, "--all-packages", "--all-extras", "--group", "dev")
    scripts = sorted(ROOT.glob("packages/*/benchmarks/*.py")) + sorted(ROOT.glob("benchmarks/*.py"))
    for script in scripts:
        if session.posargs and not any(arg in str(script) for arg in session.posargs):
            continue
        session.run("python", str(script), env={"PYTHONHASHSEED": "0", **os.environ})
