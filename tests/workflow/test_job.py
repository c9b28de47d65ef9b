"""contrastlab.workflow.job without Snakemake: a job's label in one-line errors, where its failure record
lies (under the config's results_dir: the one place a test must redirect), and which failures a retry
cannot help."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from contrastlab.workflow.job import failure_record, is_deterministic_failure, job_label

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
