"""Bad numbers in the files the tables read answer in one line naming the file and the key (reliability 9,
H1: a metrics file a buggy evaluator wrote; H2: a paper's published-table files edited by hand)."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from contrastlab.paths import UnreadableMetricsError
from contrastlab.tables import published
from contrastlab.tables.metrics import collect_metrics

GOOD = {"scores": {"STS12": 70.0, "STSBenchmark": 80.0}, "sts_avg": 75.0, "tr_avg": 85.0, "mode": "test"}


def write_cell(root, metrics: dict):
    path = root / "nie2023" / "tiny-bert" / "cl" / "seed42" / "senteval.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(metrics))  # NaN and Infinity as JSON's extensions, as Python writes them
    return path


@pytest.mark.fault(
    "a string or infinity as a score in a cell's senteval.json (H1)", "one line naming file and key"
)
@pytest.mark.parametrize(
    ("edit", "key"),
    [
        ({"sts_avg": "n/a"}, "'n/a' at sts_avg, not a number"),
        ({"scores": {"STS12": "77.1"}}, "'77.1' at scores.STS12, not a number"),
        ({"tr_avg": "high"}, "'high' at tr_avg, not a number"),
        ({"sts_avg": math.inf}, "inf at sts_avg, not a finite score"),
        ({"scores": {"STSBenchmark": -math.inf}}, "-inf at scores.STSBenchmark, not a finite score"),
        ({"training": {"best_dev_spearman": True}}, "True at training.best_dev_spearman, not a number"),
        ({"scores": [70.0]}, "[70.0] at scores, not a mapping of task to score"),
    ],
)
def test_a_metrics_file_with_a_score_that_is_not_a_number_is_named(tmp_path, edit, key):
    path = write_cell(tmp_path, {**GOOD, **edit})
    with pytest.raises(UnreadableMetricsError) as raised:
        collect_metrics(tmp_path)
    assert str(raised.value).startswith(f"metrics file {path} holds {key}: delete it and run the workflow")


@pytest.mark.fault(
    "a cell's senteval.json without any score key (H1)", "refused naming the file, not shown as not run"
)
def test_a_metrics_file_without_scores_is_refused_not_read_as_not_run(tmp_path):
    path = write_cell(tmp_path, {"mode": "test", "pooling": "cls"})
    with pytest.raises(UnreadableMetricsError, match=f"metrics file {path} holds none of scores, sts_avg"):
        collect_metrics(tmp_path)


def test_a_nan_score_stays_a_diverged_row(tmp_path):
    """NaN is what a diverged evaluation writes (the tables mark it "diverged"): it is read, as NaN."""
    write_cell(tmp_path, {**GOOD, "sts_avg": math.nan})
    frame = collect_metrics(tmp_path).set_index("task")["score"]
    assert math.isnan(frame["sts_avg"]) and frame["STS12"] == 70.0 and frame["tr_avg"] == 85.0


@pytest.fixture
def published_copy(tmp_path, monkeypatch):
    """The published tables in a folder of their own, the loaders' caches emptied before and after."""
    folder = tmp_path / "published"
    shutil.copytree(published.PUBLISHED_DIR, folder)
    monkeypatch.setattr(published, "PUBLISHED_DIR", folder)
    published.load_meta.cache_clear()
    published._load_published.cache_clear()
    yield folder
    published.load_meta.cache_clear()
    published._load_published.cache_clear()


@pytest.mark.fault(
    "`56.70` typed `56.7O` in a published table's CSV (H2)", "one line naming file, line and column"
)
def test_a_published_number_that_is_not_a_number_names_its_file_line_and_column(published_copy):
    csv_path = published_copy / "nie2023_table1.csv"
    lines = csv_path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith(",56.70"))
    lines[at] = lines[at].replace("56.70", "56.7O")
    csv_path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as raised:
        published.load_published("nie2023_table1")
    assert str(raised.value) == (
        f"published table {csv_path}: line {at + 1}, column value: '56.7O' is not a number; write the "
        "paper's number (empty where it prints none)"
    )


@pytest.mark.fault(
    "a typo (cll) in a published table's layout.methods (H2)", "one line naming file, name, known ones"
)
def test_a_layout_name_without_rows_is_named_with_the_known_ones(published_copy):
    yaml_path = published_copy / "nie2023_table1.yaml"
    yaml_path.write_text(
        yaml_path.read_text().replace("methods: [pretrained, cl, au,", "methods: [pretrained, cll, au,")
    )
    with pytest.raises(ValueError) as raised:
        published.load_meta("nie2023_table1")
    message = str(raised.value)
    assert message.startswith(f"published table {yaml_path}: layout.methods names 'cll', which no row of ")
    assert message.endswith("known: pretrained, cl, au, dcl, dcl_plus, mpt, met, mat")


def test_every_shipped_table_passes_its_checks():
    """The checks refuse nothing the project ships: a swept table's methods are its points' names
    (macl_table9's ntxent is ntxent-bs64, ...), and a task may have no published row (nie2023's tr_avg)."""
    published.load_meta.cache_clear()
    for name in published.TABLES:
        assert published.load_meta(name)["layout"] and len(published.load_published(name)) > 0
