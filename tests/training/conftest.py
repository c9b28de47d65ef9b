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


@pytest.fixture(scope="session")
def read_curves():
    """``read_curves(folder)``: a TensorBoard run folder's scalars as {tag: [(step, value), ...]}, read
    as TensorBoard reads them (EventAccumulator: every event file of the folder, purges applied)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def read(folder: Path) -> dict[str, list[tuple[int, float]]]:
        accumulator = EventAccumulator(str(folder), size_guidance={"scalars": 0})  # 0: keep every point
        accumulator.Reload()
        return {
            tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()["scalars"]
        }

    return read
