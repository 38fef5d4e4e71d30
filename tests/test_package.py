"""The package as users install it: the wheel's metadata, its license, and (in CI's wheel job) that the suite runs
against the installed package, not the source tree."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

import rnnconv

ROOT = Path(__file__).resolve().parent.parent


def test_suite_runs_against_the_installed_package_when_asked():
    if not os.environ.get("RNNCONV_EXPECT_INSTALLED"):
        pytest.skip("only in the CI job that installs the built wheel")
    assert "site-packages" in Path(rnnconv.__file__).parts, rnnconv.__file__


def test_metadata_names_license_and_version():
    meta = importlib.metadata.metadata("rnnconv")
    assert meta["Version"] == rnnconv.__version__
    assert meta["License-Expression"] == "Apache-2.0"
    files = [str(f) for f in importlib.metadata.files("rnnconv") or ()]
    assert any(f.endswith("LICENSE") for f in files), files


def test_every_dependency_has_a_floor():
    requires = importlib.metadata.requires("rnnconv") or []
    core = [r for r in requires if "extra ==" not in r]
    assert core and all(">=" in r for r in core), core


def test_metadata_points_to_the_source_and_the_docs():
    urls = dict(u.split(", ", 1) for u in importlib.metadata.metadata("rnnconv").get_all("Project-URL") or [])
    assert {"Source", "Documentation"} <= set(urls), urls
    assert urls["Documentation"].startswith(urls["Source"]), urls  # docs/ of the source tree, as the README says


def test_source_distribution_ships_what_the_readme_and_the_suite_use():
    """MANIFEST.in (checked here in the source tree; .ci/run builds the sdist and runs the suite from it)."""
    manifest = ROOT / "MANIFEST.in"
    if not manifest.exists():
        pytest.skip("MANIFEST.in is not beside this copy of the tests")
    lines = manifest.read_text().splitlines()
    for folder in ("docs", "fixtures", "tests", "benchmarks"):
        assert f"graft {folder}" in lines, folder
    assert "include CHANGELOG.md" in lines
