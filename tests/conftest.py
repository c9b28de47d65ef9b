"""Shared fixtures: the optional ../shared folder and small generated data."""

from __future__ import annotations

import os

import pytest

from contrastlab.paths import REPO_ROOT, shared_dir

# Tests run offline: nothing may reach the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def repo_root():
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared():
    """The ../shared folder with the real data and papers; skips the test when absent."""
    folder = shared_dir()
    if folder is None:
        pytest.skip("../shared (real SentEval data and papers) is not beside this clone")
    return folder
