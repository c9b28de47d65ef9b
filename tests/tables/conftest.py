"""Fixtures for the table tests (helpers in tables_synthetic.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def margin_loss_config(monkeypatch) -> dict:
    """config.yaml with the README's user loss (examples/margin_infonce.py) beside Nie's losses, on
    BERT-base: the comparison tables' preset (test_comparison.py)."""
    from contrastlab import config as cl_config
    from contrastlab.paths import REPO_ROOT

    monkeypatch.chdir(REPO_ROOT)
    loss = "examples/margin_infonce.py:margin_infonce"
    config = cl_config.load(
        REPO_ROOT / "config.yaml",
        {"experiments": {"nie2023": {"methods": {"margin_nce": {"loss": loss, "hp": {"tau": 0.05}}}}}},
    )
    config["select"] = {"experiments": ["nie2023"], "backbones": ["bert-base"]}
    return config
