"""Fixtures of the end-to-end tests (every module here that starts Snakemake runs on one xdist worker)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def e2e_resources(tmp_path_factory) -> Path:
    """One ``resources_dir`` for every end-to-end config of the session (the tiny BERT materialised, the
    SentEval fixture, the generated corpus and its tokenised cache), as the presets share ``resources/``:
    each run builds only what an earlier one has not. ``results_dir`` stays each test's own."""
    return tmp_path_factory.mktemp("e2e-resources")
