"""Comparisons (verification/results.py): shapes are compared as they are, never permuted to fit; NaN is reported
and NaN against NaN agrees."""

from __future__ import annotations

import numpy as np

from rnnconv.verification import results as vresults


def test_shapes_are_never_guessed_and_nan_is_reported():
    c = vresults.compare("Y", np.zeros((2, 3)), np.zeros((3, 2)), 1e-5, 1e-5)
    assert not c.ok and "shape" in c.problem
    a = np.ones((4, 2))
    b = a.copy()
    b[2, 1] = np.nan
    c = vresults.compare("Y", a, b, 1e-5, 1e-5, time_axis=0)
    assert not c.ok and c.nan == (0, 1) and "NaN" in c.problem and c.worst_index == (2, 1)
    same = vresults.compare("Y", b, b, 1e-5, 1e-5)
    assert same.ok and same.nan == (1, 1)
