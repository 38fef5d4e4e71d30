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
