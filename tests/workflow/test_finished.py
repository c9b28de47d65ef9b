"""Finished work is checked before it is trusted (issue 63 item 5): a metrics file that cannot be parsed is
named by the job that reads it; the size and sha256 of a cell's weights and metrics recorded when its job
ended; a finished file that no longer matches its record named and moved aside, so that the workflow makes
that cell again (contrastlab.paths.read_metrics, contrastlab.workflow.finished)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contrastlab.paths import Results
from contrastlab.workflow.job import logged_to

CELL = "nie2023/tiny-bert/cl/seed42"
METRICS = {"scores": {"STS12": 70.0, "STSBenchmark": 75.5}, "sts_avg": 72.75, "alignment": 0.4}
METRICS.update(uniformity=-2.5, mode="test", training={"precision": "fp32"})


def truncated_metrics(root: Path) -> Path:
    """A finished cell's ``senteval.json`` cut to half, as the reliability run K1 left it."""
    path = Path(Results(root).metrics(CELL, "sentence"))
    path.parent.mkdir(parents=True)
    text = json.dumps(METRICS, indent=1)
    path.write_text(text[: len(text) // 2])
    return path


def _readers(root: Path, path: Path):
    """Each job that reads a cell's metrics file, as the library call its script makes."""
    from contrastlab.figures.sweeps import sweep_metrics_frame
    from contrastlab.figures.training_curves import alignment_uniformity_frame
    from contrastlab.hub.cards import write_model_card
    from contrastlab.tables.metrics import collect_metrics

    metrics_root = Results(root).metrics()
    card = Path(Results(root).card(CELL))
    cell = dict(experiment="nie2023", backbone="tiny-bert", method="cl", seed=42)
    return {
        "model_card": lambda: write_model_card(
            card, **cell, model_dir=root / "model", metrics_path=path, markers={}
        ),
        "figure_align_uniform": lambda: alignment_uniformity_frame(metrics_root, "nie2023"),
        "figure_lr_sweep": lambda: sweep_metrics_frame(metrics_root, "nie2023", {"cl": ("lr", 1e-5)}),
        "tables": lambda: collect_metrics(metrics_root),
    }


@pytest.mark.fault(
    "a finished cell's metrics JSON cut to half",
    "the card, figure and table jobs fail in one line naming the file and the fix",
)
@pytest.mark.parametrize("rule", ["model_card", "figure_align_uniform", "figure_lr_sweep", "tables"])
def test_an_unparseable_metrics_file_is_named_with_the_fix(tmp_path, capsys, observed, rule):
    """Reliability K1: the card and figure jobs said ``JSONDecodeError: Unterminated string ...`` and
    named no file."""
    path = truncated_metrics(tmp_path)
    log = tmp_path / "job.log"
    with pytest.raises(SystemExit):
        with logged_to(log, f"rule {rule} {CELL}"):
            _readers(tmp_path, path)[rule]()
    (line,) = capsys.readouterr().err.splitlines()
    observed(line)
    assert line.startswith(f"contrastlab: rule {rule} {CELL}: UnreadableMetricsError: metrics file {path} ")
    assert "cannot be read (JSONDecodeError: Unterminated string" in line
    assert "delete it and run the workflow again: only that evaluation is redone" in line


def test_a_metrics_file_that_holds_no_object_is_named_too(tmp_path):
    from contrastlab.paths import UnreadableMetricsError, read_metrics

    path = tmp_path / "senteval.json"
    path.write_text("[]")
    with pytest.raises(UnreadableMetricsError, match=f"metrics file {path} holds no JSON object"):
        read_metrics(path)
    path.write_text(json.dumps(METRICS))
    assert read_metrics(path) == METRICS
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(UnreadableMetricsError, match="UnicodeDecodeError"):
        read_metrics(path)
