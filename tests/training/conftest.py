from __future__ import annotations

from pathlib import Path

import pytest

from contrastlab.data.fixtures import write_demo_corpus, write_senteval_fixture


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
