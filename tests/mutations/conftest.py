"""`-m sample` (CI's wheel-without-openvino and lowest-versions jobs) also selects the tests run.py names for its
mutations, so that every planted slip is caught in every CI job that runs tests of the package, with openvino and
without it (not only where the whole suite runs)."""

from __future__ import annotations

import pytest

from tests.mutations.run import MUTATIONS


def _selections() -> list[tuple[str, str, str]]:
    """(file, test name or "", -k expression or "") of every test a mutation names."""
    out = []
    for mutation in MUTATIONS:
        for test in mutation.tests:
            path, _, rest = test.partition("::")
            out.append((path, "", rest[3:]) if rest.startswith("-k ") else (path, rest, ""))
    return out


def _chosen(item, path: str, name: str, expression: str) -> bool:
    if item.nodeid.split("::")[0] != path:
        return False
    if name:
        return item.name.split("[")[0] == name
    if expression:  # as `pytest -k` selects (run.py runs it so)
        from _pytest.mark import KeywordMatcher
        from _pytest.mark.expression import Expression

        return Expression.compile(expression).evaluate(KeywordMatcher.from_item(item))
    return True


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config, items):
    selections = _selections()
    for item in items:
        if any(_chosen(item, *s) for s in selections):
            item.add_marker("sample")
