"""Fixtures for the figure tests."""

from __future__ import annotations

import pytest

from contrastlab.figures import geometry_logs, li2024, nie2023, oar, paradigm, training_curves
from contrastlab.figures.style import save


@pytest.fixture
def drawn(monkeypatch) -> list:
    """The figures the drawing modules save during the test, in order; each is still written, and can be
    read after ``save`` has closed it."""
    figures = []

    def keep(fig, stem, data=None):
        figures.append(fig)
        return save(fig, stem, data)

    for module in (geometry_logs, li2024, nie2023, oar, paradigm, training_curves):
        monkeypatch.setattr(module, "save", keep)
    return figures
