"""contrastlab.workflow.job without Snakemake: a job's label in one-line errors, where its failure record
lies (under the config's results_dir: the one place a test must redirect), and which failures a retry
cannot help, and its TensorBoard folder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from contrastlab.workflow.job import events_dir_of, failure_record, is_deterministic_failure, job_label

CELL = {"experiment": "nie2023", "backbone": "tiny-bert", "method": "cl", "seed": "42"}


def test_a_cells_job_is_labelled_by_its_rule_and_cell():
    assert (
        job_label(SimpleNamespace(rule="train", wildcards=CELL)) == "rule train nie2023/tiny-bert/cl/seed42"
    )
    assert job_label(SimpleNamespace(rule="senteval_data", wildcards={})) == "rule senteval_data"


def test_the_failure_record_lies_beside_the_cells_metrics_under_results_dir(tmp_path):
    job = SimpleNamespace(rule="train", wildcards=CELL, config={"results_dir": str(tmp_path / "r")})
    assert failure_record(job) == tmp_path / "r" / "metrics/nie2023/tiny-bert/cl/seed42/failed.json"
    # a config without results_dir: the relative default, i.e. the working directory's results/
    assert failure_record(SimpleNamespace(wildcards=CELL, config={})) == Path(
        "results/metrics/nie2023/tiny-bert/cl/seed42/failed.json"
    )
    assert failure_record(SimpleNamespace(wildcards={"what": "senteval"}, config={})) is None  # no cell


@pytest.mark.parametrize(
    ("error", "deterministic"),
    [
        (FloatingPointError("loss is nan"), True),
        (MemoryError(), True),
        (ValueError("bad setting"), True),
        (OSError("node lost"), False),
        (RuntimeError("CUDA error: an illegal memory access"), False),
    ],
)
def test_only_failures_a_retry_reproduces_are_deterministic(error, deterministic):
    assert is_deterministic_failure(error) is deterministic


OTHER_CELL = {"experiment": "nie2023", "backbone": "bert-base", "method": "mpt", "seed": "42"}


def job(rule: str, wildcards: dict) -> SimpleNamespace:
    """A job of ``rule`` with ``wildcards``, as Snakemake hands it to a script."""
    return SimpleNamespace(rule=rule, wildcards=wildcards, config={"results_dir": "results/demo"})


def test_a_cells_job_is_labelled_and_records_its_failure_where_its_metrics_lie():
    train = job("train", OTHER_CELL)
    assert job_label(train) == "rule train nie2023/bert-base/mpt/seed42"
    assert failure_record(train) == Path("results/demo/metrics/nie2023/bert-base/mpt/seed42/failed.json")
    # Snakemake's wildcards: attributes too
    train.wildcards = SimpleNamespace(**OTHER_CELL, items=OTHER_CELL.items)
    assert events_dir_of(train) == Path("results/demo/tensorboard/nie2023/bert-base/mpt/seed42")


def test_a_job_of_no_cell_is_labelled_by_its_wildcards_and_records_no_failure():
    select = job(
        "search_select", {"experiment": "nie2023", "backbone": "bert-base", "method": "mpt", "stage": "2"}
    )
    assert job_label(select) == "rule search_select nie2023/bert-base/mpt/2"
    assert (
        failure_record(select) is None and failure_record(job("encode_pretrained", {"backbone": "b"})) is None
    )
    assert job_label(job("tables", {})) == "rule tables"
