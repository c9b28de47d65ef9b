"""A job's label, failure record and TensorBoard folder (contrastlab.workflow.job), from its wildcards."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from contrastlab.workflow.job import events_dir_of, failure_record, job_label

CELL = {"experiment": "nie2023", "backbone": "bert-base", "method": "mpt", "seed": "42"}


def job(rule: str, wildcards: dict) -> SimpleNamespace:
    return SimpleNamespace(rule=rule, wildcards=wildcards, config={"results_dir": "results/demo"})


def test_a_cells_job_is_labelled_and_records_its_failure_where_its_metrics_lie():
    train = job("train", CELL)
    assert job_label(train) == "rule train nie2023/bert-base/mpt/seed42"
    assert failure_record(train) == Path("results/demo/metrics/nie2023/bert-base/mpt/seed42/failed.json")
    train.wildcards = SimpleNamespace(**CELL, items=CELL.items)  # Snakemake's wildcards: attributes too
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
