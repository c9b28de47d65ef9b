"""Fixtures for the table tests (helpers in tables_synthetic.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tables_synthetic import make_config, write_synthetic_metrics


@pytest.fixture
def config() -> dict:
    return make_config()


@pytest.fixture
def metrics_root(tmp_path: Path) -> Path:
    root = tmp_path / "results" / "metrics"
    write_synthetic_metrics(root)
    return root
