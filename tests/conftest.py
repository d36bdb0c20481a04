"""Shared test set-up."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _close_figures():
    """Analyses called directly (not through the runners, which close what they draw) leave their
    matplotlib figures open; pyplot warns past 20 and keeps them all in memory."""
    yield
    import sys

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
