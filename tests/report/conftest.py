"""Fixtures shared by the report's tests."""

from __future__ import annotations

import pytest

from contrastlab import config as cl_config
from contrastlab.config import Grid
from contrastlab.paths import REPO_ROOT, Results


@pytest.fixture(scope="session")
def unrun_demo(tmp_path_factory):
    """The results folder of the demo preset's report (its figures catalogued) written with no cell run."""
    from contrastlab.figures.catalog import figures
    from contrastlab.report import build_report

    root = tmp_path_factory.mktemp("unrun-demo")
    demo = cl_config.load(REPO_ROOT / "config" / "demo.yaml")
    build_report(Results(root), demo, figures=figures(Grid(demo)))
    return root
