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
